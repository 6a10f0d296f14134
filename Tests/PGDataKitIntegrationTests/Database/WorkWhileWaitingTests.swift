import Foundation
import Synchronization
import Testing

@testable import PGDataKitPostgres

/// `Connection.doWhileWaiting`: work done on the calling thread between sending the next
/// statement and reading its result, so that it overlaps the server's work.
@Suite("Work done while a statement runs")
struct WorkWhileWaitingTests {
    /// When the work ran and when the statement answered, from one start.
    private func timings(
        on connection: Connection, _ sql: String, reusesPlan: Bool
    ) throws -> (workAt: Duration?, answeredAt: Duration) {
        let start = ContinuousClock.now
        let ranAt = Mutex<Duration?>(nil)
        connection.doWhileWaiting { ranAt.withLock { $0 = ContinuousClock.now - start } }
        defer { connection.doWhileWaiting(nil) }
        _ = try connection.execute(sql, [0.3], reusesPlan: reusesPlan)
        return (ranAt.withLock { $0 }, ContinuousClock.now - start)
    }

    /// A statement sent unprepared (`reusesPlan: false`, a long list's) goes as a pipeline
    /// of one: the work runs while the server sleeps, not after.
    @Test func anUnpreparedStatementRunsTheWorkWhileTheServerWorks() throws {
        try TestDatabase.withConnection { connection in
            let (workAt, answeredAt) = try timings(on: connection, "SELECT pg_sleep($1::float8)", reusesPlan: false)
            let ran = try #require(workAt, "the work ran")
            #expect(ran < .milliseconds(150), "before the server's 300 ms were over: \(ran)")
            #expect(answeredAt >= .milliseconds(300))
        }
    }

    /// A statement prepared by name: its first run prepares it in a pipeline (the work
    /// runs), later runs use `PQexecPrepared`, which waits without running it; the
    /// work is then left for the caller to cancel.
    @Test func aPreparedStatementRunsItOnlyWhenItIsPrepared() throws {
        try TestDatabase.withConnection { connection in
            let sql = "SELECT pg_sleep($1::float8)"
            let first = try timings(on: connection, sql, reusesPlan: true)
            #expect(try #require(first.workAt) < .milliseconds(150))
            let second = try timings(on: connection, sql, reusesPlan: true)
            #expect(second.workAt == nil)
            #expect(second.answeredAt >= .milliseconds(300))
        }
    }
}
