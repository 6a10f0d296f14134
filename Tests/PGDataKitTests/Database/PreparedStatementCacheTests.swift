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
}
