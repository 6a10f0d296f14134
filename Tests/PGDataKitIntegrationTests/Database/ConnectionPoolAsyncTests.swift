import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Entries appended from any thread, in order.
final class Recorded: Sendable {
    private let list = Mutex<[String]>([])
    func append(_ entry: String) { list.withLock { $0.append(entry) } }
    var entries: [String] { list.withLock { $0 } }
}

/// Tasks wait for pooled connections suspended, in line with threads, and stop waiting
/// when cancelled, timed out or the pool closes; the context's async `perform` waits for
/// its connection that way and keeps it for the whole block.
@Suite("ConnectionPool from async code")
struct ConnectionPoolAsyncTests {
    /// Polls (without blocking a thread) until `condition` holds, for up to 30 s.
    func eventually(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for _ in 0..<3_000 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
        #expect(condition(), sourceLocation: sourceLocation)
    }

    @Test func waitersAreServedInArrivalOrderThreadsAndTasksAlike() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase()
        defer { cleanup() }
        try await DedicatedExecutor.run { executor in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
            defer { pool.close() }
            let held = try await pool.acquire()
            let order = Recorded()
            let first = Task(executorPreference: executor) {
                let connection = try await pool.acquire(timeout: .seconds(30))
                order.append("task 1")
                pool.release(connection)
            }
            try await eventually { pool.waiting == 1 }
            let threadDone = Recorded()
            Thread.detachNewThread {
                if let connection = try? pool.acquire(timeout: .seconds(30)) {
                    order.append("thread")
                    pool.release(connection)
                }
                threadDone.append("done")
            }
            try await eventually { pool.waiting == 2 }
            let third = Task(executorPreference: executor) {
                let connection = try await pool.acquire(timeout: .seconds(30))
                order.append("task 2")
                pool.release(connection)
            }
            try await eventually { pool.waiting == 3 }
            pool.release(held)
            try await first.value
            try await third.value
            try await eventually { !threadDone.entries.isEmpty }
            #expect(order.entries == ["task 1", "thread", "task 2"])
            #expect(pool.statistics == (open: 1, idle: 1))
        }
    }

    @Test func aTaskWaitTimesOutWithATypedError() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase()
        defer { cleanup() }
        let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
        defer { pool.close() }
        let held = try await pool.acquire()
        await #expect(throws: ConnectionPoolError.timedOut(waited: .milliseconds(200), maximumConnections: 1)) {
            _ = try await pool.acquire(timeout: .milliseconds(200))
        }
        #expect(pool.waiting == 0)
        pool.release(held)
        let again = try await pool.acquire(timeout: .seconds(5))
        #expect(again === held)
        pool.release(again)
    }

    @Test func cancellingAWaitingTaskEndsItsWaitAndLeavesThePoolWhole() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase()
        defer { cleanup() }
        try await DedicatedExecutor.run { executor in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
            defer { pool.close() }
            let held = try await pool.acquire()
            let waiter = Task(executorPreference: executor) { try await pool.acquire(timeout: .seconds(60)) }
            try await eventually { pool.waiting == 1 }
            waiter.cancel()
            await #expect(throws: CancellationError.self) { _ = try await waiter.value }
            #expect(pool.waiting == 0)
            // Its place was not lost: the connection goes to the next borrower.
            pool.release(held)
            let next = try await pool.acquire(timeout: .seconds(5))
            #expect(next === held)
            pool.release(next)
            // A task cancelled before it asks does not wait at all.
            let early = Task(executorPreference: executor) {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await pool.acquire(timeout: .seconds(60))
            }
            await #expect(throws: CancellationError.self) { _ = try await early.value }
            #expect(pool.statistics == (open: 1, idle: 1))
        }
    }

    @Test func closingThePoolFailsTheWaitingTasks() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase()
        defer { cleanup() }
        try await DedicatedExecutor.run { executor in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
            let held = try await pool.acquire()
            let waiter = Task(executorPreference: executor) { try await pool.acquire(timeout: .seconds(60)) }
            try await eventually { pool.waiting == 1 }
            pool.close()
            await #expect(throws: ConnectionPoolError.closed) { _ = try await waiter.value }
            pool.release(held)
            #expect(pool.statistics == (open: 0, idle: 0))
            #expect(held.isClosed)
        }
    }

    /// Many tasks saving through private contexts on a pool of one: each block waits for
    /// the one connection without a thread and keeps it for its second save. (On a thread
    /// of its own, its tasks too: on the cooperative pool, behind synchronous tests holding
    /// its two threads, a waiter handed the connection could not run, and the last ones
    /// timed out after 10 s in a run with two CPU burners.)
    @Test(.onItsOwnThread) func contextsWaitForTheirConnectionAndKeepItForTheBlock() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self], maximumConnections: 1)
        defer { manager.close() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask {
                    let context = manager.newPrivateContext()
                    try await context.perform {
                        let user = User(context: context)
                        user.userID = "pool-\(index)"
                        try context.save()
                        user.name = "saved twice"
                        try context.save()
                    }
                }
            }
            try await group.waitForAll()
        }
        let count = try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'saved twice'", in: manager)
        #expect(count == 40)
        #expect(manager.coordinator.pool.statistics.open <= 1)
    }

    /// A context that holds its transaction (its connection) does not wait for another
    /// one: on a pool of one that would wait forever.
    @Test func aContextHoldingItsTransactionDoesNotWaitForALease() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self], maximumConnections: 1)
        defer { manager.close() }
        let context = manager.newPrivateContext()
        let open = try await context.perform {
            _ = try User.count(in: context)
            return context.hasOpenTransaction
        }
        #expect(open)
        let saved = try await context.perform {
            let user = User(context: context)
            user.userID = "holder"
            try context.save()
            return context.hasOpenTransaction
        }
        #expect(!saved)
        #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 1)
    }

    /// A task cancelled while its `perform` waits for a connection gets
    /// `CancellationError`, and its block never runs.
    @Test func cancellingAPerformThatWaitsForAConnection() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        try await DedicatedExecutor.run { executor in
            let manager = try ContextManager(
                configuration: configuration, entities: [User.self, Post.self], maximumConnections: 1)
            defer { manager.close() }
            let holder = manager.newPrivateContext()
            _ = try await holder.perform { try User.count(in: holder) }  // holds the only connection
            let ran = Recorded()
            let waiter = Task(executorPreference: executor) {
                let context = manager.newPrivateContext()
                try await context.perform { ran.append("ran") }
            }
            try await eventually { manager.coordinator.pool.waiting == 1 }
            waiter.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
            #expect(ran.entries.isEmpty)
            try await holder.perform { holder.rollback() }
            let context = manager.newPrivateContext()
            let count = try await context.perform { try User.count(in: context) }
            #expect(count == 0)
        }
    }
}
