import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("PreparedStatementCache without a server")
struct PreparedStatementCacheTests {
    typealias Key = PreparedStatementCache.Key

    @Test func evictsTheLeastRecentlyUsedStatementWhenFull() {
        var cache = PreparedStatementCache(capacity: 2)
        let a = Key(sql: "SELECT $1", types: [23])
        let b = Key(sql: "SELECT $1", types: [25])  // same SQL, other type: another statement
        let c = Key(sql: "SELECT $1 + 1", types: [23])
        let nameA = cache.add(a)
        let nameB = cache.add(b)
        #expect(nameA != nil && nameB != nil && nameA != nameB)
        #expect(cache.name(for: a) == nameA)  // a is now more recent than b
        let nameC = cache.add(c)
        #expect(cache.count == 2)
        #expect(cache.name(for: b) == nil)
        #expect(cache.evicted == [nameB].compactMap { $0 })
        #expect(cache.name(for: a) == nameA)
        #expect(cache.name(for: c) == nameC)
        cache.deallocated(cache.evicted)
        #expect(cache.evicted.isEmpty)
    }

    @Test func namesAreNeverReused() {
        var cache = PreparedStatementCache(capacity: 1)
        var names: Set<String> = []
        for round in 0..<50 {
            let key = Key(sql: "SELECT \(round % 3), $1", types: [23])
            if let name = cache.add(key) { names.insert(name) }
            if round % 7 == 0 { cache.removeAll() }
        }
        #expect(names.count == 50)
    }

    @Test func capacityZeroPreparesNothing() {
        var cache = PreparedStatementCache(capacity: 0)
        #expect(cache.add(Key(sql: "SELECT $1", types: [23])) == nil)
        #expect(cache.count == 0)
        #expect(PreparedStatementCache(capacity: -5).capacity == 0)
    }

    /// The key hashes a fold of its types and of its text's first and last 48 bytes:
    /// keys that differ only where the hash does not look, or only in the order of their
    /// types, are still other statements, and equal keys built apart hash alike.
    @Test func keysThatShareTheirHashedPartsStayApart() {
        let head = String(repeating: "h", count: 60)
        let tail = String(repeating: "t", count: 60)
        let keys = [
            Key(sql: head + "SELECT 1" + tail, types: [20, 25]),
            Key(sql: head + "SELECT 2" + tail, types: [20, 25]),  // differs in the middle only
            Key(sql: head + "SELECT 1" + tail, types: [25, 20]),  // the types in another order
            Key(sql: "SELECT $1", types: [20]),
            Key(sql: "SELECT $2", types: [20]),
            Key(sql: "", types: []),
        ]
        var cache = PreparedStatementCache(capacity: 10)
        let names = keys.map { cache.add($0) }
        #expect(Set(names.compactMap { $0 }).count == keys.count)
        for (key, name) in zip(keys, names) {
            // Built again from other strings: equal, and found under the same name.
            let again = Key(sql: String(decoding: Array(key.sql.utf8), as: UTF8.self), types: key.types.map { $0 })
            #expect(again == key)
            #expect(again.hashValue == key.hashValue)
            #expect(cache.name(for: again) == name)
        }
    }
}
