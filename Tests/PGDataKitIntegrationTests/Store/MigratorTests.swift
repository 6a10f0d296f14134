import Foundation
@testable import PGDataKit
@testable import PGDataKitPostgres
import Testing

@Suite("Migrator")
struct MigratorTests {
    static let createWidgets = Migration(
        version: 1, name: "create_widgets", sql: "CREATE TABLE widgets (id int PRIMARY KEY, name text);")
    static let addColour = Migration(
        version: 2, name: "add_colour",
        sql: "ALTER TABLE widgets ADD COLUMN colour text;\nINSERT INTO widgets VALUES (1, 'first', 'red');")

    @Test func freshApplyThenReRunIsANoOp() throws {
        try TestDatabase.withConnection { connection in
            let migrator = try Migrator(migrations: [Self.addColour, Self.createWidgets])
            #expect(try migrator.pending(on: connection).map(\.version) == [1, 2])
            let applied = try migrator.migrate(on: connection)
            #expect(applied.map(\.version) == [1, 2])
            #expect(try migrator.pending(on: connection).isEmpty)
            #expect(try connection.query("SELECT colour FROM widgets")[0].decode(String.self, at: 0) == "red")
            let statuses = try migrator.status(on: connection)
            #expect(statuses.count == 2)
            for status in statuses {
                guard case .applied = status.state else {
                    Issue.record("\(status) should be applied")
                    continue
                }
            }
            let records = try connection.query(
                "SELECT version, name, checksum FROM pgdatakit_migrations ORDER BY version")
            #expect(try records.map { try $0.decode(String.self, named: "name") } == ["create_widgets", "add_colour"])
            #expect(try records[0].decode(String.self, named: "checksum") == Self.createWidgets.checksum)

            // Again: nothing to do, nothing re-run (the INSERT would fail on its key).
            #expect(try migrator.migrate(on: connection).isEmpty)
            #expect(try connection.query("SELECT count(*) FROM widgets")[0].decode(Int.self, at: 0) == 1)
        }
    }

    @Test func upToStopsAtAVersion() throws {
        try TestDatabase.withConnection { connection in
            let migrator = try Migrator(migrations: [Self.createWidgets, Self.addColour])
            #expect(try migrator.migrate(on: connection, upTo: 1).map(\.version) == [1])
            #expect(try migrator.pending(on: connection).map(\.version) == [2])
        }
    }

    @Test func changedChecksumIsAnError() throws {
        try TestDatabase.withConnection { connection in
            try Migrator(migrations: [Self.createWidgets]).migrate(on: connection)
            var edited = Self.createWidgets
            edited.sql += "\n-- edited afterwards"
            let migrator = try Migrator(migrations: [edited, Self.addColour])
            do {
                try migrator.migrate(on: connection)
                Issue.record("expected a checksum mismatch")
            } catch let error as MigrationError {
                guard error.code == .checksumMismatch else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(error.version == 1)
                #expect(error.name == "create_widgets")
                #expect(error.description.contains("changed after it was applied"))
            }
            // Nothing else was applied.
            #expect(try migrator.pending(on: connection).map(\.version) == [2])
            let status = try migrator.status(on: connection)
            #expect(status.first?.state == .changed(recorded: Self.createWidgets.checksum, current: edited.checksum))
        }
    }

    /// A file that names the checksum of the text a database applied counts as applied
    /// there: `migrate` records the new checksum and runs nothing; a checksum it does not
    /// name is still a mismatch.
    @Test func aReplacedChecksumIsAcceptedAndRecorded() throws {
        try TestDatabase.withConnection { connection in
            try Migrator(migrations: [Self.createWidgets]).migrate(on: connection)
            var rewritten = Self.createWidgets
            rewritten.sql = "-- pgdatakit: replaces-checksum \(Self.createWidgets.checksum) (reformatted)\n"
                + "CREATE TABLE widgets (\n    id int PRIMARY KEY,\n    name text\n);"
            #expect(rewritten.replacedChecksums == [Self.createWidgets.checksum])
            let migrator = try Migrator(migrations: [rewritten])
            guard case .applied? = try migrator.status(on: connection).first?.state else {
                Issue.record("the rewritten file should count as applied")
                return
            }
            // Nothing runs (the CREATE TABLE would fail on the existing table).
            #expect(try migrator.migrate(on: connection).isEmpty)
            let recorded = try connection.query("SELECT checksum FROM pgdatakit_migrations WHERE version = 1")[0]
            #expect(try recorded.decode(String.self, at: 0) == rewritten.checksum)

            var unrelated = rewritten
            unrelated.sql = "-- pgdatakit: replaces-checksum \(String(repeating: "0", count: 64))\n" + Self.createWidgets.sql
            #expect(throws: MigrationError.self) { try Migrator(migrations: [unrelated]).migrate(on: connection) }
        }
    }

