import Foundation
import Synchronization
import Testing

@testable import PGDataKitPostgres

/// A statement sent synchronously stops when what waits for it gives up: the task that
/// sent it from its own thread is cancelled, or `close()` is called from another thread.
/// Each runs `pg_sleep(60)`: had it not been stopped, it would return normally after a
/// minute and the test would fail on its outcome (the server's `57014`, query_canceled).
@Suite("Stopping a synchronous statement")
struct SynchronousStatementStopTests {
    /// Polls until the session `pid` runs a statement (`pg_stat_activity`), for up to 30 s.
    static func waitUntilActive(_ pid: Int32, observer: Connection) throws -> Bool {
        for _ in 0..<3_000 {
            if try isActive(pid, observer: observer) { return true }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return false
    }

    /// Blocks the calling task's thread until the task is cancelled.
    static func waitUntilCancelled() {
        while !Task.isCancelled { Thread.sleep(forTimeInterval: 0.005) }
    }

    static func isActive(_ pid: Int32, observer: Connection) throws -> Bool {
        let sql = "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'"
        return try observer.query(sql, [Int(pid)])[0].decode(Int.self, at: 0) == 1
    }

    @Test func aStatementOfACancelledTaskStopsOnTheServer() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let observer = try Connection(configuration)
        defer { observer.close() }
        let connection = try Connection(configuration)
        defer { connection.close() }
        let pid = connection.backendPID  // (read now: it waits for the connection's lock)
        try await DedicatedExecutor.run { _ in
            // The blocked task gets an executor of its own, so this one stays free.
            let blocking = DedicatedExecutor()
            let task = Task(executorPreference: blocking) { () throws -> Void in
                try connection.execute("SELECT pg_sleep(60)")
            }
            let active = try Self.waitUntilActive(pid, observer: observer)
            #expect(active)
            task.cancel()
            let outcome = await task.result
            #expect(throws: PostgresError.self) { try outcome.get() }
            if case .failure(let error as PostgresError) = outcome { #expect(error.sqlState == .queryCanceled) }
            // The server stopped it, and the session goes on clean.
            let stillActive = try Self.isActive(pid, observer: observer)
            let one = try connection.query("SELECT 1")[0].decode(Int.self, at: 0)
            #expect(!stillActive && connection.transactionStatus == .idle && one == 1)
        }
    }

    /// A task already cancelled sends nothing; `rollback()` still runs, so a transaction
    /// the task began is ended.
    @Test func aCancelledTaskSendsNothingButItsRollback() async throws {
        let connection = try Connection(TestDatabase.serverConfiguration())
        defer { connection.close() }
        try await DedicatedExecutor.run { _ in
            let began = DispatchSemaphore(value: 0)
            let task = Task(executorPreference: DedicatedExecutor()) { () throws -> [String] in
                var seen: [String] = []
                try connection.begin()
                began.signal()
                Self.waitUntilCancelled()
                let sent = connection.statementCount
                do {
                    try connection.execute("SELECT 1")
                    seen.append("sent")
                } catch is CancellationError {
                    seen.append(connection.statementCount == sent ? "refused, nothing sent" : "refused after sending")
                }
                try connection.rollback()
                seen.append("\(connection.transactionStatus)")
                return seen
            }
            began.wait()
            task.cancel()
            let seen = try await task.value
            #expect(seen == ["refused, nothing sent", "idle"])
        }
    }

    @Test func closingFromAnotherThreadStopsTheRunningStatement() throws {
        let configuration = try TestDatabase.serverConfiguration()
        let observer = try Connection(configuration)
        defer { observer.close() }
        let connection = try Connection(configuration)
        let pid = connection.backendPID
        let outcome = Mutex<String?>(nil)
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                try connection.execute("SELECT pg_sleep(60)")
                outcome.withLock { $0 = "returned" }
            } catch let error as PostgresError {
                outcome.withLock { $0 = error.sqlState?.rawValue ?? "\(error.kind)" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
            ended.signal()
        }
        #expect(try Self.waitUntilActive(pid, observer: observer))
        connection.close()
        #expect(connection.isClosed)
        #expect(ended.wait(timeout: .now() + 30) == .success)
        #expect(outcome.withLock { $0 } == SQLState.queryCanceled.rawValue)
        // The session is gone from the server.
        var left = 1
        for _ in 0..<300 where left > 0 {
            left = try observer.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", [Int(pid)])[0]
                .decode(Int.self, at: 0)
            if left > 0 { Thread.sleep(forTimeInterval: 0.01) }
        }
        #expect(left == 0)
    }
}
