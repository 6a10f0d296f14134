import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A save's batch statements find their rows through an index whatever the planner
/// knows of the table: an `UPDATE … FROM unnest(…)` joined on the primary key is planned
/// as a hash join over a scan of the whole table once the table has statistics (and
/// without them too), so a batch of 1,000 rows would cost time in proportion to the
/// table's size. The scans are read from `pg_stat_xact_user_tables` as differences
/// within one transaction (`sequentialScanCount(on:)`).
@Suite struct BatchStatementPlanTests {
    static let rowCount = 20_000

    /// The sequential scans of `users` the view counts for this session. It counts the
    /// open transaction's and those of earlier transactions the session has not reported
    /// yet (at most once a second), so only differences within a transaction mean
    /// anything.
    static func sequentialScanCount(on connection: Connection) throws -> Int {
        try connection.query("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'users'")[0]
            .decode(Int.self, at: 0)
    }

    /// Runs `body` in a transaction over `users` filled with `rowCount` rows (analysed
    /// or not), rolls it back, and returns the sequential scans of `users` it did.
    static func sequentialScans(
        analyzed: Bool, _ body: (StoreCoordinator, EntityDescription, Connection) throws -> Void
    ) throws -> Int {
        try ExampleSchema.withManager { manager in
            try manager.coordinator.pool.withConnection { connection in
                try connection.execute(
                    "INSERT INTO users (user_id, name, age) SELECT 'u' || i, 'n', i FROM generate_series(1, $1) AS i",
                    [rowCount])
                if analyzed { try connection.execute("ANALYZE users") }
                let entity = try #require(manager.coordinator.model.entity(for: User.self))
                try connection.begin()
                defer { _ = try? connection.execute("ROLLBACK") }
                let before = try sequentialScanCount(on: connection)
                try body(manager.coordinator, entity, connection)
                return try sequentialScanCount(on: connection) - before
            }
        }
    }

    /// 1,000 rows of `users` (keys 5,001–6,000, at version 1) renamed.
    static func renaming(_ entity: EntityDescription) throws -> RowBatch {
        let name = try #require(entity.attribute(named: "name"))
        var rows = RowBatch()
        rows.attributes = [name]
        for key in Int64(5_001)...6_000 {
            rows.keys.append(key)
            rows.versions.append(1)
            var values = [StoredValue](repeating: .null, count: entity.attributes.count)
            values[name.index] = .string("renamed")
            rows.values.append(AttributeValues(values))
        }
        return rows
    }

    @Test(arguments: [false, true])
    func batchUpdatesProbeThePrimaryKey(analyzed: Bool) throws {
        for checksVersion in [true, false] {
            var written = 0
            let scans = try Self.sequentialScans(analyzed: analyzed) { coordinator, entity, connection in
                written = try coordinator.updateRows(
                    of: entity, try Self.renaming(entity), checksVersion: checksVersion, on: connection
                ).count
            }
            #expect(written == 1_000)
            #expect(scans == 0, "analyzed: \(analyzed), checksVersion: \(checksVersion)")
        }
    }

    @Test(arguments: [false, true])
    func batchDeletesProbeThePrimaryKey(analyzed: Bool) throws {
        for checksVersion in [true, false] {
            var deleted = 0
            let scans = try Self.sequentialScans(analyzed: analyzed) { coordinator, entity, connection in
                deleted = try coordinator.deleteRows(
                    of: entity, keys: Array(5_001...6_000), versions: Array(repeating: 1, count: 1_000),
                    checksVersion: checksVersion, on: connection
                ).count
            }
            #expect(deleted == 1_000)
            #expect(scans == 0, "analyzed: \(analyzed), checksVersion: \(checksVersion)")
        }
    }

    @Test(arguments: [false, true])
    func keyLookupsForLinksProbeTheUniqueIndex(analyzed: Bool) throws {
        var found = 0
        let scans = try Self.sequentialScans(analyzed: analyzed) { coordinator, entity, connection in
            let userID = try #require(entity.attribute(named: "userID"))
            found = try coordinator.selectKeys(
                of: entity, where: userID, isIn: (5_001...6_000).map { .string("u\($0)") }, on: connection
            ).count
        }
        #expect(found == 1_000)
        #expect(scans == 0, "analyzed: \(analyzed)")
    }

