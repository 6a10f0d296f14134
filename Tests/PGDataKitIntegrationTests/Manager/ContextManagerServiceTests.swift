import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Graceful shutdown (issue 46, item 3): a manager's `Service` in a `ServiceGroup`.
///
/// The waits are long (800 s, under a lock timeout of 900 s): ServiceLifecycle's group and
/// the manager's shutdown run steps in tasks of their own on the cooperative pool, where in
/// a full run a suspended task waits behind every test queued before it. With two CPU
/// burners beside the suite (`scripts/flake-hunt`) `run()` with a grace period of 0.5 s
/// took 7.5 s once. On threads of their own (`.onItsOwnThread`) the tests were worse, not
/// better: 106–377 s in full runs (309 s in CI), the shutdown's steps apparently served
/// after the rest of the pool's queue; so they stay on the pool.
@Suite("A context manager as a service")
struct ContextManagerServiceTests {
    /// Polls `condition` every 10 ms (without holding a thread) until it holds, or fails
    /// after `timeout`.
    static func until(_ what: String, timeout: Duration = patience, _ condition: () throws -> Bool) async throws {
        let start = ContinuousClock.now
        while try !condition() {
            if start.duration(to: .now) > timeout { throw TestFailure("timed out waiting until \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// A database with the example schema and a manager on it; the manager is closed and
    /// the database dropped afterwards. Its lock timeout is 15 minutes, not 5 s: a save in
    /// flight here waits on a lock the test holds for as long as a loaded machine takes
    /// (and a shutdown that waited for that save, not its grace period, would take that
    /// long).
    static func withManager(_ body: (ContextManager, ConnectionConfiguration) async throws -> Void) async throws {
        let (fresh, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        var configuration = fresh
        configuration.lockTimeout = .seconds(900)
        let manager = try ExampleSchema.makeManager(configuration)
        defer { manager.close() }
        try await body(manager, configuration)
    }

    /// A connection holding `LOCK TABLE users IN SHARE MODE` in an open transaction: every
    /// insert into users waits until `release()`.
    final class UsersLock: Sendable {
        let connection: Connection

        init(_ configuration: ConnectionConfiguration) throws {
            connection = try Connection(configuration)
            try connection.execute("BEGIN")
            try connection.execute("LOCK TABLE users IN SHARE MODE")
        }

        /// How many backends of the database wait for a lock now.
        func waiting() throws -> Int {
            try connection.query(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )[0].decode(Int.self, at: 0)
        }

        func release() throws {
            try connection.execute("COMMIT")
            connection.close()
        }
    }

    /// Starts a save of a new user `userID` in a private context whose transaction is open
    /// already (it fetched first), so the save is work in flight, not new work.
    static func startSave(_ userID: String, in manager: ContextManager) async throws -> Task<Void, any Error> {
        let context = manager.newPrivateContext(name: "in flight")
        try await context.perform { _ = try User.count(in: context) }
        return Task {
            try await context.perform {
                let user = User(context: context)
                user.userID = userID
                try context.save()
            }
        }
    }

    /// The service is in a group whose graceful shutdown is triggered while a save waits
    /// on a lock: new work is refused with `ShutdownError` at once, the save commits when
    /// the lock goes, then `run()` returns and the pool is closed.
    @Test func aSaveInFlightCommitsAndNewWorkIsRefused() async throws {
        try await Self.withManager { manager, configuration in
            let lock = try UsersLock(configuration)
            let save = try await Self.startSave("in-flight", in: manager)
            try await Self.until("the save waits for the lock", timeout: .seconds(800)) { try lock.waiting() == 1 }

            let group = ServiceGroup(
                services: [ContextManagerService(manager, gracePeriod: .seconds(300))], logger: Logger(label: "test"))
            let run = Task { try await group.run() }
            await group.triggerGracefulShutdown()
            try await Self.until("the shutdown begins", timeout: .seconds(800)) { manager.isShuttingDown }

            // New work: a private context's first transaction, and a main-context read.
            let fresh = manager.newPrivateContext()
            var refused = false
            do {
                try await fresh.perform {
                    User(context: fresh).userID = "too-late"
                    try fresh.save()
                }
            } catch ShutdownError.Code.shuttingDown {
                refused = true
            }
            #expect(refused)
            let main = manager.mainContext
            await #expect(throws: ShutdownError.shuttingDown) {
                try await main.perform { _ = try User.count(in: main) }
            }
            // The save in flight holds the service until it ends.
            try await Task.sleep(for: .milliseconds(200))
            #expect(!manager.coordinator.isClosed)

            try lock.release()
            try await save.value
            try await run.value
            #expect(manager.coordinator.isClosed)
            let connection = try Connection(configuration)
            defer { connection.close() }
            let stored = try connection.query("SELECT user_id FROM users ORDER BY user_id").map { try $0.decode(String.self, at: 0) }
            #expect(stored == ["in-flight"])
        }
    }

    /// Work that outlasts the grace period does not hold the service: `run()` returns
    /// after the grace period (0.5 s) while the save in flight still waits for the lock,
    /// and the manager is closed. (No upper bound on the time: with two CPU burners beside
    /// the suite it once took 334 s; a service that waited for the save would return only
    /// once the save stopped waiting, after its lock timeout of 900 s.)
    @Test func theGracePeriodBoundsTheWait() async throws {
        try await Self.withManager { manager, configuration in
            let lock = try UsersLock(configuration)
            let save = try await Self.startSave("late", in: manager)
            try await Self.until("the save waits for the lock", timeout: .seconds(800)) { try lock.waiting() == 1 }

            let group = ServiceGroup(
                services: [ContextManagerService(manager, gracePeriod: .milliseconds(500))], logger: Logger(label: "test"))
            let run = Task { try await group.run() }
            let start = ContinuousClock.now
            await group.triggerGracefulShutdown()
            try await run.value
            let elapsed = start.duration(to: .now)
            #expect(elapsed >= .milliseconds(450))
            #expect(try lock.waiting() == 1, "run() returned after \(elapsed), once the save no longer waited")
            print("run() with a grace period of 0.5 s took \(elapsed)")
            #expect(manager.coordinator.isClosed)
            // The save goes on past the grace period on the connection it holds.
            try lock.release()
            _ = await save.result
        }
    }

    /// Cancelling the service's task ends it the same way: refused, drained, closed.
    @Test func cancellationShutsDownToo() async throws {
        try await Self.withManager { manager, _ in
            let service = ContextManagerService(manager, gracePeriod: .seconds(5))
            let run = Task { try await service.run() }
            try await Task.sleep(for: .milliseconds(100))
            #expect(!manager.isShuttingDown)
            run.cancel()
            try await run.value
            #expect(manager.isShuttingDown)
            #expect(manager.coordinator.isClosed)
        }
    }

    /// `shutdown(gracePeriod:)` without a service group, as a Vapor program calls it after
    /// `app.asyncShutdown()`: nothing in flight, so it drains at once.
    @Test func shutdownWithoutAServiceGroup() async throws {
        try await Self.withManager { manager, _ in
            let drained = await manager.shutdown(gracePeriod: .seconds(5))
            #expect(drained)
            #expect(manager.coordinator.isClosed)
            #expect(manager.coordinator.beginShutdown() == false)  // (begun already)
        }
    }

    /// SIGTERM to a process running the service in a group with
    /// `gracefulShutdownSignals: [.sigterm]`, while four tasks save: it exits 0, and every
    /// save it reported as returned is in the table.
    @Test(.heavy) func sigtermExitsCleanlyAndKeepsEveryAcknowledgedSave() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let helper = try HelperProcess.start("service-sigterm", configuration, ["w", "4"])
            try helper.waitUntil("50 saves") { lines in lines.filter { $0.hasPrefix("saved ") }.count >= 50 }
            let outcome = try #require(helper.stop())
            #expect(outcome.status == 0, "\(outcome.output.suffix(500)) \(outcome.error.suffix(2000))")
            let lines = outcome.output.split(separator: "\n").map(String.init)
            #expect(lines.last == "stopped closed=true")
            #expect(!lines.contains { $0.hasPrefix("failed ") }, "\(lines.filter { $0.hasPrefix("failed ") }.prefix(3))")
            let acknowledged = Set(lines.filter { $0.hasPrefix("saved ") }.map { String($0.dropFirst(6)) })
            let connection = try Connection(configuration)
            defer { connection.close() }
            let stored = Set(try connection.query("SELECT user_id FROM users").map { try $0.decode(String.self, at: 0) })
            #expect(acknowledged.count >= 50)
            #expect(acknowledged.subtracting(stored).isEmpty, "acknowledged but missing: \(acknowledged.subtracting(stored).prefix(5))")
        }
    }
}
