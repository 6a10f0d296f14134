import Dispatch
import Foundation
import PGDataKit
import Synchronization
import Testing

/// The row locks a save takes before it writes (`lockRowsInOrder`): rows whose key
/// column changes `FOR UPDATE`, other updated rows `FOR NO KEY UPDATE`. Told apart by
/// another transaction holding `FOR KEY SHARE` on the rows, as a foreign key check does:
/// only `FOR UPDATE` conflicts with it. Two rows per save, so the save sends its lock
/// statement (a save of one row leaves the lock to its `UPDATE`). The modes come from
/// the save plan's groups of objects that change the same columns.
@Suite("A save's row lock modes")
struct SaveLockModeTests {
    /// Users "a", "b" and "c" stored, `held` of them held `FOR KEY SHARE` by another
    /// transaction (`holder`, which `body` may end) while `body` runs on a manager whose
    /// lock waits end after `lockTimeout`.
    func withKeyShared(
        _ held: [String], lockTimeout: Duration? = .milliseconds(150), _ body: (ContextManager, Connection, ConnectionConfiguration) throws -> Void
    ) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { base in
            var configuration = base
            configuration.lockTimeout = lockTimeout
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let holder = try Connection(base)
            defer { holder.close() }
            try holder.execute("INSERT INTO users (user_id, name) VALUES ('a', 'stored'), ('b', 'stored'), ('c', 'stored')")
            try holder.execute("BEGIN")
            try holder.execute("SELECT 1 FROM users WHERE user_id = ANY($1) FOR KEY SHARE", [held])
            defer { _ = try? holder.execute("ROLLBACK") }
            try body(manager, holder, base)
        }
    }

    /// A private context that fetched users `keys` and gave each to `change`, unsaved.
    func editing(_ keys: [String], in manager: ContextManager, _ change: (User) -> Void) throws -> ManagedObjectContext {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            for user in try User.fetch(in: context, where: "userID IN %@", keys) { change(user) }
        }
        return context
    }

    /// Saves `context` on a thread of its own, finds the statement it waits on for a lock
    /// (`pg_stat_activity`, read through a connection of its own), then ends `holder`'s
    /// transaction so the save goes on; returns that statement once the save is done.
    func statementWaitingForALock(
        saving context: ManagedObjectContext, holder: Connection, watching configuration: ConnectionConfiguration
    ) throws -> String? {
        let saved = DispatchSemaphore(value: 0)
        let failure = Mutex<String?>(nil)
        Thread.detachNewThread {
            defer { saved.signal() }
            do { try context.performAndWait { try context.save() } } catch { failure.withLock { $0 = "\(error)" } }
        }
        let watcher = try Connection(configuration)
        defer { watcher.close() }
        let deadline = ContinuousClock.now + .seconds(20)
        var waiting: String?
        while waiting == nil, ContinuousClock.now < deadline {
            waiting = try watcher.query(
                "SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).first.map { try $0.decode(String.self, at: 0) }
            if waiting == nil { Thread.sleep(forTimeInterval: 0.005) }
        }
        try holder.execute("ROLLBACK")
        saved.wait()
        #expect(failure.withLock { $0 } == nil)
        return waiting
    }

    @Test func rowsWhoseKeysStayAreLockedWithoutBlockingKeyShares() throws {
        try withKeyShared(["a", "b"]) { manager, _, _ in
            let context = try editing(["a", "b"], in: manager) { $0.name = "renamed" }
            try context.performAndWait { try context.save() }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'renamed'", in: manager) == 2)
        }
    }

    /// The lock statement itself waits (`FOR UPDATE`), not the `UPDATE` after it.
    @Test func rowsWhoseUniqueKeyChangesAreLockedForUpdate() throws {
        try withKeyShared(["a", "b"], lockTimeout: nil) { manager, holder, base in
            let context = try editing(["a", "b"], in: manager) { $0.userID += "2" }
            let waiting = try statementWaitingForALock(saving: context, holder: holder, watching: base)
            #expect(waiting?.hasPrefix("SELECT") == true && waiting?.contains(" FOR UPDATE") == true, "\(waiting ?? "no wait")")
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE user_id IN ('a2', 'b2')", in: manager) == 2)
        }
    }

    /// Two groups in one save: the one that changes a key takes `FOR UPDATE` for its own
    /// rows only; the other group's rows, held `FOR KEY SHARE` elsewhere, are locked
    /// `FOR NO KEY UPDATE` and do not wait.
    @Test func eachGroupOfChangesTakesItsOwnMode() throws {
        try withKeyShared(["a", "b"]) { manager, _, _ in
            let context = try editing(["a", "b", "c"], in: manager) { user in
                if user.userID == "c" { user.userID = "c2" } else { user.name = "renamed" }
            }
            try context.performAndWait { try context.save() }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'renamed' OR user_id = 'c2'", in: manager) == 3)
        }
    }
}