    /// Rows a save's keyed inserts met after claiming their new keys are locked without
    /// waiting, looked up by the unique key (each statement here planned for the first
    /// time, as every one is behind a pooler).
    @Test(arguments: [false, true])
    func rowsLockedWithoutWaitingAreLookedUpInTheUniqueIndex(analyzed: Bool) throws {
        let scans = try Self.sequentialScans(analyzed: analyzed) { coordinator, entity, connection in
            let userID = try #require(entity.attribute(named: "userID"))
            try coordinator.lockRowsWithoutWaiting(
                of: entity, whereUnique: userID, isIn: (5_001...6_000).map { .string("u\($0)") }, mode: .noKeyUpdate,
                on: connection)
        }
        #expect(scans == 0, "analyzed: \(analyzed)")
    }

    /// Controllers ask which of a save's keys match their predicates with one statement
    /// per change set: during an import into a new table (no statistics yet) every other
    /// process asks about each batch's keys, so the question must not scan the table.
    @Test(arguments: [false, true])
    func membershipQuestionsProbeThePrimaryKey(analyzed: Bool) throws {
        var rows = 0
        let scans = try Self.sequentialScans(analyzed: analyzed) { coordinator, entity, connection in
            var query = MembershipQuery(keys: Array(5_001...6_000) + [999_999])
            query.conditions = ["t.\"age\" >= $2", nil]
            query.parameters = [5_500]
            rows = try coordinator.selectMembership(of: entity, query, on: connection).rows.count
        }
        #expect(rows == 1_000)  // (every existing key matches the second condition)
        #expect(scans == 0, "analyzed: \(analyzed)")
    }

    /// Refreshing registered objects (a merge of another process's save) and faulting
    /// read rows by primary key.
    @Test(arguments: [false, true])
    func readsByPrimaryKeyProbeTheIndex(analyzed: Bool) throws {
        var rows = 0
        let scans = try Self.sequentialScans(analyzed: analyzed) { coordinator, entity, connection in
            rows = try coordinator.selectObjects(
                of: entity, .keys(Array(5_001...6_000) + [5_001, 999_999], of: entity), on: connection
            ).count
        }
        #expect(rows == 1_000)  // (a key asked twice is one row; a missing key none)
        #expect(scans == 0, "analyzed: \(analyzed)")
    }

    /// Rows a save writes by location (an import read where they are in the save's own
    /// transaction, or the lock statement found them by key): the lock statement, the
    /// `UPDATE` and the `DELETE` read them with a TID scan. With the locations as a plain
    /// `ctid = ANY($n)` a custom plan (every plan behind a pooler, where statements are
    /// not prepared; the first five of a prepared statement) counted a random page per
    /// location and read the whole table instead, for a batch of 1,000 in up to a few
    /// hundred thousand rows; each statement here is planned for the first time.
    @Test(arguments: [false, true])
    func rowsWrittenByLocationAreReadByLocation(analyzed: Bool) throws {
        for (located, deletes) in [(true, false), (true, true), (false, false), (false, true)] {
            var written = 0
            var byLocation = false
            let scans = try Self.sequentialScans(analyzed: analyzed) { coordinator, entity, connection in
                var locks = RowLockSet()
                let rows = try connection.query("SELECT id, ctid::text FROM users WHERE id BETWEEN 5001 AND 6000 ORDER BY id")
                for row in rows {
                    let key = try row.decode(Int64.self, at: 0)
                    var tid = try row.decode(String.self, at: 1)
                    let location = located ? tid.withUTF8 { RowLocation(tid: $0, serial: 1) } : nil
                    locks.add(key, deletes ? .update : .noKeyUpdate, location: location)
                }
                let locked = try #require(try coordinator.lockRows(of: entity, locks, on: connection))
                byLocation = locked.byLocation
                if deletes {
                    written = try coordinator.deleteRows(
                        of: entity, keys: Array(5_001...6_000), versions: Array(repeating: 1, count: 1_000),
                        checksVersion: true, locations: locked.parameter, on: connection
                    ).count
                } else {
                    var batch = try Self.renaming(entity)
                    batch.locations = locked.parameter
                    written = try coordinator.updateRows(of: entity, batch, checksVersion: true, on: connection).count
                }
            }
            let what = "analyzed: \(analyzed), located: \(located), deletes: \(deletes)"
            #expect(byLocation == located, "\(what)")
            #expect(written == 1_000, "\(what)")
            #expect(scans == 0, "\(what)")
        }
    }

