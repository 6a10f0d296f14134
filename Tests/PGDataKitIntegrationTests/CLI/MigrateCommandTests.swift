import Foundation
@testable import PGDataKit
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
        let outcome = try CLI.run(["migrate"])
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
}
