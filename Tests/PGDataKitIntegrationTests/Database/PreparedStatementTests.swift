import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("Prepared statements")
struct PreparedStatementTests {
    /// The statements this session has prepared, as the server lists them.
    func prepared(_ connection: Connection) throws -> [String] {
        let rows = try connection.query(
            "SELECT statement FROM pg_prepared_statements WHERE name LIKE 'pgdatakit\\_%' ORDER BY statement")
        return try (0..<rows.count).map { try rows[$0].decode(String.self, at: 0) }
    }

    /// Runs `SELECT $1::int8` inside a transaction (where a name the session does not
    /// have would fail it instead of being prepared again) and checks it is the one
    /// statement the session has prepared.
    func expectUsableInATransaction(_ connection: Connection) throws {
        try connection.transaction { connection in
            let five = try connection.query("SELECT $1::int8", [5])[0].decode(Int.self, at: 0)
            #expect(five == 5)
        }
        #expect(try prepared(connection) == ["SELECT $1::int8"])
    }

    func connect(_ configuration: ConnectionConfiguration, cacheSize: Int) throws -> Connection {
        var configuration = configuration
        configuration.preparedStatementCacheSize = cacheSize
        return try Connection(configuration)
    }

    @Test func aStatementWithParametersIsPreparedOncePerSession() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try connect(configuration, cacheSize: 8)
            defer { connection.close() }
            for value in 1...5 {
                let sum = try connection.query("SELECT $1::int8 + 1", [value])[0].decode(Int.self, at: 0)
                #expect(sum == value + 1)
            }
            #expect(try prepared(connection) == ["SELECT $1::int8 + 1"])
            // In a pipeline too (how the store saves), in a transaction.
            try connection.transaction { connection in
                _ = try connection.executePipeline([("SELECT $1::int8 + 1", [7]), ("SELECT $1::text", ["x"])])
            }
            #expect(try prepared(connection) == ["SELECT $1::int8 + 1", "SELECT $1::text"])
        }
    }

    @Test func aFullCacheDropsTheLeastRecentlyUsedStatementFromTheServer() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try connect(configuration, cacheSize: 2)
            defer { connection.close() }
            _ = try connection.query("SELECT $1::int8", [1])
            _ = try connection.query("SELECT $1::int8 * 2", [1])
            _ = try connection.query("SELECT $1::int8", [1])
            _ = try connection.query("SELECT $1::int8 * 3", [1])  // evicts "* 2"
            _ = try connection.query("SELECT $1::int8 * 4", [1])  // sends its DEALLOCATE, evicts the first
            _ = try connection.query("SELECT $1::int8 * 5", [1])
            let left = try prepared(connection)
            #expect(left.count <= 3)
            #expect(!left.contains("SELECT $1::int8 * 2"))
            #expect(!left.contains("SELECT $1::int8"))
            #expect(left.contains("SELECT $1::int8 * 5"))
        }
    }

    /// Saves run in pipelines only: statements the cache evicted are dropped from the
    /// server before the next pipeline (libpq refuses a synchronous `DEALLOCATE` inside
    /// pipeline mode, where they used to wait for a plain `execute()`).
    @Test func pipelinesAloneDropEvictedStatements() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try connect(configuration, cacheSize: 2)
            defer { connection.close() }
            for factor in 2...7 {
                _ = try connection.executePipeline([("SELECT $1::int8 * \(factor)", [1])])
                // At most the one this pipeline evicted waits for the next.
                #expect(connection.preparedStatements.evicted.count <= 1, "after * \(factor)")
            }
            let left = try prepared(connection)
            #expect(left.count <= 3)
            #expect(left.contains("SELECT $1::int8 * 7"))
            #expect(!left.contains("SELECT $1::int8 * 2"))
        }
    }

    @Test func cacheSizeZeroPreparesNothing() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try connect(configuration, cacheSize: 0)
            defer { connection.close() }
            for value in 1...3 { _ = try connection.query("SELECT $1::int8", [value]) }
            try connection.transaction { connection in
                _ = try connection.executePipeline([("SELECT $1::int8", [7])])
            }
            #expect(try prepared(connection).isEmpty)
        }
    }

    @Test func statementsDroppedByDiscardAllArePreparedAgain() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try connect(configuration, cacheSize: 8)
            defer { connection.close() }
            _ = try connection.query("SELECT $1::int8", [1])
            try connection.executeScript("DEALLOCATE ALL")
            // Outside a transaction the call is retried with a new preparation.
            #expect(try connection.query("SELECT $1::int8", [2])[0].decode(Int.self, at: 0) == 2)
            #expect(try prepared(connection) == ["SELECT $1::int8"])
            // Inside one the transaction fails with the server's error, once.
            try connection.executeScript("DEALLOCATE ALL")
            do {
                try connection.transaction { connection in
                    _ = try connection.query("SELECT 1")  // the transaction is open on the server
                    _ = try connection.query("SELECT $1::int8", [3])
                }
                Issue.record("expected the server to report the missing statement")
            } catch let error as PostgresError {
                #expect(error.sqlState == .invalidSQLStatementName)
            }
            #expect(try connection.query("SELECT $1::int8", [4])[0].decode(Int.self, at: 0) == 4)
        }
    }

    @Test func aChangedResultTypeIsPreparedAgainOutsideATransaction() throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript("CREATE TABLE items (id int8 PRIMARY KEY, name text)")
            try connection.execute("INSERT INTO items VALUES ($1, $2)", [1, "one"])
            #expect(try connection.query("SELECT * FROM items WHERE id = $1", [1])[0].decode(String.self, at: 1) == "one")
            try connection.executeScript("ALTER TABLE items ADD COLUMN size int8 DEFAULT 7")
            let row = try connection.query("SELECT * FROM items WHERE id = $1", [1])
            #expect(try row[0].decode(Int.self, at: 2) == 7)
        }
    }

    @Test func aStatementThatFailsToPrepareIsNotKept() throws {
        try TestDatabase.withConnection { connection in
            for _ in 0..<2 {
                do {
                    _ = try connection.query("SELECT $1::int8 FROM no_such_table", [1])
                    Issue.record("expected an undefined table")
                } catch let error as PostgresError {
                    #expect(error.sqlState == .undefinedTable)
                }
            }
            do {
                try connection.transaction { connection in
                    _ = try connection.executePipeline([("SELECT $1::int8 FROM no_such_table", [1])])
                }
                Issue.record("expected an undefined table")
            } catch let error as PostgresError {
                #expect(error.sqlState == .undefinedTable)
            }
            #expect(try prepared(connection).isEmpty)
            #expect(connection.preparedStatements.count == 0)
        }
    }

    @Test func aNewSessionStartsWithoutPreparedStatements() throws {
        try TestDatabase.withConnection { connection in
            _ = try connection.query("SELECT $1::int8", [1])
            try connection.reconnect()
            try expectUsableInATransaction(connection)  // the cache was cleared
        }
    }

    @Test func aSaveWhoseStatementsTheSessionLostIsRetried() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try ExampleSchema.makeManager(configuration).close()  // the example tables
            // One pooled connection: the saves and the DEALLOCATE share it.
            let manager = try ContextManager(configuration: configuration, entities: ExampleSchema.entities, maximumConnections: 1)
            defer { manager.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = ExampleSchema.insertUsers(1, in: context)[0]
                try context.save()
                user.name = "A"
                try context.save()  // prepares the update
                try manager.coordinator.pool.withConnection { try $0.executeScript("DEALLOCATE ALL") }
                user.name = "B"
                try context.save()  // the same update, gone from the session: retried
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'B'", in: manager) == 1)
        }
    }

    @Test func anEvictionInAFailedTransactionIsDeallocatedLater() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try connect(configuration, cacheSize: 1)
            defer { connection.close() }
            _ = try connection.query("SELECT $1::int8", [1])
            do {
                try connection.transaction { connection in
                    _ = try? connection.query("SELECT 1/0")  // the transaction has failed
                    _ = try connection.query("SELECT $1::int8 * 2", [1])  // evicts the first: its DEALLOCATE fails too
                }
                Issue.record("expected the failed transaction to refuse the statement")
            } catch let error as PostgresError {
                #expect(error.sqlState == .inFailedTransaction)
            }
            #expect(connection.preparedStatements.evicted.count == 1)
            _ = try connection.query("SELECT $1::int8 * 3", [1])  // drops the evicted one now
            #expect(connection.preparedStatements.evicted.isEmpty)  // ("* 2" was never prepared: "* 3" evicts nothing)
            #expect(try prepared(connection) == ["SELECT $1::int8 * 3"])
        }
    }

    @Test func evictedStatementsTheServerAlreadyDroppedDoNotFailLaterStatements() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try connect(configuration, cacheSize: 1)
            defer { connection.close() }
            _ = try connection.query("SELECT $1::int8", [1])
            _ = try connection.query("SELECT $1::int8 * 2", [1])  // evicts the first
            try connection.executeScript("DEALLOCATE ALL")  // the server drops both behind the cache's back
            for factor in 3...5 {
                let product = try connection.query("SELECT $1::int8 * \(factor)", [2])[0].decode(Int.self, at: 0)
                #expect(product == 2 * factor)
            }
            try connection.transaction { connection in
                let six = try connection.query("SELECT $1::int8 * 6", [1])[0].decode(Int.self, at: 0)
                #expect(six == 6)
            }
            // Inside the transaction the statement it evicted was kept; the next call drops it.
            #expect(try prepared(connection).count > 1)
            _ = try connection.query("SELECT $1::int8 * 6", [1])
            #expect(try prepared(connection) == ["SELECT $1::int8 * 6"])
        }
    }

    @Test func aStatementPreparedInARolledBackTransactionStaysPrepared() throws {
        try TestDatabase.withConnection { connection in
            try connection.begin()
            _ = try connection.query("SELECT $1::int8", [1])
            try connection.rollback()
            try expectUsableInATransaction(connection)  // still prepared
        }
    }
}