    /// A prepared statement keeps its generic plan until the table's statistics change
    /// (an `ANALYZE`: autovacuum's, at most once a minute, or anyone's). A plan made while
    /// the table was small — a new or truncated table, an import's first batches — may
    /// read the whole table, and compare every row with every element of the array, once
    /// the table has grown: 0.3–0.5 s per batch of 1,000 in 100,000 rows, for up to 40 s
    /// in a benchmark until autovacuum analysed the table. Each statement that finds rows
    /// by a list of keys or locations runs 8 times on one connection over 10 rows (lists
    /// of up to 128 keep their plans, and a prepared statement goes generic after 5),
    /// without statistics and with, each time followed by a run over 1,000 of 20,010
    /// rows, autovacuum off.
    @Test func lookupsPlannedWhileTheTableWasSmallProbeTheIndexOnceItIsLarge() throws {
        try ExampleSchema.withManager { manager in
            let coordinator = manager.coordinator
            let entity = try #require(coordinator.model.entity(for: User.self))
            let userID = try #require(entity.attribute(named: "userID"))
            let name = try #require(entity.attribute(named: "name"))
            try coordinator.pool.withConnection { connection in
                try connection.execute("ALTER TABLE users SET (autovacuum_enabled = false)")
                try connection.execute(
                    "INSERT INTO users (user_id, name, age) SELECT 'u' || i, 'n', i FROM generate_series(1, 10) AS i")
                /// The statements over `keys`, rolled back: the sequential scans of each step.
                func lookups(_ keys: ClosedRange<Int64>) throws -> [String: Int] {
                    var scans: [String: Int] = [:]
                    try connection.begin()
                    defer { _ = try? connection.execute("ROLLBACK") }
                    var total = try Self.sequentialScanCount(on: connection)
                    func step(_ name: String, _ body: () throws -> Void) throws {
                        try body()
                        let now = try Self.sequentialScanCount(on: connection)
                        scans[name] = now - total
                        total = now
                    }
                    let values = keys.map { StoredValue.string("u\($0)") }
                    var located: [(Int64, String)] = []
                    try step("fetch by unique key") {
                        located = try coordinator.selectObjects(of: entity, whereUnique: userID, isIn: values, locating: true, on: connection)
                            .map { (try $0.decode(Int64.self, at: 0), try $0.decode(String.self, at: entity.selectColumns.count)) }
                    }
                    #expect(located.count == keys.count)
                    try step("read by primary key") {
                        _ = try coordinator.selectObjects(of: entity, .keys(Array(keys), of: entity), on: connection)
                    }
                    try step("membership") {
                        var query = MembershipQuery(keys: Array(keys))
                        query.conditions = [nil]
                        _ = try coordinator.selectMembership(of: entity, query, on: connection)
                    }
                    try step("lock without waiting") {
                        try coordinator.lockRowsWithoutWaiting(
                            of: entity, whereUnique: userID, isIn: values, mode: .keyShare, on: connection)
                    }
                    var byKey = RowLockSet()
                    var byLocation = RowLockSet()
                    for (key, tid) in located {
                        var tid = tid
                        byKey.add(key, .noKeyUpdate, location: nil)
                        byLocation.add(key, .noKeyUpdate, location: tid.withUTF8 { RowLocation(tid: $0, serial: 1) })
                    }
                    try step("lock by key") { _ = try coordinator.lockRows(of: entity, byKey, on: connection) }
                    var locked: LockedLocations?
                    try step("lock by location") { locked = try coordinator.lockRows(of: entity, byLocation, on: connection) }
                    try step("update by location") {
                        var rows = RowBatch()
                        rows.attributes = [name]
                        rows.locations = locked?.parameter
                        for (key, _) in located {
                            rows.keys.append(key)
                            rows.versions.append(1)
                            var values = [StoredValue](repeating: .null, count: entity.attributes.count)
                            values[name.index] = .string("renamed")
                            rows.values.append(AttributeValues(values))
                        }
                        let updated = try coordinator.updateRows(of: entity, rows, checksVersion: true, on: connection)
                        #expect(updated.count == keys.count)
                    }
                    try step("delete by key") {
                        let deleted = try coordinator.deleteRows(
                            of: entity, keys: Array(keys), versions: Array(repeating: 2, count: keys.count), checksVersion: true,
                            on: connection)
                        #expect(deleted.count == keys.count)
                    }
                    return scans
                }
                for _ in 0..<8 { _ = try lookups(1...10) }
                try connection.execute(
                    "INSERT INTO users (user_id, name, age) SELECT 'u' || i, 'n', i FROM generate_series(11, 20010) AS i")
                let afterSmall = try lookups(5_001...6_000)
                #expect(afterSmall.values.reduce(0, +) == 0, "planned over 10 rows, sequential scans by step: \(afterSmall)")
                // Again with statistics of the small table (autovacuum analyses a new
                // table after its first 50 rows): the truncation drops the kept plans.
                try connection.execute("TRUNCATE users RESTART IDENTITY CASCADE")
                try connection.execute(
                    "INSERT INTO users (user_id, name, age) SELECT 'u' || i, 'n', i FROM generate_series(1, 10) AS i")
                try connection.execute("ANALYZE users")
                for _ in 0..<8 { _ = try lookups(1...10) }
                try connection.execute(
                    "INSERT INTO users (user_id, name, age) SELECT 'u' || i, 'n', i FROM generate_series(11, 20010) AS i")
                let afterAnalysed = try lookups(5_001...6_000)
                #expect(
                    afterAnalysed.values.reduce(0, +) == 0, "planned over 10 analysed rows, sequential scans by step: \(afterAnalysed)")
            }
        }
    }

    /// Where the line runs: a read by 128 primary keys is prepared (its plan kept), one by
    /// 129 is not; the server's own list of the session's prepared statements says so.
    @Test func listsOfUpTo128KeysArePreparedLongerOnesAreNot() throws {
        try ExampleSchema.withManager { manager in
            let coordinator = manager.coordinator
            let entity = try #require(coordinator.model.entity(for: User.self))
            try coordinator.pool.withConnection { connection in
                func prepared() throws -> Int {
                    try connection.query("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%unnest($1::bigint[])%'")[0]
                        .decode(Int.self, at: 0)
                }
                _ = try coordinator.selectObjects(of: entity, .keys(Array(1...129), of: entity), on: connection)
                #expect(try prepared() == 0)
                _ = try coordinator.selectObjects(of: entity, .keys(Array(1...128), of: entity), on: connection)
                #expect(try prepared() == 1)
            }
        }
    }

    /// A row another transaction rewrites while the batch waits for its lock: the batch
    /// probed the old tuple. A version-checked update leaves the row out (a conflict); an
    /// overwriting update or delete still writes it, by key.
    @Test func rowsRewrittenWhileTheBatchWaitsAreConflictsOrOverwritten() throws {
        try ExampleSchema.withManager { manager in
            let coordinator = manager.coordinator
            let entity = try #require(coordinator.model.entity(for: User.self))
            _ = try coordinator.pool.withConnection { connection in
                try connection.execute(
                    "INSERT INTO users (user_id, name, age) SELECT 'u' || i, 'n', i FROM generate_series(1, 10000) AS i")
            }
            let other = try Connection(manager.coordinator.pool.configuration)
            defer { other.close() }
            for (checksVersion, deletes) in [(true, false), (false, false), (true, true), (false, true)] {
                let written = try coordinator.pool.withConnection { connection in
                    try other.execute("UPDATE users SET version = 1 WHERE id = 5500")
                    try other.execute("BEGIN")
                    try other.execute("UPDATE users SET age = -1, version = 2 WHERE id = 5500")
                    try connection.begin()
                    defer { _ = try? connection.execute("ROLLBACK") }
                    let pid = connection.backendPID
                    let outcome = Mutex<Result<Set<Int64>, any Error>?>(nil)
                    let batch = Thread {
                        let result = Result {
                            if deletes {
                                return try coordinator.deleteRows(
                                    of: entity, keys: Array(5_001...6_000), versions: Array(repeating: 1, count: 1_000),
                                    checksVersion: checksVersion, on: connection)
                            }
                            return Set(
                                try coordinator.updateRows(
                                    of: entity, try Self.renaming(entity), checksVersion: checksVersion, on: connection
                                ).keys.map(\.value))
                        }
                        outcome.withLock { $0 = result }
                    }
                    batch.start()
                    // The batch waits for the row's lock, then the rewrite commits.
                    var waiting = false
                    for _ in 0..<500 where !waiting {
                        Thread.sleep(forTimeInterval: 0.01)
                        waiting = try other.query(
                            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", [pid]
                        )[0].decode(Int.self, at: 0) == 1
                    }
                    #expect(waiting)
                    try other.execute("COMMIT")
                    while outcome.withLock({ $0 }) == nil { Thread.sleep(forTimeInterval: 0.01) }
                    return try #require(outcome.withLock { $0 }).get()
                }
                #expect(written.count == (checksVersion ? 999 : 1_000), "checksVersion: \(checksVersion), deletes: \(deletes)")
                #expect(written.contains(5_500) == !checksVersion)
            }
        }
    }

    /// In a partitioned table rows of different partitions share `ctid`s: a batch
    /// written in one partition leaves the rows of the other as they were.
    @Test func batchesOnAPartitionedTableWriteOnlyTheirRows() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let setup = try Connection(configuration)
            defer { setup.close() }
            try setup.executeScript(
                """
                CREATE TABLE parts (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name text, version bigint NOT NULL DEFAULT 1
                ) PARTITION BY RANGE (id);
                CREATE TABLE parts_low PARTITION OF parts FOR VALUES FROM (MINVALUE) TO (1001);
                CREATE TABLE parts_high PARTITION OF parts FOR VALUES FROM (1001) TO (MAXVALUE);
                INSERT INTO parts (id, name) SELECT i, 'n' FROM generate_series(1, 2000) AS i;
                """)
            let manager = try ContextManager(configuration: configuration, entities: [Part.self])
            defer { manager.close() }
            let coordinator = manager.coordinator
            let entity = try #require(coordinator.model.entity(for: Part.self))
            let name = try #require(entity.attribute(named: "name"))
            try coordinator.pool.withConnection { connection in
                for checksVersion in [true, false] {
                    var rows = RowBatch()
                    rows.attributes = [name]
                    for key in Int64(1)...100 {
                        rows.keys.append(key)
                        rows.versions.append(checksVersion ? 1 : 2)
                        rows.values.append(AttributeValues([.string("renamed")]))
                    }
                    let written = try coordinator.updateRows(of: entity, rows, checksVersion: checksVersion, on: connection)
                    #expect(written.count == 100)
                }
                #expect(try connection.query("SELECT count(*) FROM parts WHERE name = 'renamed'")[0].decode(Int.self, at: 0) == 100)
                #expect(try connection.query("SELECT count(*) FROM parts_high WHERE version <> 1")[0].decode(Int.self, at: 0) == 0)
                let deleted = try coordinator.deleteRows(
                    of: entity, keys: Array(1...100), versions: Array(repeating: 3, count: 100), checksVersion: true, on: connection)
                #expect(deleted.count == 100)
                #expect(try connection.query("SELECT count(*) FROM parts")[0].decode(Int.self, at: 0) == 1_900)
                #expect(try connection.query("SELECT count(*) FROM parts_high")[0].decode(Int.self, at: 0) == 1_000)
            }
        }
    }
}

/// A row of a partitioned table.
final class Part: ManagedObject {
    override class var tableName: String { "parts" }
    @Attribute var name: String?
}
