import Dispatch
import Foundation
@testable import PGDataKit
import Synchronization
import Testing

/// Two saves that lock the same rows, started so that each holds one row the other
/// needs if their statements lock in different orders: before saves took their locks in
/// one order, each of these pairs deadlocked every time.
///
/// How the interleaving is forced, without sleeps: a third session holds a lock on a
/// row both saves need; the first save is started and waits for it (seen in
/// `pg_stat_activity`), then the second, which takes what it can and waits too. The
/// third session commits: the first save gets the row (row locks are granted in queue
/// order). Saves that lock in one order now finish one after the other; saves that lock
/// in different orders wait for each other, a cycle seen in `pg_blocking_pids`. The
/// sessions run with a `deadlock_timeout` of a minute, so PostgreSQL does not break the
/// cycle itself (a test role that may not set it still sees the deadlock, as `40P01`).
@Suite("Saves take row locks in one order")
struct LockOrderTests {
    /// An import whose keyed inserts meet rows committed since it looked (the main
    /// context: the upsert locks them in unique-key order) against an update of the
    /// same rows (locked by row position before).
    @Test func anUpsertMeetingNewRowsAndAnUpdateOfThoseRowsDoNotDeadlock() throws {
        try withDeadlockProneManager { manager, run in
            // The update used to lock its rows in an order of its own (the table's, or
            // the batch's), so each round has an even chance to deadlock.
            for round in 0..<6 {
                let (a, b) = ("a\(round)", "b\(round)")
                // The main context: its import looks in one transaction, its save is
                // another (read committed).
                let importer = manager.mainContext
                try importer.performAndWait {
                    let records: [JSONValue] = [a, b].map { .object(["UserID": .string($0), "Name": "imported"]) }
                    _ = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: importer) {
                        record, user in user.name = record["Name"]?.stringValue
                    }
                }
                // Committed after the import looked: "b" first, then "a".
                _ = try run.insertUser(b)
                let y = try run.insertUser(a)
                let editor = try renamingEditor([a, b], in: manager)
                guard try run.race(blocking: ("users", y), first: importer, second: editor) else { break }
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 12)
        }
    }

    /// The demo's deadlock: an import in a private context whose keyed inserts (keys it
    /// did not find) meet a row committed since it looked, which another transaction
    /// holds — and that transaction then inserts one of the import's new keys. The
    /// upsert used to insert the new key and wait for the held row in one statement,
    /// each side then waiting for the other. Now the new keys are claimed without
    /// waiting for existing rows, and a row met that was not locked in order sends the
    /// save to a fresh transaction that looks such rows up and locks them first.
    @Test(arguments: [IsolationLevel.repeatableRead, .readCommitted])
    func anImportMeetingAHeldRowDoesNotHoldItsNewKeysWhileWaitingForIt(isolation: IsolationLevel) throws {
        try withDeadlockProneManager { manager, run in
            let importer = manager.newPrivateContext(name: "importer")
            importer.isolationLevel = isolation
            importer.mergePolicy = .mergeByPropertyObjectTrump
            try importer.performAndWait {
                let records: [JSONValue] = ["a", "u"].map { .object(["UserID": .string($0), "Name": "imported"]) }
                _ = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: importer) {
                    record, user in user.name = record["Name"]?.stringValue
                }
            }
            // "u" committed after the import looked, then held by another transaction.
            let held = try run.insertUser("u")
            let holder = try Connection(run.configuration)
            defer { holder.close() }
            try holder.execute("BEGIN")
            try holder.execute("SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE", [held])
            let errors = Mutex<[String]>([])
            let group = DispatchGroup()
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do { try importer.performAndWait { try importer.save() } } catch {
                    errors.withLock { $0.append("importer: \(error)") }
                }
            }
            try run.waitForLockWaits(1, sourceLocation: #_sourceLocation)
            // The holder now inserts the import's new key, and commits.
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do {
                    try holder.execute("INSERT INTO users (user_id, name) VALUES ('a', 'holder')")
                    try holder.execute("COMMIT")
                } catch {
                    errors.withLock { $0.append("holder: \(error)") }
                }
            }
            guard try run.finishWithoutCycle(group, errors: errors) else { return }
            let names = try run.admin.query("SELECT user_id, name FROM users ORDER BY user_id").map {
                "\(try $0.decode(String.self, at: 0))=\(try $0.decode(String?.self, at: 1) ?? "nil")"
            }
            #expect(names == ["a=imported", "u=imported"])
        }
    }

    /// A save that updates a post and its user against an import of that user (by
    /// key) that also updates the post: updates went entity by entity in name order
    /// (posts, then users), keyed inserts in insert order (users, then posts).
    @Test func savesOverTwoEntitiesInDifferentOrdersDoNotDeadlock() throws {
        try withDeadlockProneManager { manager, run in
            let importer = manager.mainContext
            try importer.performAndWait {
                importer.mergePolicy = .mergeByPropertyObjectTrump
                _ = try User.insertOrUpdate(
                    [.object(["UserID": "u", "Name": "imported"])], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID",
                    in: importer
                ) { record, user in user.name = record["Name"]?.stringValue }
            }
            let user = try run.insertUser("u")
            let post = try run.insertPost("p", user: user)
            try importer.performAndWait {
                for post in try Post.fetch(in: importer, where: "postID == %@", "p") { post.title = "imported" }
            }
            let editor = manager.newPrivateContext(name: "editor")
            editor.mergePolicy = .mergeByPropertyObjectTrump
            try editor.performAndWait {
                for user in try User.fetch(in: editor, where: "userID == %@", "u") { user.name = "edited" }
                for post in try Post.fetch(in: editor, where: "postID == %@", "p") { post.title = "edited" }
            }
            try run.race(blocking: ("posts", post), first: editor, second: importer)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 1)
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts", in: manager) == 1)
        }
    }

    /// An import's save that finds its rows by location (a scan in the table's order,
    /// here the reverse of the keys') against a save that updates the same rows by key:
    /// the rows found by location are sorted by key before they are locked.
    @Test func anImportSavingByLocationAndAnUpdateOfTheSameRowsDoNotDeadlock() throws {
        try withDeadlockProneManager { manager, run in
            for round in 0..<6 {
                let (a, b) = ("a\(round)", "b\(round)")
                let second = try run.insertUsersInReverseTableOrder(a, b)
                let importer = manager.newPrivateContext(name: "importer")
                importer.mergePolicy = .mergeByPropertyObjectTrump
                try importer.performAndWait {
                    let records: [JSONValue] = [a, b].map { .object(["UserID": .string($0), "Name": "imported"]) }
                    let users = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: importer) {
                        record, user in user.name = record["Name"]?.stringValue
                    }
                    #expect(users.allSatisfy { importer.rowLocation(of: $0) != nil })
                }
                let editor = try renamingEditor([a, b], in: manager)
                guard try run.race(blocking: ("users", second), first: importer, second: editor) else { break }
            }
        }
    }

    /// The lock statement by key (rows of one mode: one scan of the keys) locks in
    /// ascending key order whatever order its plan reads the rows in: here the table
    /// holds them in the reverse of their keys' order and the plan reads them so (index
    /// scans off: a bitmap or sequential scan). With the highest key held elsewhere, the
    /// statement waits for it holding the lower ones; locking in the scan's order, it
    /// would wait holding none.
    @Test func theLockStatementByKeyLocksInKeyOrderWhateverItsScanReads() throws {
        try withDeadlockProneManager { manager, run in
            // Inserted highest key first: the table holds them in the reverse order. (An
            // update's new version on the same page would not do: scans of the index
            // reach it through its first version's place.)
            let (low, middle, high): (Int64, Int64, Int64) = (1_000_001, 1_000_002, 1_000_003)
            for key in [high, middle, low] {
                try run.execute("INSERT INTO users (id, user_id) VALUES ($1, $2)", [key, "k\(key)"])
            }
            let blocker = try Connection(run.configuration)
            defer { blocker.close() }
            try blocker.execute("BEGIN")
            try blocker.execute("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", [high])
            let coordinator = manager.coordinator
            let entity = try #require(coordinator.model.entity(for: User.self))
            let locker = try Connection(run.configuration)
            defer { locker.close() }
            try locker.execute("SET enable_indexscan = off")
            try locker.execute("BEGIN")
            let failure = Mutex<String?>(nil)
            let group = DispatchGroup()
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var locks = RowLockSet()
                for key in [high, low, middle] { locks.add(key, .noKeyUpdate) }
                do { try coordinator.lockRows(of: entity, locks, on: locker) } catch {
                    failure.withLock { $0 = "\(error)" }
                }
            }
            try run.waitForLockWaits(1, sourceLocation: #_sourceLocation)
            // The statement waits for k3 and holds k1 (and k2) already.
            let probe = #expect(throws: PostgresError.self) {
                try run.admin.execute("SELECT 1 FROM users WHERE id = $1 FOR UPDATE NOWAIT", [low])
            }
            #expect(probe?.sqlState == .lockNotAvailable)
            try blocker.execute("ROLLBACK")
            group.wait()
            #expect(failure.withLock { $0 } == nil)
            try locker.execute("ROLLBACK")
        }
    }

    /// A batch delete by predicate (rows in scan order) against a save that updates the
    /// same rows.
    @Test func aBatchDeleteAndAnUpdateOfTheSameRowsDoNotDeadlock() throws {
        try withDeadlockProneManager { manager, run in
            for round in 0..<6 {
                let (a, b) = ("a\(round)", "b\(round)")
                let second = try run.insertUsersInReverseTableOrder(a, b)
                let editor = try renamingEditor([a, b], in: manager)
                let deleter = manager.newPrivateContext(name: "deleter")
                deleter.isolationLevel = .readCommitted
                let finished = try run.race(
                    blocking: ("users", second), first: editor,
                    second: { try deleter.performAndWait { _ = try User.deleteAll(in: deleter, where: "userID IN %@", [a, b]) } })
                guard finished else { break }
            }
        }
    }
}

