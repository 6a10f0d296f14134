import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Runs the jobs of the tasks that prefer it on a serial Dispatch queue, off the
/// cooperative threads: in the full suite, hundreds of synchronous tests hold both
/// cooperative threads (two cores) for minutes, and a task under test there did not start
/// before the lock it was to wait on was released 60 s later.
final class DedicatedExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "pgdatakit.test.dedicated-executor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Runs `body` with this executor preferred (by it and the tasks it starts with
    /// `Task(executorPreference:)`).
    static func run(_ body: @Sendable (DedicatedExecutor) async throws -> Void) async throws {
        let executor = DedicatedExecutor()
        try await withTaskExecutorPreference(executor) { try await body(executor) }
    }
}

/// A cancelled task's work reaches PostgreSQL: the statement it waits on stops, its
/// transaction rolls back, the caller gets `CancellationError`, and the manager goes on.
@Suite("Cancelling the task of async context work")
struct CancellationTests {
    /// Another session holding `lock` (SQL) in an open transaction, released by
    /// `release()` or after 60 s (so that work the cancellation did not stop ends, and
    /// the test fails instead of hanging). Whether work ended before the release is what
    /// shows that the cancellation stopped it: clocks are not (on two cores, other tests'
    /// synchronous work can hold the cooperative threads for seconds).
    final class LockHolder: Sendable {
        let connection: Connection
        private let released = Counter()
        init(_ configuration: ConnectionConfiguration, lock: String) throws {
            connection = try Connection(configuration)
            try connection.begin()
            try connection.execute(lock)
            DispatchQueue.global().asyncAfter(deadline: .now() + 60) { [self] in release() }
        }
        /// Whether `release()` ran.
        var wasReleased: Bool { released.value > 0 }
        func release() {
            released.add(1)
            try? connection.rollback()
            connection.close()
        }
    }

    /// The sessions of `manager`'s database, other than this query's, that run a
    /// statement or sit in an aborted transaction.
    static func busySessions(_ configuration: ConnectionConfiguration) throws -> [String] {
        let observer = try Connection(configuration)
        defer { observer.close() }
        return try observer.query(
            """
            SELECT state || ': ' || left(query, 60) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND (state = 'active' OR state LIKE 'idle in transaction (aborted)%')
              AND query NOT LIKE 'LOCK TABLE%' AND query NOT LIKE '%FOR UPDATE%'
              AND backend_type = 'client backend' AND query NOT LIKE 'LISTEN%'
            """
        ).map { try $0.decode(String.self, at: 0) }
    }

    /// Runs `body` with a manager of users and posts whose lock waits do not time out
    /// (the default `lockTimeout`, 5 s, could end a waiting statement before a slow run
    /// cancels it).
    static func withManager(_ body: @Sendable (ContextManager, DedicatedExecutor) async throws -> Void) async throws {
        try await DedicatedExecutor.run { executor in
            let (database, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
            defer { cleanup() }
            var configuration = database
            configuration.lockTimeout = nil
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { manager.close() }
            try await body(manager, executor)
        }
    }

    /// How many sessions of the database wait for a lock.
    static func lockWaits(_ configuration: ConnectionConfiguration) throws -> Int {
        let observer = try Connection(configuration)
        defer { observer.close() }
        return try observer.query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )[0].decode(Int.self, at: 0)
    }

