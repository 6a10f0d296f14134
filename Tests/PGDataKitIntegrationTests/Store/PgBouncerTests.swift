import Foundation
import Logging
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The production topology of DESIGN.md's contract 10: each worker's pool goes through
/// PgBouncer in transaction mode (PgBouncer 1.18, Debian 12's: no protocol-level prepared
/// statements), each worker's listener keeps one direct session.
@Suite("PgBouncer: pool in transaction mode, direct listener", .heavy)
struct PgBouncerTests {
    static let workers = 8
    static let rounds = 25
    static let shared = 5

    /// 8 worker processes through `default_pool_size` 4, saving at the same time and
    /// updating the same rows: every process's main context ends equal to a fresh fetch,
    /// and every process received every other process's save exactly once.
    @Test(.enabled(if: PgBouncer.isAvailableOrRequired, "pgbouncer is not installed (apt-get install pgbouncer)"))
    func eightProcessesThroughFourServerConnectionsConvergeAndLoseNothing() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let admin = try Connection(configuration)
            defer { admin.close() }
            for index in 0..<Self.shared {
                try admin.execute("INSERT INTO users (user_id, name, age) VALUES ($1, 'seed', 0)", ["shared-\(index)"])
            }
            try PgBouncer.withPgBouncer(server: configuration, poolMode: "transaction", poolSize: 4) { bouncer in
                let direct = try #require(configuration.renderedConnectionString())
                let pooled = bouncer.configuration(for: configuration)
                try TestDatabase.withTemporaryDirectory { folder in
                    let barrier = folder.appendingPathComponent("go")
                    let workers = try (0..<Self.workers).map { worker in
                        try HelperProcess.start(
                            "bouncer-worker", pooled,
                            [direct, "\(worker)", "\(Self.workers)", "\(Self.rounds)", "\(Self.shared)", barrier.path])
                    }
                    defer { workers.forEach { $0.stop() } }
                    for worker in workers {
                        try worker.waitUntil("the worker is ready", timeout: .seconds(60)) { $0.contains("ready") }
                    }
                    // Server sessions of the test database: the listeners' and their
                    // host's relay's (direct) and PgBouncer's (the pools), sampled while
                    // the workers run.
                    func sessions() throws -> (listeners: Int, relays: Int, others: Int) {
                        let row = try admin.query(
                            """
                            SELECT count(*) FILTER (WHERE application_name = $1),
                                   count(*) FILTER (WHERE application_name = $2),
                                   count(*) FILTER (WHERE application_name IS DISTINCT FROM $1
                                                      AND application_name IS DISTINCT FROM $2)
                            FROM pg_stat_activity
                            WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                            """, [ChangeListener.applicationName, ChangeListener.relayApplicationName])[0]
                        return (try row.decode(Int.self, at: 0), try row.decode(Int.self, at: 1), try row.decode(Int.self, at: 2))
                    }
                    let before = try sessions()
                    #expect(before.listeners == Self.workers, "\(before)")
                    // One LISTEN session for the eight processes of this host.
                    #expect(before.relays == 1, "\(before)")
                    _ = FileManager.default.createFile(atPath: barrier.path, contents: Data())
                    var mostServerSessions = before.others
                    let start = ContinuousClock.now
                    while workers.contains(where: { !$0.lines.contains { $0.hasPrefix("result ") } }) {
                        mostServerSessions = max(mostServerSessions, try sessions().others)
                        if start.duration(to: .now) > .seconds(240) {
                            throw TestFailure(
                                "timed out; workers printed:\n"
                                    + workers.map { $0.lines.suffix(5).joined(separator: "\n") }.joined(separator: "\n--\n")
                                    + "\npgbouncer:\n" + bouncer.log.suffix(3000))
                        }
                        usleep(20_000)
                    }
                    #expect(mostServerSessions <= 4, "PgBouncer opened \(mostServerSessions) server sessions")
                    #expect(mostServerSessions >= 1)
                    let expected = (Self.workers - 1) * Self.rounds
                    for (index, worker) in workers.enumerated() {
                        let result = try #require(worker.lines.last { $0.hasPrefix("result ") })
                        #expect(
                            result.hasPrefix(
                                "result received=\(expected) distinct=\(expected) expected=\(expected) mismatches=0 "),
                            "worker \(index): \(worker.lines.suffix(8))")
                    }
                    let users = try admin.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0)
                    #expect(users == Self.shared + Self.workers * Self.rounds)
                    let records = try admin.query("SELECT count(*) FROM pgdatakit_changes")[0].decode(Int.self, at: 0)
                    #expect(records == Self.workers * Self.rounds)
                }
            }
        }
    }

    /// A connection through PgBouncer in transaction mode sees that it is pooled (the
    /// pooler's own process id), prepares nothing by name, and gets the library's
    /// settings in each transaction, on whichever server process runs it.
    @Test(.enabled(if: PgBouncer.isAvailableOrRequired, "pgbouncer is not installed (apt-get install pgbouncer)"))
    func aConnectionThroughATransactionPoolerPreparesNothingAndSetsItsSettingsPerTransaction() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let direct = try Connection(configuration)
            defer { direct.close() }
            #expect(!direct.isBehindPooler)
            #expect(direct.pooling == .session)
            try PgBouncer.withPgBouncer(server: configuration, poolMode: "transaction", poolSize: 2) { bouncer in
                var pooled = bouncer.configuration(for: configuration)
                pooled.lockTimeout = .milliseconds(1234)
                let connection = try Connection(pooled)
                defer { connection.close() }
                #expect(connection.isBehindPooler)
                #expect(connection.pooling == .transaction)
                #expect(connection.preparedStatements.capacity == 0)
                for value in 0..<20 {  // (named statements would collide or vanish here)
                    #expect(try connection.query("SELECT $1::int8", [value])[0].decode(Int.self, at: 0) == value)
                }
                // Both ways a transaction begins: BEGIN on its own, and with the next statement.
                let explicit = try connection.transaction { try $0.query("SHOW lock_timeout")[0].decode(String.self, at: 0) }
                #expect(explicit == "1234ms")
                connection.beginWithNextStatement()
                let pipelined = try connection.query("SHOW lock_timeout")[0].decode(String.self, at: 0)
                try connection.commit()
                #expect(pipelined == "1234ms")
                // The migrator's session lock cannot be held there: refused, nothing done.
                do {
                    try Migrator(migrations: []).migrate(on: connection)
                    Issue.record("expected the pooled connection to be refused")
                } catch let error as MigrationError {
                    guard error.code == .transactionPooledConnection else {
                        Issue.record("unexpected \(error)")
                        return
                    }
                    #expect(error.description.contains("direct connection"))
                }
                // Told to keep session state, it prepares by name again.
                pooled.pooling = .session
                let session = try Connection(pooled)
                defer { session.close() }
                #expect(session.isBehindPooler)
                #expect(session.pooling == .session)
                #expect(session.preparedStatements.capacity == 256)
            }
        }
    }

    /// A listener given PgBouncer's address in transaction mode would be silently dead
    /// (its LISTEN stays in a server process it does not keep). It is found out when it
    /// connects and reported once: an error in the log and `listenerError`.
    @Test(.enabled(if: PgBouncer.isAvailableOrRequired, "pgbouncer is not installed (apt-get install pgbouncer)"))
    func aListenerThroughATransactionPoolerIsReportedOnce() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try PgBouncer.withPgBouncer(server: configuration, poolMode: "transaction", poolSize: 2) { bouncer in
                let pooled = bouncer.configuration(for: configuration)
                let log = RecordingLogHandler()
                let misconfigured = try ContextManager(
                    configuration: pooled, entities: [User.self, Post.self],
                    logger: Logger(label: "misconfigured") { _ in log })
                defer { misconfigured.close() }
                let problem = try #require(misconfigured.coordinator.listenerError)
                #expect(problem == .notificationsNotDelivered(endpoint: pooled.description, waited: .seconds(2)))
                #expect(problem.description.contains("listenerConfiguration"))
                #expect(!problem.description.contains("password"))
                let reports = log.messages.filter { $0.contains("does not receive notifications") }
                #expect(reports.count == 1, "\(log.messages)")

                // The same pool with a direct listener: no problem, remote saves arrive.
                let fixed = try ContextManager(
                    configuration: pooled, listenerConfiguration: configuration, entities: [User.self, Post.self])
                defer { fixed.close() }
                #expect(fixed.coordinator.listenerError == nil)
                let arrived = RecordBox()
                let token = fixed.coordinator.observeRemoteChanges { arrived.set($0.changes.inserted.count) }
                defer { token.cancel() }
                let writer = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
                defer { writer.close() }
                let context = writer.newPrivateContext()
                try context.performAndWait {
                    _ = ExampleSchema.insertUsers(2, in: context)
                    try context.save()
                }
                let start = ContinuousClock.now
                while arrived.value == nil, start.duration(to: .now) < patience { usleep(5_000) }
                #expect(arrived.value == 2)
            }
        }
    }

    /// Through PgBouncer in session mode a listener keeps its server process: the check
    /// passes (the test notification arrives) and nothing is reported.
    @Test(.enabled(if: PgBouncer.isAvailableOrRequired, "pgbouncer is not installed (apt-get install pgbouncer)"))
    func aListenerThroughASessionPoolerPasses() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try PgBouncer.withPgBouncer(server: configuration, poolMode: "session", poolSize: 8) { bouncer in
                let log = RecordingLogHandler()
                let manager = try ContextManager(
                    configuration: configuration, listenerConfiguration: bouncer.configuration(for: configuration),
                    entities: [User.self, Post.self], logger: Logger(label: "session") { _ in log })
                defer { manager.close() }
                #expect(manager.coordinator.listenerError == nil)
                #expect(!log.messages.contains { $0.contains("does not receive notifications") })
                #expect(log.messages.contains { $0.contains("session-mode pooler; notifications arrive") })
            }
        }
    }
}
