import Foundation
import PGDataKit
import Testing

@Suite("ConnectionPool")
struct ConnectionPoolTests {
    @Test func exhaustionTimesOutWithATypedError() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 2)
            let first = try pool.acquire()
            let second = try pool.acquire()
            let started = ContinuousClock.now
            do {
                _ = try pool.acquire(timeout: .milliseconds(300))
                Issue.record("expected a timeout")
            } catch let error as ConnectionPoolError {
                #expect(error == .timedOut(waited: .milliseconds(300), maximumConnections: 2))
                #expect(error.description.contains("2"))
            }
            let elapsed = ContinuousClock.now - started
            #expect(elapsed >= .milliseconds(290))
            // A wait that ignored its timeout would never end (no connection is released).
            #expect(elapsed < .seconds(30))
            pool.release(first)
            // A freed connection is handed out again.
            let third = try pool.acquire(timeout: .milliseconds(300))
            #expect(third === first)
            pool.release(second)
            pool.release(third)
            pool.close()
        }
    }

    @Test func waiterGetsTheConnectionWhenItIsReleased() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
            let held = try pool.acquire()
            let releaser = Thread {
                Thread.sleep(forTimeInterval: 0.2)
                pool.release(held)
            }
            releaser.start()
            let got = try pool.acquire(timeout: .seconds(5))
            #expect(got === held)
            pool.release(got)
        }
    }

    @Test func neverHandsOutAConnectionInsideATransaction() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
            let connection = try pool.acquire()
            try connection.begin()
            try connection.execute("INSERT INTO users (user_id) VALUES ('uncommitted')")
            pool.release(connection)
            let (status, count) = try pool.withConnection { connection in
                (connection.transactionStatus, try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0))
            }
            #expect(status == .idle)
            #expect(count == 0)
        }
    }

    @Test func terminatedConnectionIsReplaced() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
            let firstPID = try pool.withConnection { $0.backendPID }
            let admin = try Connection(configuration)
            defer { admin.close() }
            let terminated = try admin.query("SELECT pg_terminate_backend($1)", [firstPID])
            #expect(try terminated[0].decode(Bool.self, at: 0))
            try waitUntilGone(pid: firstPID, admin: admin)
            let (secondPID, answer) = try pool.withConnection { connection in
                (connection.backendPID, try connection.query("SELECT 41 + 1")[0].decode(Int.self, at: 0))
            }
            #expect(answer == 42)
            #expect(secondPID != firstPID)
            #expect(pool.statistics.open == 1)
        }
    }

    @Test func connectionBrokenWhileBorrowedIsNotReturnedToThePool() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
            let admin = try Connection(configuration)
            defer { admin.close() }
            let pid: Int32 = try pool.withConnection { connection in
                let pid = connection.backendPID
                try admin.execute("SELECT pg_terminate_backend($1)", [pid])
                try waitUntilGone(pid: pid, admin: admin)
                #expect(throws: PostgresError.self) { try connection.execute("SELECT 1") }
                return pid
            }
            #expect(pool.statistics.open == 0)
            let newPID = try pool.withConnection { $0.backendPID }
            #expect(newPID != pid)
        }
    }

    @Test func manyThreadsShareABoundedPool() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 3)
            try onThreads(8) { thread in
                for step in 0..<25 {
                    try pool.withConnection { connection in
                        let value = try connection.query("SELECT $1::int * 2", [thread * 100 + step])[0]
                            .decode(Int.self, at: 0)
                        guard value == (thread * 100 + step) * 2 else { throw TestFailure("wrong answer") }
                    }
                }
            }
            #expect(pool.statistics.open <= 3)
            #expect(pool.statistics.open == pool.statistics.idle)
        }
    }

    @Test func closedPoolRefusesToLend() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let pool = ConnectionPool(configuration: configuration, maximumConnections: 1)
            pool.close()
            #expect(throws: ConnectionPoolError.self) { try pool.acquire() }
        }
    }

    @Test func connectionFailureFreesTheSlot() throws {
        let port = try closedPort()
        let pool = ConnectionPool(
            configuration: ConnectionConfiguration("postgresql://nobody@127.0.0.1:\(port)/none"),
            maximumConnections: 1)
        for _ in 0..<3 {
            #expect(throws: PostgresError.self) { try pool.acquire(timeout: .milliseconds(100)) }
        }
        #expect(pool.statistics.open == 0)
    }
}
