import Foundation
import PGDataKit
import Testing

/// The Swift blocks of ConnectionsAndPool.md, Deployment.md, Migrations.md and
/// ThrowawayServer.md, compiled and run.
@Suite("Docs: connections, deployment, servers")
struct DeploymentDocTests {
    @Test func typedErrors() throws {
        try TestDatabase.withConnection(migrations: true) { connection in
            try connection.execute("INSERT INTO users (user_id) VALUES ($1)", ["u1"])
            do {
                try connection.execute("INSERT INTO users (user_id) VALUES ($1)", ["u1"])
            } catch let error as PostgresError where error.sqlState == .uniqueViolation {
                print("already there:", error.constraint ?? "")
            }
            do {
                try connection.execute("INSERT INTO users (user_id) VALUES ($1)", ["u1"])
            } catch SQLState.uniqueViolation {
                print("already there")
            }
            // Any other error would have been thrown; the second insert did not happen.
            #expect(try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 1)
        }
    }

    @Test func pool() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let url = try #require(configuration.renderedConnectionString())
            let pool = ConnectionPool(
                configuration: ConnectionConfiguration(url), maximumConnections: 8,
                acquireTimeout: .seconds(5))
            let count = try pool.withConnection { connection in
                try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0)
            }
            pool.close()
            #expect(count == 0)
        }
    }

    @Test(.enabled(if: PgBouncer.isAvailableOrRequired, "pgbouncer is not installed (apt-get install pgbouncer)"))
    func poolThroughPgBouncer() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try PgBouncer.withPgBouncer(server: configuration) { bouncer in
                let serverURL = try #require(configuration.renderedConnectionString())
                let pgbouncerURL = try #require(bouncer.configuration(for: configuration).renderedConnectionString())
                let manager = try ContextManager(
                    configuration: ConnectionConfiguration(pgbouncerURL),      // the pool: postgres://app@pgbouncer:6432/shop
                    listenerConfiguration: ConnectionConfiguration(serverURL), // LISTEN: postgres://app@db:5432/shop
                    entities: [User.self, Post.self])
                defer { manager.close() }
                let context = manager.newPrivateContext()
                try context.performAndWait {
                    User(context: context).userID = "through-pgbouncer"
                    try context.save()
                }
                #expect(try manager.mainContext.performAndWait { try manager.mainContext.fetchAll(User.self).count } == 1)
                #expect(manager.coordinator.listenerError == nil)
            }
        }
    }

    /// The failover URL names hosts this machine does not have: the manager fails to
    /// connect, naming them, at once (`connect_timeout`).
    @Test func failoverURL() throws {
        do {
            let manager = try ContextManager(
                configuration: ConnectionConfiguration(
                    "postgresql://app@db1:5432,db2:5432/shop?target_session_attrs=read-write&connect_timeout=2"),
                entities: [User.self, Post.self])
            manager.close()
            Issue.record("connected to db1 or db2")
        } catch let error as PostgresError {
            #expect(error.isConnectionError)
            #expect("\(error)".contains("db1") || "\(error)".contains("db2"), "\(error)")
        }
    }

    @Test func migrator() throws {
        try TestDatabase.withConnection(migrations: false) { connection in
            let migrationsFolder = TestDatabase.repositoryRoot.appendingPathComponent("migrations")
            let migrator = try Migrator(directory: migrationsFolder)   // a folder of NNNN_name.sql files
            if try !migrator.pending(on: connection).isEmpty {   // RHManagedObject's "does require migration"
                try migrator.migrate(on: connection)
            }
            #expect(try migrator.pending(on: connection).isEmpty)
        }
    }

    @Test func throwawayServer() throws {
        let server = try EmbeddedPostgres.start()      // initdb + pg_ctl on a free port on 127.0.0.1
        defer { try? server.stop() }                   // stops it and deletes the folder
        let connection = try Connection(url: server.url)
        defer { connection.close() }
        #expect(try connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
    }
}
