import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A context's `statementTimeout` limits the statements of the transactions it begins,
/// and nothing of it stays in the pooled session.
@Suite("A context's statement timeout")
struct StatementTimeoutTests {
    @Test func aStatementBeyondTheTimeoutFailsAndTheContextGoesOn() async throws {
        try await CancellationTests.withManager { manager, _ in
            let configuration = manager.coordinator.pool.configuration
            let holder = try CancellationTests.LockHolder(configuration, lock: "LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
            defer { holder.release() }
            let context = manager.newPrivateContext()
            context.statementTimeout = .milliseconds(300)
            let failure = try await context.perform { () -> PostgresError? in
                let user = User(context: context)
                user.userID = "kept"
                do {
                    _ = try context.fetchAll(User.self)
                    return nil
                } catch let error as PostgresError {
                    return error
                }
            }
            #expect(failure?.sqlState == .queryCanceled)
            // The lock was still held: the timeout, not the lock's release, ended the fetch.
            #expect(!holder.wasReleased)
            holder.release()
            let (open, unsaved) = try await context.perform { (context.hasOpenTransaction, context.insertedObjects.count) }
            #expect(!open)
            #expect(unsaved == 1)
            try await context.perform { try context.save() }
            // Nothing of the timeout lasts in the pooled sessions.
            let settings = try manager.coordinator.pool.withConnection { connection in
                try connection.query("SHOW statement_timeout")[0].decode(String.self, at: 0)
            }
            #expect(settings == "0")
            let plain = manager.newPrivateContext()
            let count = try await plain.perform { try plain.fetchAll(User.self).count }
            #expect(count == 1)
        }
    }

    /// The article's example: the transaction the context begins runs with it.
    @Test func aRequestsContextSetsItsTimeoutInItsTransaction() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            context.statementTimeout = .seconds(2)
            let setting = try context.performAndWait {
                _ = try User.count(in: context)
                return try context.withDatabase { connection in
                    try connection.query("SHOW statement_timeout")[0].decode(String.self, at: 0)
                }
            }
            #expect(setting == "2s")
        }
    }

    @Test func theTimeoutTravelsWithTheBeginAndCountsAsAStatement() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            connection.beginWithNextStatement(isolation: .readCommitted, statementTimeout: .milliseconds(1_500))
            let before = connection.statementCount
            let inside = try connection.query("SHOW statement_timeout")[0].decode(String.self, at: 0)
            #expect(inside == "1500ms")
            #expect(connection.statementCount - before == 3)  // BEGIN, set_config, SHOW
            try connection.commit()
            let after = try connection.query("SHOW statement_timeout")[0].decode(String.self, at: 0)
            #expect(after == "0")
            // A timeout too long for PostgreSQL is capped, a tiny one is at least 1 ms.
            #expect(Connection.milliseconds(.seconds(1_000_000_000)) == Int64(Int32.max))
            #expect(Connection.milliseconds(.microseconds(10)) == 1)
        }
    }
}
