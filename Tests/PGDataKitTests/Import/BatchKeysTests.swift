import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class Ticket: ManagedObject {
    @Attribute(unique: true) var code: String = ""
    @Attribute(unique: true) var number: Int64 = 0
}

/// `RecordImport.BatchKeys` plans a keyed batch from its records alone: no server here.
@Suite("Import batch planning without a server")
struct BatchKeysTests {
    let entity: EntityDescription

    init() throws {
        entity = try #require(try Model(entities: [Ticket.self]).entity(for: Ticket.self))
    }

    private func keys(
        _ records: [JSONValue], key name: String = "code", paths: [String] = ["code"], firstIndex: Int = 0
    ) throws -> RecordImport.BatchKeys {
        let key = try #require(entity.attribute(named: name))
        return try RecordImport.BatchKeys(
            records, firstIndex: firstIndex, key: key, at: paths.map(RemoteKeyPath.init), keyName: paths[0],
            entityName: entity.name, formatters: DateFormatters())
    }

    @Test func recordsOfOneKeyFormAChainInOrderOfFirstAppearance() throws {
        let batch = try keys([["code": "a"], ["code": "b"], ["code": "a"], ["code": "c"], ["code": "b"], ["code": "a"]])
        #expect(batch.order == [0, 1, 3])
        #expect(batch.nextOffset == [2, 4, 5, -1, -1, -1])
        #expect(batch.storedKeys.map { $0.scalar(as: String.self) } == ["a", "b", "a", "c", "b", "a"])
        #expect(batch.firstOffset(of: .string(ExactText("a"))) == 0)
        #expect(batch.firstOffset(of: .string(ExactText("b"))) == 1)
        #expect(batch.firstOffset(of: .string(ExactText("c"))) == 3)
        #expect(batch.firstOffset(of: .string(ExactText("d"))) == nil)
    }

    @Test func textKeysAreTheirBytes() throws {
        // Canonically equivalent spellings are two keys, as for the unique index.
        let batch = try keys([["code": "caf\u{E9}"], ["code": "cafe\u{301}"], ["code": "caf\u{E9}"]])
        #expect(batch.order == [0, 1])
        #expect(batch.nextOffset == [2, -1, -1])
        #expect(batch.firstOffset(of: .string(ExactText("cafe\u{301}"))) == 1)
    }

    @Test func integerKeysAreConverted() throws {
        let batch = try keys([["number": 7], ["number": 8], ["number": 7]], key: "number", paths: ["number"])
        #expect(batch.order == [0, 1])
        #expect(batch.nextOffset == [2, -1, -1])
        #expect(batch.firstOffset(of: .integer(7)) == 0)
        #expect(batch.firstOffset(of: .integer(9)) == nil)
        #expect(batch.firstOffset(of: .string(ExactText("7"))) == nil)
    }

    @Test func theFirstPathPresentGivesTheKey() throws {
        let batch = try keys([["id": "x"], ["meta": ["id": "x"]], ["id": "y", "meta": ["id": "x"]]], paths: ["id", "meta.id"])
        #expect(batch.order == [0, 2])
        #expect(batch.nextOffset == [1, -1, -1])
    }

    @Test func aMissingOrNullKeyNamesItsRecord() throws {
        for record: JSONValue in [["other": 1], ["code": nil]] {
            let error = try #require(throws: ImportError.self) { try keys([["code": "a"], record], firstIndex: 10) }
            #expect(error.code == .missingKey)
            #expect(error.recordIndex == 11)
            #expect(error.attribute == "code")
        }
    }

    @Test func aMistypedKeyNamesItsRecord() throws {
        let error = try #require(throws: ImportError.self) {
            try keys([["number": 1], ["number": ["nested": 1]]], key: "number", paths: ["number"], firstIndex: 5)
        }
        #expect(error.code == .typeMismatch)
        #expect(error.recordIndex == 6)
    }

    @Test func anEmptyBatchPlansNothing() throws {
        let batch = try keys([])
        #expect(batch.order.isEmpty && batch.nextOffset.isEmpty && batch.storedKeys.isEmpty)
    }
}