    /// Every session of the database, for messages.
    static func sessions(_ configuration: ConnectionConfiguration) -> String {
        guard let observer = try? Connection(configuration) else { return "?" }
        defer { observer.close() }
        let rows = try? observer.query(
            "SELECT backend_type || ' ' || coalesce(state, '-') || ' ' || coalesce(wait_event, '-') || ': ' || left(query, 80) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return (rows?.compactMap { try? $0.decode(String.self, at: 0) } ?? []).joined(separator: "\n")
    }

    /// Waits until `condition` holds (checked every 20 ms), for up to `seconds`. It
    /// sleeps as a task, so the cooperative threads stay free for the tasks under test
    /// (a blocking wait here starved them on two cores: the task to cancel never started).
    static func eventually(_ seconds: Double, _ condition: () throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try condition()
    }

    /// Waits until `task`'s work waits on the server, cancels the task, and checks that it
    /// ended with `CancellationError` while `holder` still held its lock (so the
    /// cancellation stopped it), and that nothing of it runs on the server any more and no
    /// session is left in an aborted transaction.
    static func cancelOnceWaiting<T: Sendable>(
        _ task: Task<T, any Error>, holder: LockHolder, _ configuration: ConnectionConfiguration
    ) async throws {
        // Waiting on the holder's lock, not merely running: an import's earlier batches
        // run too, and a cancellation then stops one of them instead.
        let waiting = try await eventually(50) { try lockWaits(configuration) > 0 }
        #expect(waiting, "\(sessions(configuration))")
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(!holder.wasReleased)
        let idle = try await eventually(20) { try busySessions(configuration).isEmpty }
        let stillBusy = try busySessions(configuration)
        #expect(idle, "\(stillBusy)")
    }

    @Test func aFetchWaitingOnTheServerStopsWhenItsTaskIsCancelled() async throws {
        try await Self.withManager { manager, executor in
            let configuration = manager.coordinator.pool.configuration
            let holder = try LockHolder(configuration, lock: "LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
            defer { holder.release() }
            let context = manager.newPrivateContext()
            let task = Task(executorPreference: executor) { try await context.perform { try context.fetchAll(User.self).count } }
            try await Self.cancelOnceWaiting(task, holder: holder, configuration)
            holder.release()
            // The same context and manager work on.
            let count = try await context.perform { try context.fetchAll(User.self).count }
            #expect(count == 0)
        }
    }

    /// A pinned main context's read, waiting on the server, stopped by its task's
    /// cancellation: the pinned transaction is over, so every later read says the pin is
    /// lost (never a newer snapshot) until the unpin, after which the context reads again
    /// and no session is left in an aborted transaction.
    @Test func aCancelledReadOfAPinnedContextLosesThePinUntilTheUnpin() async throws {
        try await Self.withManager { manager, executor in
            let configuration = manager.coordinator.pool.configuration
            let context = manager.mainContext
            _ = try await context.perform { try context.pinSnapshot() }
            let holder = try LockHolder(configuration, lock: "LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
            defer { holder.release() }
            let task = Task(executorPreference: executor) { try await context.perform { try context.fetchAll(User.self).count } }
            let waiting = try await Self.eventually(50) { try Self.lockWaits(configuration) > 0 }
            #expect(waiting, "\(Self.sessions(configuration))")
            task.cancel()
            let stopped: Bool
            switch await task.result {
            case .success: stopped = false
            case .failure(let error): stopped = error is CancellationError || (error as? SnapshotError)?.code == .lost
            }
            #expect(stopped, "the pinned read was not stopped by the cancellation")
            #expect(!holder.wasReleased)
            holder.release()
            let lost = try await context.perform { () -> Bool in
                do {
                    _ = try User.count(in: context)
                    return false
                } catch let error as SnapshotError {
                    return error.code == .lost
                } catch {
                    return false
                }
            }
            #expect(lost, "a read after the lost pin did not say so")
            let pinned = try await context.perform { context.isSnapshotPinned }
            #expect(pinned)
            _ = try await context.perform { try context.unpinSnapshot() }
            let count = try await context.perform { try User.count(in: context) }
            #expect(count == 0)
            let idle = try await Self.eventually(20) { try Self.busySessions(configuration).isEmpty }
            let busy = try Self.busySessions(configuration)
            #expect(idle, "\(busy)")
        }
    }

    @Test func aSaveWaitingOnARowLockStopsAndKeepsItsChanges() async throws {
        try await Self.withManager { manager, executor in
            let configuration = manager.coordinator.pool.configuration
            let context = manager.newPrivateContext()
            try await context.perform {
                ExampleSchema.insertUsers(1, in: context)[0].name = "before"
                try context.save()
            }
            let holder = try LockHolder(configuration, lock: "SELECT * FROM users FOR UPDATE")
            defer { holder.release() }
            let task = Task(executorPreference: executor) {
                try await context.perform {
                    let user = try #require(try context.fetchAll(User.self).first)
                    user.name = "after"
                    try context.save()
                }
            }
            try await Self.cancelOnceWaiting(task, holder: holder, configuration)
            holder.release()
            // The change is still the context's, unsaved; the row still holds the old name.
            let pending = try await context.perform { () throws -> (Bool, String?) in
                let user = try #require(context.registeredObjects.compactMap { $0 as? User }.first)
                return (context.hasChanges, user.name)
            }
            #expect(pending.0 && pending.1 == "after")
            let observer = try Connection(configuration)
            defer { observer.close() }
            #expect(try observer.query("SELECT name FROM users")[0].decode(String.self, at: 0) == "before")
            // Saved again, uncancelled, it commits.
            try await context.perform { try context.save() }
            #expect(try observer.query("SELECT name FROM users")[0].decode(String.self, at: 0) == "after")
        }
    }

    /// An import whose third batch waits on a row lock: cancelled, that batch is rolled
    /// back, the two before it stay saved.
    @Test func anImportBatchWaitingOnARowLockStopsWhenItsTaskIsCancelled() async throws {
        try await Self.withManager { manager, executor in
            let configuration = manager.coordinator.pool.configuration
            let observer = try Connection(configuration)
            defer { observer.close() }
            try observer.execute("INSERT INTO users (user_id, name) VALUES ('u25', 'locked')")
            let holder = try LockHolder(configuration, lock: "SELECT * FROM users WHERE user_id = 'u25' FOR UPDATE")
            defer { holder.release() }
            let task = Task(executorPreference: executor) {
                try await manager.importRecords(
                    ImportSchema.userRecords(0..<40), mapper: userMapper, options: ImportOptions(batchSize: 10))
            }
            try await Self.cancelOnceWaiting(task, holder: holder, configuration)
            holder.release()
            let rows = try observer.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0)
            #expect(rows == 21)   // two batches of ten, and the locked row
            let locked = try observer.query("SELECT name FROM users WHERE user_id = 'u25'")[0].decode(String.self, at: 0)
            #expect(locked == "locked")
        }
    }

    @Test func aBlockStillQueuedWhenItsTaskIsCancelledDoesNotRun() async throws {
        try await Self.withManager { manager, executor in
            let context = manager.newPrivateContext()
            let ran = Counter()
            let started = Counter()
            let release = DispatchSemaphore(value: 0)
            // The context's queue is busy with another block (on a thread of its own: a
            // cooperative thread must not block).
            Thread.detachNewThread {
                context.performAndWait {
                    started.add(1)
                    release.wait()
                }
            }
            let busy = try await Self.eventually(50) { started.value == 1 }
            #expect(busy)
            let task = Task(executorPreference: executor) { try await context.perform { ran.add(1) } }
            // (Until the task has queued its block behind the busy one.)
            try await Task.sleep(for: .milliseconds(100))
            task.cancel()
            release.signal()
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
            #expect(ran.value == 0)
            // A block of an uncancelled task runs.
            try await context.perform { ran.add(1) }
            #expect(ran.value == 1)
        }
    }

    /// A task cancelled before its statement is sent sends none; a rollback still runs.
    @Test func aCancelledScopeSendsNothingButRollbacks() throws {
        let connection = try Connection(TestDatabase.serverConfiguration())
        defer { connection.close() }
        let scope = StatementCancellation()
        scope.cancel()
        let before = connection.statementCount
        var refused = false
        do {
            try StatementCancellation.run(scope) { _ = try connection.execute("SELECT 1") }
        } catch is CancellationError {
            refused = true
        }
        #expect(refused && connection.statementCount == before)
        try connection.begin()
        try StatementCancellation.run(scope) { try connection.rollback() }
        #expect(connection.transactionStatus == .idle)
    }
}
