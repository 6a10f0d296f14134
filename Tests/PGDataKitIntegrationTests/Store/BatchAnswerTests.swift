import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A batch write answers one row of arrays (`StoreCoordinator.returningArrays`) instead of
/// a row per written row: the keys, versions and unique keys the save reads back from it
/// are the rows', whatever the text the server had to quote.
@Suite struct BatchAnswerTests {
    /// Unique keys the array text form quotes or escapes (or spells like `NULL`).
    static let awkwardKeys = [
        "", "NULL", "null", "a b", " lead", "trail ", "x,y", "{b}", "q\"x", "back\\slash", "\\", "\"", "naïve 東京 🚀",
        "tab\there", "line\nbreak", "plain",
    ]

    @Test func theServersArrayTextReadsBackAsTheTexts() throws {
        try ExampleSchema.withManager { manager in
            try manager.coordinator.pool.withConnection { connection in
                var literal = ArrayLiteralBuilder(capacity: Self.awkwardKeys.count)
                for key in Self.awkwardKeys { try literal.append(key) }
                // array_agg writes the array as the server does for any answer.
                let result = try connection.query(
                    "SELECT array_agg(t.k ORDER BY t.n), array_agg(t.n ORDER BY t.n), array_agg(t.n % 2 = 0 ORDER BY t.n) "
                        + "FROM unnest($1::text[]) WITH ORDINALITY AS t(k, n)",
                    [ArrayLiteral<String>(text: literal.text())])
                var reader = ArrayLiteralReader()
                var texts: [String?] = []
                let wellFormed = try result[0].withBytes(at: 0) { bytes in
                    reader.forEachElement(in: bytes) { texts.append($0.map { String(decoding: $0, as: UTF8.self) }) }
                }
                #expect(wellFormed)
                #expect(texts == Self.awkwardKeys)
                let counted = try StoreCoordinator.returnedInt64s(result, column: 1, reader: &reader)
                #expect(counted == (1...Self.awkwardKeys.count).map(Int64.init))
                let even = try StoreCoordinator.returnedBooleans(result, column: 2, reader: &reader)
                #expect(even == (1...Self.awkwardKeys.count).map { $0 % 2 == 0 })
                // Not arrays of the kind asked: a typed error naming what was wrong.
                #expect(throws: PostgresValueError.self) {
                    try StoreCoordinator.returnedInt64s(result, column: 0, reader: &reader)
                }
                let none = try connection.query("SELECT array_agg(x) FROM generate_series(1, 0) AS x")
                #expect(try StoreCoordinator.returnedInt64s(none, column: 0, reader: &reader) == [])
                let two = try connection.query("SELECT '{1}'::bigint[] FROM generate_series(1, 2)")
                #expect(throws: PostgresValueError.self) {
                    try StoreCoordinator.returnedInt64s(two, column: 0, reader: &reader)
                }
            }
        }
    }

    @Test func keyedInsertsOfAwkwardKeysAreClaimedAndMergedByTheirOwnRows() throws {
        try ExampleSchema.withManager { manager in
            // Two contexts import before either saves: the first half of the keys in one,
            // all of them in the other. The first save claims its keys; the second claims
            // the rest and merges the rows the first one wrote meanwhile.
            func records(_ keys: [String], name: String) -> [JSONValue] {
                keys.map { ["UserID": .string($0), "Name": .string(name)] }
            }
            func setUser(_ record: JSONValue, _ user: User) { user.name = record["Name"]?.stringValue }
            let half = Self.awkwardKeys.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
            let first = manager.newPrivateContext()
            let second = manager.newPrivateContext()
            let firstUsers = try first.performAndWait {
                try User.insertOrUpdate(
                    records(half, name: "first"), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: first, setUser)
            }
            let secondUsers = try second.performAndWait {
                try User.insertOrUpdate(
                    records(Self.awkwardKeys, name: "second"), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: second,
                    setUser)
            }
            let firstIDs = try first.performAndWait {
                try first.save()
                return Dictionary(uniqueKeysWithValues: firstUsers.map { ($0.userID, $0.objectID) })
            }
            try second.performAndWait {
                try second.save()
                #expect(secondUsers.count == Self.awkwardKeys.count)
                for user in secondUsers {
                    #expect(!user.objectID.isTemporaryID, "\(user.userID.debugDescription)")
                    if let earlier = firstIDs[user.userID] {
                        #expect(user.objectID == earlier, "\(user.userID.debugDescription)")
                    }
                }
                let stored = try User.fetchAll(in: second)
                #expect(Set(stored.map(\.userID)) == Set(Self.awkwardKeys))
                #expect(stored.count == Self.awkwardKeys.count)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'second'", in: manager) == Self.awkwardKeys.count)
            #expect(try ExampleSchema.count("SELECT count(DISTINCT user_id) FROM users", in: manager) == Self.awkwardKeys.count)
        }
    }

    @Test func aBatchUpdateAnswersTheNewVersionOfEachRowItWrote() throws {
        try ExampleSchema.withManager { manager in
            try manager.coordinator.pool.withConnection { connection in
                try connection.execute(
                    "INSERT INTO users (user_id, name, age, version) SELECT 'u' || i, 'n', i, i FROM generate_series(1, 300) AS i")
                let entity = try #require(manager.coordinator.model.entity(for: User.self))
                let name = try #require(entity.attribute(named: "name"))
                let keys = try connection.query("SELECT id, version FROM users ORDER BY id").map {
                    (try $0.int64(at: 0), try $0.int64(at: 1))
                }
                for checksVersion in [true, false] {
                    try connection.begin()
                    defer { _ = try? connection.execute("ROLLBACK") }
                    // Every third row read at a version it is no longer at.
                    var rows = RowBatch()
                    rows.attributes = [name]
                    for (index, (key, version)) in keys.enumerated() {
                        rows.keys.append(key)
                        rows.versions.append(index % 3 == 0 ? version + 100 : version)
                        var values = [StoredValue](repeating: .null, count: entity.attributes.count)
                        values[name.index] = .string("renamed")
                        rows.values.append(AttributeValues(values))
                    }
                    let written = try manager.coordinator.updateRows(
                        of: entity, rows, checksVersion: checksVersion, on: connection)
                    let expected = Dictionary(
                        uniqueKeysWithValues: keys.enumerated().filter { !checksVersion || $0.offset % 3 != 0 }
                            .map { ($0.element.0, $0.element.1 + 1) })
                    #expect(written == expected, "checksVersion: \(checksVersion)")
                }
            }
        }
    }

    @Test func anImportsFetchAnswersArraysOfEveryValueAsStored() throws {
        // The import's one fetch per batch answers one row of arrays (a column of an
        // array type as its text): the objects it finds hold what was stored, values the
        // array text escapes, NULLs and arrays of every element type included.
        try ShelfSchema.withManager { manager, _ in
            let codes = Self.awkwardKeys
            try ShelfSchema.insert(codes, in: manager) { shelf in
                if shelf.code.count % 2 == 0 { ShelfSchema.fill(shelf) } else { shelf.bigs = nil; shelf.labels = [shelf.code] }
            }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                var found: [String: Bool] = [:]
                let records: [JSONValue] = codes.map { ["code": .string($0)] }
                let shelves = try Shelf.insertOrUpdate(records, uniqueModelKey: \.code, uniqueRemoteKey: "code", in: context) {
                    _, shelf in
                    found[shelf.code] =
                        shelf.code.count % 2 == 0
                        ? ShelfSchema.isFilled(shelf)
                        : shelf.bigs == nil && shelf.labels == [shelf.code] && shelf.smalls == [1, 2]
                }
                #expect(shelves.count == codes.count)
                #expect(context.insertedObjects.isEmpty)
                #expect(found.count == codes.count)
                for code in codes { #expect(found[code] == true, "\(code.debugDescription)") }
            }
        }
    }
}