    /// Migration 0001 as it was written by hand, before the generator (and applied so by
    /// databases of that time).
    static let handWritten0001 = """
        -- The example dataset of the README, the demo and the tests: users with a unique remote
        -- id, and their posts (the SQKDataKit README example). Every table has a version column
        -- for optimistic locking.

        CREATE TABLE users (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            user_id text NOT NULL,
            name text,
            age integer,
            version bigint NOT NULL DEFAULT 1,
            CONSTRAINT users_user_id_key UNIQUE (user_id)
        );

        CREATE TABLE posts (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            post_id text NOT NULL,
            title text,
            user_id bigint REFERENCES users (id) ON DELETE SET NULL,
            version bigint NOT NULL DEFAULT 1,
            CONSTRAINT posts_post_id_key UNIQUE (post_id)
        );

        CREATE INDEX posts_user_id_idx ON posts (user_id);
        """

    /// The example migration is the generator's output (`pgdatakit schema`) plus the line
    /// naming the hand-written text it replaces; a database that applied that text
    /// migrates on with the folder, running nothing.
    @Test func theExampleMigrationIsGeneratedAndReplacesTheHandWrittenOne() throws {
        let file = TestDatabase.repositoryRoot.appendingPathComponent("migrations/0001_create_users_and_posts.sql")
        let committed = try String(contentsOf: file, encoding: .utf8)
        let generated = try CLI.run(["schema"])
        #expect(generated.status == 0)
        let withoutDirectives = committed.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("-- pgdatakit: ") }.joined(separator: "\n")
        #expect(withoutDirectives == generated.output)
        let old = Migration(version: 1, name: "create_users_and_posts", sql: Self.handWritten0001 + "\n")
        #expect(old.checksum == "a6c64f6370fe483f8b42e263f4bc9f4992a0c47275ec4db7db77c36d0e5386d3")
        try TestDatabase.withConnection { connection in
            try Migrator(migrations: [old]).migrate(on: connection)
            let folder = try Migrator(directory: TestDatabase.repositoryRoot.appendingPathComponent("migrations"))
            #expect(try folder.migrate(on: connection).isEmpty)
            #expect(try folder.pending(on: connection).isEmpty)
        }
    }

    @Test func failingMigrationIsRolledBackWhole() throws {
        try TestDatabase.withConnection { connection in
            let broken = Migration(
                version: 2, name: "broken", sql: "CREATE TABLE half_done (id int);\nSELECT * FROM nowhere;")
            let migrator = try Migrator(migrations: [Self.createWidgets, broken])
            do {
                try migrator.migrate(on: connection)
                Issue.record("expected a failure")
            } catch let error as MigrationError {
                guard error.code == .migrationFailed else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(error.version == 2)
                #expect(error.underlying?.sqlState == .undefinedTable)
                // PostgreSQL's error position, as line and column of the file.
                #expect(error.description.hasPrefix("0002_broken.sql:2:15: "), "\(error)")
            }
            #expect(try migrator.pending(on: connection).map(\.version) == [2])
            let halfDone = try connection.query("SELECT to_regclass('half_done') IS NULL")[0]
            #expect(try halfDone.decode(Bool.self, at: 0))
            // The advisory lock was released: another session can migrate.
            let other = try Connection(connection.configuration)
            defer { other.close() }
            #expect(try other.query("SELECT pg_try_advisory_lock($1)", [Migrator.advisoryLockKey])[0].decode(Bool.self, at: 0))
        }
    }

    /// A `COMMIT` inside a file used to end the migration's transaction: what came
    /// before it stayed applied although the error said "rolled back". Now no pending
    /// migration runs when any of them controls its own transaction.
    @Test func transactionControlIsRejectedBeforeAnyMigrationRuns() throws {
        try TestDatabase.withConnection { connection in
            let sneaky = Migration(
                version: 2, name: "sneaky",
                sql: "CREATE TABLE half (id int);\n  COMMIT;\nSELECT * FROM nowhere;")
            let migrator = try Migrator(migrations: [Self.createWidgets, sneaky])
            do {
                try migrator.migrate(on: connection)
                Issue.record("expected an error")
            } catch let error as MigrationError {
                #expect(error.description.hasPrefix("0002_sneaky.sql:2:3: "), "\(error)")
                #expect(error.description.contains("COMMIT"), "\(error)")
            }
            for table in ["half", "widgets"] {
                let missing = try connection.query("SELECT to_regclass($1) IS NULL", [table])[0]
                #expect(try missing.decode(Bool.self, at: 0), "\(table) was created")
            }
            #expect(try migrator.pending(on: connection).map(\.version) == [1, 2])
        }
    }

    @Test func fourConcurrentMigratorsApplyEachMigrationOnce() throws {
        try TestDatabase.withFreshDatabase { configuration in
            // Not idempotent: a second application of any of these fails.
            let migrations = [
                Migration(version: 1, name: "create", sql: "CREATE TABLE counter (n int);"),
                Migration(version: 2, name: "slow", sql: "SELECT pg_sleep(0.3); INSERT INTO counter VALUES (1);"),
                Migration(version: 3, name: "index", sql: "CREATE UNIQUE INDEX counter_n ON counter (n);"),
            ]
            let migrator = try Migrator(migrations: migrations)
            let applied = Counter()
            try onThreads(4) { _ in
                let connection = try Connection(configuration)
                defer { connection.close() }
                applied.add(try migrator.migrate(on: connection).count)
            }
            #expect(applied.value == 3)
            let connection = try Connection(configuration)
            defer { connection.close() }
            #expect(try connection.query("SELECT count(*) FROM counter")[0].decode(Int.self, at: 0) == 1)
            #expect(try connection.query("SELECT count(*) FROM pgdatakit_migrations")[0].decode(Int.self, at: 0) == 3)
        }
    }

    @Test func readsNumberedFilesAndRejectsMisnamedOnes() throws {
        try TestDatabase.withTemporaryDirectory { directory in
            try "CREATE TABLE b ();".write(to: directory.appendingPathComponent("0002_second.sql"), atomically: true, encoding: .utf8)
            try "CREATE TABLE a ();".write(to: directory.appendingPathComponent("0001_first.sql"), atomically: true, encoding: .utf8)
            try "notes".write(to: directory.appendingPathComponent("README.md"), atomically: true, encoding: .utf8)
            let migrator = try Migrator(directory: directory)
            #expect(migrator.migrations.map(\.fileName) == ["0001_first.sql", "0002_second.sql"])

            try "".write(to: directory.appendingPathComponent("1_first-again.sql"), atomically: true, encoding: .utf8)
            #expect(throws: MigrationError.self) { try Migrator(directory: directory) }
            try FileManager.default.removeItem(at: directory.appendingPathComponent("1_first-again.sql"))

            try "".write(to: directory.appendingPathComponent("three.sql"), atomically: true, encoding: .utf8)
            do {
                _ = try Migrator(directory: directory)
                Issue.record("expected a bad file name error")
            } catch let error as MigrationError {
                #expect(error.description.contains("three.sql"))
            }
        }
        #expect(throws: MigrationError.self) {
            try Migrator(directory: URL(fileURLWithPath: "/nonexistent/migrations"))
        }
    }

    @Test func theExampleSchemaApplies() throws {
        try TestDatabase.withConnection(migrations: true) { connection in
            let columns = try connection.query(
                """
                SELECT table_name, column_name FROM information_schema.columns
                WHERE table_schema = 'public' AND column_name = 'version' AND table_name IN ('users', 'posts')
                ORDER BY table_name
                """)
            #expect(try columns.map { try $0.decode(String.self, at: 0) } == ["posts", "users"])
            try connection.execute("INSERT INTO users (user_id, name, age) VALUES ('u1', 'Ada', 36)")
            #expect(throws: PostgresError.self) {
                try connection.execute("INSERT INTO users (user_id) VALUES ('u1')")
            }
        }
    }
}

/// A thread-safe running total.
final class Counter: @unchecked Sendable {
    // Safe: `total` is only touched under `lock`.
    private let lock = NSLock()
    private var total = 0

    func add(_ amount: Int) {
        lock.lock()
        total += amount
        lock.unlock()
    }

    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return total
    }
}
