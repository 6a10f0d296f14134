import Foundation
import Testing

@testable import PGDataKit

@Suite("Change records without a server")
struct ChangeRecordTests {
    @Test func theRecordFormatRoundTrips() throws {
        var changes = ContextChanges()
        let inserted = ObjectID(entityName: "User", primaryKey: 1)
        let renamed = ObjectID(entityName: "User", primaryKey: 2)
        let aged = ObjectID(entityName: "User", primaryKey: 3)
        let deleted = ObjectID(entityName: "Post", primaryKey: 9)
        changes.inserted = [inserted]
        changes.updated = [renamed, aged]
        changes.changedKeys = [renamed: ["name"], aged: ["age", "name"]]
        changes.deleted = [deleted]
        let text = try ChangeLog.encode(changes)
        #expect(try ChangeLog.decode(text) == changes)
        #expect(text.utf8.count < 300)
        #expect(throws: (any Error).self) { try ChangeLog.decode("{\"not\": \"a record\"}") }
    }

    @Test func keysSortWhateverTheirSpread() {
        var generator = SystemRandomNumberGenerator()
        let dense = (1_000..<3_000).map(Int64.init).shuffled(using: &generator)
        let denseWithRepeats = (dense + dense.prefix(50)).shuffled(using: &generator)
        let sparse = (0..<500).map { _ in Int64.random(in: -1_000_000...1_000_000, using: &generator) }
        let extremes = [Int64.max, Int64.min, 0, -1, 1] + (0..<100).map(Int64.init)
        let negative = (-400 ..< -100).map(Int64.init).shuffled(using: &generator)
        for keys in [dense, denseWithRepeats, sparse, extremes, negative, [3, 1, 2], [], Array(repeating: 7, count: 300)] {
            var sorted = keys
            ChangeLog.sortKeys(&sorted)
            #expect(sorted == keys.sorted())
        }
    }

    @Test func laterDeletionsWinWhenRecordsAreCombined() {
        let id = ObjectID(entityName: "User", primaryKey: 5)
        var first = ContextChanges()
        first.inserted = [id]
        var second = ContextChanges()
        second.updated = [id]
        second.changedKeys = [id: ["age"]]
        var third = ContextChanges()
        third.deleted = [id]
        var combined = ContextChanges()
        combined.formUnion(first)
        combined.formUnion(second)
        #expect(combined.inserted == [id] && combined.updated == [id] && combined.changedKeys[id] == ["age"])
        combined.formUnion(third)
        #expect(combined.inserted.isEmpty && combined.updated.isEmpty && combined.deleted == [id])
        #expect(combined.changedKeys.isEmpty)
    }
}

@Suite("ObjectID hashing")
struct ObjectIDHashingTests {
    @Test func permanentAndTemporaryIDsWorkAsDictionaryKeys() {
        var byID: [ObjectID: Int] = [:]
        for key in Int64(-5_000)..<5_000 {
            byID[ObjectID(entityName: "User", primaryKey: key)] = Int(key)
            byID[ObjectID(entityName: "Post", primaryKey: key)] = Int(key) * 2
        }
        let temporary = ObjectID(temporaryFor: "User")
        byID[temporary] = -1
        #expect(byID.count == 20_001)
        #expect(byID[ObjectID(entityName: "User", primaryKey: 42)] == 42)
        #expect(byID[ObjectID(entityName: "Post", primaryKey: 42)] == 84)
        #expect(byID[temporary] == -1)
        #expect(byID[ObjectID(temporaryFor: "User")] == nil)
        #expect(Set([Int64.min, -1, 0, 1, Int64.max].map { ObjectID(entityName: "User", primaryKey: $0) }).count == 5)
    }
}