/// What a lock-order test does with its database besides the two saves.
struct LockRace {
    let configuration: ConnectionConfiguration
    let admin: Connection

    /// Runs a statement on a connection of its own (autocommit).
    func execute(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws {
        try admin.execute(sql, parameters)
    }

    /// Inserts a committed user and returns its primary key.
    func insertUser(_ key: String) throws -> Int64 {
        try admin.query("INSERT INTO users (user_id) VALUES ($1) RETURNING id", [key])[0].decode(Int64.self, at: 0)
    }

    /// Inserts committed users `a` and `b`, then updates `a`, which moves it to the end
    /// of the table: their places are in the other order than their keys. Returns `b`'s
    /// primary key.
    func insertUsersInReverseTableOrder(_ a: String, _ b: String) throws -> Int64 {
        let first = try insertUser(a)
        let second = try insertUser(b)
        try execute("UPDATE users SET age = 1 WHERE id = $1", [first])
        return second
    }

    /// Inserts a committed post of a user and returns its primary key.
    func insertPost(_ key: String, user: Int64) throws -> Int64 {
        try admin.query("INSERT INTO posts (post_id, user_id) VALUES ($1, $2) RETURNING id", [key, user])[0]
            .decode(Int64.self, at: 0)
    }

    /// Saves two contexts as described at `LockOrderTests`; false when they deadlocked.
    @discardableResult
    func race(
        blocking row: (table: String, key: Int64), first: ManagedObjectContext, second: ManagedObjectContext,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Bool {
        try race(
            blocking: row, first: { try first.performAndWait { try first.save() } },
            second: { try second.performAndWait { try second.save() } }, sourceLocation: sourceLocation)
    }

    /// Runs two units of work as described at `LockOrderTests`; false when they
    /// deadlocked.
    @discardableResult
    func race(
        blocking row: (table: String, key: Int64), first: ManagedObjectContext,
        second: @escaping @Sendable () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Bool {
        try race(
            blocking: row, first: { try first.performAndWait { try first.save() } }, second: second,
            sourceLocation: sourceLocation)
    }

    /// Runs two units of work as described at `LockOrderTests`: `first` waits for the
    /// blocker, `second` waits too, the blocker commits, and both must finish. Returns
    /// false when they deadlocked (an issue is recorded).
    @discardableResult
    func race(
        blocking row: (table: String, key: Int64), first: @escaping @Sendable () throws -> Void,
        second: @escaping @Sendable () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Bool {
        let blocker = try Connection(configuration)
        defer { blocker.close() }
        try blocker.execute("BEGIN")
        try blocker.execute("SELECT 1 FROM \(Connection.quoteIdentifier(row.table)) WHERE id = $1 FOR UPDATE", [row.key])
        let errors = Mutex<[String]>([])
        let group = DispatchGroup()
        func start(_ name: String, _ work: @escaping @Sendable () throws -> Void) {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do { try work() } catch { errors.withLock { $0.append("\(name): \(error)") } }
            }
        }
        start("first", first)
        try waitForLockWaits(1, sourceLocation: sourceLocation)
        start("second", second)
        try waitForLockWaits(2, sourceLocation: sourceLocation)
        try blocker.execute("COMMIT")
        return try finishWithoutCycle(group, errors: errors, sourceLocation: sourceLocation)
    }

    /// Waits until the work of `group` finishes, or its sessions wait for each other in
    /// a cycle (`pg_blocking_pids`; then they are terminated). Records an issue for a
    /// cycle and for each error; returns false for a cycle.
    func finishWithoutCycle(
        _ group: DispatchGroup, errors: borrowing Mutex<[String]>, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Bool {
        // Both finish, or they wait for each other.
        let deadline = ContinuousClock.now + patience
        var deadlocked = false
        while group.wait(timeout: .now() + .milliseconds(20)) == .timedOut {
            let cycle = try admin.query(
                """
                SELECT a.pid FROM pg_stat_activity a WHERE a.datname = current_database() AND EXISTS (
                    SELECT 1 FROM unnest(pg_blocking_pids(a.pid)) AS b(pid) WHERE a.pid = ANY(pg_blocking_pids(b.pid)))
                """)
            if !cycle.isEmpty || ContinuousClock.now > deadline {
                deadlocked = true
                for waiter in cycle { _ = try? admin.execute("SELECT pg_terminate_backend($1)", [try waiter.decode(Int32.self, at: 0)]) }
                if cycle.isEmpty { break }
            }
        }
        group.wait()
        #expect(!deadlocked, "the two saves waited for each other (a deadlock)", sourceLocation: sourceLocation)
        let failures = errors.withLock { $0 }
        #expect(failures.isEmpty, "\(failures)", sourceLocation: sourceLocation)
        return !deadlocked
    }

    /// Waits (up to `patience`) until `count` sessions of the database wait for a lock.
    func waitForLockWaits(_ count: Int, sourceLocation: SourceLocation) throws {
        let deadline = ContinuousClock.now + patience
        while ContinuousClock.now < deadline {
            let waiting = try admin.query(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")[0]
                .decode(Int.self, at: 0)
            if waiting >= count { return }
            Thread.sleep(forTimeInterval: 0.005)
        }
        Issue.record("fewer than \(count) sessions came to wait for a lock", sourceLocation: sourceLocation)
    }
}

/// A manager on a fresh example database whose sessions leave deadlocks to the test to
/// see (`deadlock_timeout` of a minute), with a `LockRace`.
/// A private context (`.mergeByPropertyObjectTrump`) that fetched the users of `keys`
/// and renamed them "edited", unsaved: one side of a race.
private func renamingEditor(_ keys: [String], in manager: ContextManager) throws -> ManagedObjectContext {
    let editor = manager.newPrivateContext(name: "editor")
    editor.mergePolicy = .mergeByPropertyObjectTrump
    try editor.performAndWait {
        for user in try User.fetch(in: editor, where: "userID IN %@", keys) { user.name = "edited" }
    }
    return editor
}

private func withDeadlockProneManager(_ body: (ContextManager, LockRace) throws -> Void) throws {
    try TestDatabase.withFreshDatabase(migrations: true) { base in
        var configuration = base
        // A save that waits for the blocker waits as long as the test needs: with the
        // default lock timeout (5 s) a loaded machine made the first save give up before
        // the second had started. A real cycle is found by `finishWithoutCycle` instead.
        configuration.lockTimeout = nil
        let admin = try Connection(base)
        defer { admin.close() }
        if try admin.query("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")[0].decode(Bool.self, at: 0) {
            configuration.overrides["options"] = "-c deadlock_timeout=60s"
        }
        let manager = try ExampleSchema.makeManager(configuration)
        defer { manager.close() }
        try body(manager, LockRace(configuration: configuration, admin: admin))
    }
}
