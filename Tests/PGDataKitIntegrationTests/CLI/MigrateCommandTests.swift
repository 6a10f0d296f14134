import Foundation
@testable import PGDataKit
@testable import PGDataKitPostgres
import Testing

@Suite("pgdatakit migrate (the built binary)")
struct MigrateCommandTests {
    @Test func statusThenMigrateThenStatus() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            let before = try CLI.run(["migrate", "--status", "--database-url", url])
            #expect(before.status == 0, "\(before.error)")
            #expect(before.output.contains("create_users_and_posts  pending"))
            #expect(before.output.contains("0 applied, 1 pending"))

            let migrate = try CLI.run(["migrate", "--database-url", url])
            #expect(migrate.status == 0, "\(migrate.error)")
            #expect(migrate.output.contains("Applied 0001_create_users_and_posts.sql"))
            #expect(migrate.output.contains("1 applied, 0 pending"))

            let again = try CLI.run(["migrate"], environment: ["DATABASE_URL": url])
            #expect(again.status == 0, "\(again.error)")
            #expect(again.output.contains("Nothing to apply"))
        }
    }

    @Test func fourProcessesMigratingAtOnceApplyEachFileOnce() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                let files = [
                    "0001_create.sql": "CREATE TABLE counter (n int);",
                    "0002_slow.sql": "SELECT pg_sleep(0.5); INSERT INTO counter VALUES (1);",
                    "0003_unique.sql": "CREATE UNIQUE INDEX counter_n ON counter (n);",
                ]
                for (name, sql) in files {
                    try sql.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
                }
                let processes = try (0..<4).map { _ in
                    try CLI.start(["migrate", "--dir", directory.path, "--database-url", url])
                }
                let outcomes = try processes.map { try $0.wait() }
                for outcome in outcomes {
                    #expect(outcome.status == 0, "\(outcome.error)")
                }
                let appliedLines = outcomes.flatMap { $0.output.split(separator: "\n") }
                    .filter { $0.hasPrefix("Applied ") }
                #expect(appliedLines.count == 3)
                #expect(Set(appliedLines).count == 3)
                let connection = try Connection(configuration)
                defer { connection.close() }
                #expect(try connection.query("SELECT count(*) FROM counter")[0].decode(Int.self, at: 0) == 1)
            }
        }
    }

    /// An uncaught error is printed with its `description`: the bound values of the
    /// failing statement (its `debugDescription`) and the row in the server's detail stay
    /// out of the output. Here the bookkeeping INSERT fails on a CHECK constraint the
    /// table was given beforehand; its parameters hold the file's checksum.
    @Test func anUncaughtErrorPrintsItsDescriptionWithoutBoundValues() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.execute("""
                CREATE TABLE \(Connection.quoteIdentifier(Migrator.tableName)) (
                    version bigint PRIMARY KEY, name text NOT NULL,
                    checksum text NOT NULL CONSTRAINT no_checksums CHECK (checksum = ''),
                    applied_at timestamptz NOT NULL DEFAULT now(),
                    execution_ms double precision NOT NULL DEFAULT 0)
                """)
            try TestDatabase.withTemporaryDirectory { directory in
                let sql = "CREATE TABLE marker (n int);"
                try sql.write(to: directory.appendingPathComponent("0001_marker.sql"), atomically: true, encoding: .utf8)
                let checksum = Migration(version: 1, name: "marker", sql: sql).checksum
                let outcome = try CLI.run(["migrate", "--dir", directory.path, "--database-url", url])
                #expect(outcome.status != 0)
                let printed = outcome.output + outcome.error
                #expect(printed.contains("23514"), "\(printed)")
                #expect(printed.contains("no_checksums") || printed.contains("check constraint"), "\(printed)")
                #expect(!printed.contains(checksum), "\(printed)")
                #expect(!printed.contains(String(checksum.prefix(12))), "\(printed)")
            }
        }
    }

    @Test func changedFileFailsWithStatusOne() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("0001_create.sql")
                try "CREATE TABLE t (n int);".write(to: file, atomically: true, encoding: .utf8)
                #expect(try CLI.run(["migrate", "--dir", directory.path, "--database-url", url]).status == 0)
                try "CREATE TABLE t (n bigint);".write(to: file, atomically: true, encoding: .utf8)
                let outcome = try CLI.run(["migrate", "--dir", directory.path, "--database-url", url])
                #expect(outcome.status == 1)
                #expect(outcome.error.contains("changed after it was applied"))
            }
        }
    }

    @Test func unreachableServerFailsWithAClearMessage() throws {
        let port = try closedPort()
        let outcome = try CLI.run([
            "migrate", "--status", "--database-url", "postgresql://app:hunter2@127.0.0.1:\(port)/app",
        ])
        #expect(outcome.status != 0)
        #expect(outcome.error.contains("connection refused"))
        #expect(outcome.error.contains("127.0.0.1:\(port)/app"))
        #expect(!outcome.error.contains("hunter2"))
    }

    @Test func throwawayServerIsUsedAndRemovedWithoutDatabaseURL() throws {
        // Applying to a server deleted on exit is refused unless asked for.
        let refused = try CLI.run(["migrate"], environment: ["DATABASE_URL": ""])
        #expect(refused.status == 1)
        #expect(refused.error.contains("pass --throwaway"), "\(refused.error)")
        #expect(!refused.error.contains("throwaway PostgreSQL server at"))
        let outcome = try CLI.run(["migrate", "--throwaway"], environment: ["DATABASE_URL": ""])
        #expect(outcome.status == 0, "\(outcome.error)")
        #expect(outcome.error.contains("throwaway PostgreSQL server"))
        #expect(outcome.output.contains("Applied 0001_create_users_and_posts.sql"))
        let port = try #require(
            outcome.error.split(separator: ":").compactMap { Int($0.prefix { $0.isNumber }) }.last)
        // The server is gone: its port refuses connections.
        #expect(throws: PostgresError.self) {
            try Connection(url: "postgresql://postgres@127.0.0.1:\(port)/postgres?connect_timeout=3")
        }
    }

    // MARK: - Generating the next file

    @Test func generateWritesTheModelsDifferenceAsTheNextFile() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                // An empty folder, compared on a throwaway server: the whole schema.
                let first = try CLI.run(
                    ["migrate", "--generate", "create users and posts", "--dir", directory.path],
                    environment: ["DATABASE_URL": ""])
                #expect(first.status == 0, "\(first.error)")
                #expect(first.output.contains("Wrote \(directory.path)/0001_create_users_and_posts.sql"))
                #expect(first.output.contains("+ new table users"))
                let sql = try String(
                    contentsOf: directory.appendingPathComponent("0001_create_users_and_posts.sql"), encoding: .utf8)
                #expect(sql.contains("CREATE TABLE posts ("))
                // Applied to a real database, nothing is left to generate there.
                #expect(try migrate(directory, url).status == 0)
                let again = try CLI.run(["migrate", "--generate", "again", "--dir", directory.path, "--database-url", url])
                #expect(again.status == 0, "\(again.error)")
                #expect(again.output.contains("Nothing to generate"))
                // A database behind the folder is refused: the diff would repeat the file.
                try write(["0002_notes.sql": "CREATE TABLE notes (id bigint);"], to: directory)
                let behind = try CLI.run(["migrate", "--generate", "more", "--dir", directory.path, "--database-url", url])
                #expect(behind.status == 1)
                #expect(behind.error.contains("0002_notes.sql"), "\(behind.error)")
            }
        }
    }

    /// The repository's own folder, applied to a throwaway server, is what the example
    /// model implies: nothing to generate.
    @Test func theRepositorysMigrationsMatchTheExampleModel() throws {
        let outcome = try CLI.run(
            ["migrate", "--generate", "nothing", "--dir", TestDatabase.repositoryRoot.appendingPathComponent("migrations").path],
            environment: ["DATABASE_URL": ""])
        #expect(outcome.status == 0, "\(outcome.error)")
        #expect(outcome.output.contains("Nothing to generate"), "\(outcome.output)")
    }

    // MARK: - Telling the truth

    /// Runs `pgdatakit migrate` with extra arguments on a folder of files.
    private func migrate(_ directory: URL, _ url: String, _ extra: [String] = []) throws -> CLI.Outcome {
        try CLI.run(["migrate", "--dir", directory.path, "--database-url", url] + extra)
    }

    private func write(_ files: [String: String], to directory: URL) throws {
        for (name, sql) in files {
            try sql.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
    }

    /// Whether a table (or the bookkeeping table) exists in the database.
    private func tableExists(_ name: String, _ configuration: ConnectionConfiguration) throws -> Bool {
        let connection = try Connection(configuration)
        defer { connection.close() }
        return try connection.query("SELECT to_regclass($1) IS NOT NULL", [name])[0].decode(Bool.self, at: 0)
    }

    /// A file that ends the migration's transaction itself (`commit;` on line 5) used to be
    /// half-applied and reported as applied; now every pending file is checked first and
    /// nothing runs, not even the good file before it.
    @Test func transactionControlInAFileIsRejectedBeforeAnythingRuns() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                try write(
                    [
                        "0001_good.sql": "CREATE TABLE good (id int);\n",
                        "0002_bad.sql": """
                            CREATE TABLE bad (begin_date date, note text DEFAULT 'BEGIN; COMMIT;');
                            -- COMMIT; in a comment
                            /* END; in a /* nested */ block comment */
                            DO $$ BEGIN PERFORM 1; END $$;
                            commit;
                            CREATE TABLE after_commit (id int);

                            """,
                    ], to: directory)
                let outcome = try migrate(directory, url)
                #expect(outcome.status != 0)
                #expect(outcome.error.contains("0002_bad.sql:5:1"), "\(outcome.error)")
                #expect(outcome.error.lowercased().contains("commit"), "\(outcome.error)")
                #expect(outcome.error.contains("nothing was applied"), "\(outcome.error)")
                #expect(!outcome.output.contains("Applied"), "\(outcome.output)")
                for table in ["good", "bad", "after_commit"] {
                    #expect(!(try tableExists(table, configuration)), "\(table) exists")
                }
                if try tableExists("pgdatakit_migrations", configuration) {
                    let connection = try Connection(configuration)
                    defer { connection.close() }
                    #expect(try connection.query("SELECT count(*) FROM pgdatakit_migrations")[0].decode(Int.self, at: 0) == 0)
                }
            }
        }
    }

    /// The error of a failing statement points at the file, line and column PostgreSQL
    /// reported (counted in characters: the lines before hold multibyte ones).
    @Test func sqlErrorNamesFileLineAndColumn() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                try write(
                    [
                        "0001_typo.sql": """
                            -- Größe: café ✓
                            CREATE TABLE t (id int, label text DEFAULT 'naïve');
                            INSERT INTO t VALUES (1,, 'x');

                            """
                    ], to: directory)
                let outcome = try migrate(directory, url)
                #expect(outcome.status == 1)
                // Line 3, column 25: the second comma of `(1,,`.
                #expect(outcome.error.contains("0001_typo.sql:3:25:"), "\(outcome.error)")
                #expect(outcome.error.contains("syntax error"), "\(outcome.error)")
                #expect(!(try tableExists("t", configuration)))
            }
        }
    }

    /// An applied file that was edited since is reported as CHANGED and not counted as
    /// applied.
    @Test func statusCountsAChangedFileAsChangedNotApplied() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                try write(["0001_a.sql": "CREATE TABLE a (id int);", "0002_b.sql": "CREATE TABLE b (id int);"], to: directory)
                #expect(try migrate(directory, url).status == 0)
                try write(["0002_b.sql": "CREATE TABLE b (id bigint);"], to: directory)
                let status = try migrate(directory, url, ["--status"])
                #expect(status.status == 1)
                #expect(status.output.contains("2        b     CHANGED"), "\(status.output)")
                #expect(status.output.contains("2 migration(s): 1 applied, 0 pending, 1 changed."), "\(status.output)")
                #expect(status.error.contains("0002_b.sql"), "\(status.error)")
            }
        }
    }

    /// A migration recorded as applied whose file is gone is shown and fails the command.
    @Test func statusShowsAMissingFileAndFails() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                try write(["0001_a.sql": "CREATE TABLE a (id int);", "0002_b.sql": "CREATE TABLE b (id int);"], to: directory)
                #expect(try migrate(directory, url).status == 0)
                try FileManager.default.removeItem(at: directory.appendingPathComponent("0002_b.sql"))
                let status = try migrate(directory, url, ["--status"])
                #expect(status.status == 1)
                #expect(status.output.contains("2        b     MISSING"), "\(status.output)")
                #expect(status.output.contains("2 migration(s): 1 applied, 0 pending, 1 missing."), "\(status.output)")
                #expect(status.error.contains("migration 2 (b)"), "\(status.error)")
                #expect(status.error.contains("no file"), "\(status.error)")
            }
        }
    }

    /// A normal run prints its results and nothing else: no library log lines.
    @Test func aSuccessfulMigrateLogsNothing() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                try write(["0001_a.sql": "CREATE TABLE a (id int);"], to: directory)
                let outcome = try migrate(directory, url)
                #expect(outcome.status == 0, "\(outcome.error)")
                #expect(outcome.output.contains("Applied 0001_a.sql"))
                #expect(outcome.error.isEmpty, "standard error: \(outcome.error)")
                let status = try migrate(directory, url, ["--status"])
                #expect(status.status == 0, "\(status.error)")
                #expect(status.error.isEmpty, "standard error: \(status.error)")
            }
        }
    }
}
