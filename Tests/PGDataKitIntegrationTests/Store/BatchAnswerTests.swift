import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// What a batch statement answers is read back row by row into the objects: the keys,
/// versions and unique keys of a save's batch `UPDATE` and keyed-insert claim, and the
/// values of an import's fetch, are the rows', whatever text the server quotes or escapes
/// (an experiment that answered these statements as arrays was read against these tests).
@Suite struct BatchAnswerTests {
    /// Unique keys the array text form quotes or escapes (or spells like `NULL`).
    static let awkwardKeys = [
        "", "NULL", "null", "a b", " lead", "trail ", "x,y", "{b}", "q\"x", "back\\slash", "\\", "\"", "naïve 東京 🚀",
        "tab\there", "line\nbreak", "plain",
    ]

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
                            .map { (RowKey($0.element.0), $0.element.1 + 1) })
                    #expect(written == expected, "checksVersion: \(checksVersion)")
                }
            }
        }
    }

    @Test func anImportsFetchFindsEveryValueAsStored() throws {
        // The objects the import's one fetch per batch finds hold what was stored: values
        // an array's text escapes, NULLs and arrays of every element type included.
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

