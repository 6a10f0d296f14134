import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("pgdatakit import (the built binary)", .heavy)
struct ImportCommandTests {
    /// Writes `count` user records as a JSON array (or JSON lines).
    static func writeUsers(_ count: Int, to file: URL, lines: Bool = false, start: Int = 0) throws {
        let records = (start..<start + count).map { "{\"userID\": \"u\($0)\", \"name\": \"User \($0)\", \"age\": \($0 % 90)}" }
        let text = lines ? records.joined(separator: "\n") + "\n" : "[\n" + records.joined(separator: ",\n") + "\n]\n"
        try text.write(to: file, atomically: true, encoding: .utf8)
    }

    /// Runs `import` against `configuration`'s database.
    static func runImport(_ arguments: [String], database configuration: ConnectionConfiguration) throws -> CLI.Outcome {
        let url = try #require(configuration.renderedConnectionString())
        return try CLI.run(["import"] + arguments, environment: ["DATABASE_URL": url])
    }

    static func summary(_ outcome: CLI.Outcome) throws -> [String: Any] {
        let json = try #require(outcome.output.split(separator: "\n").last(where: { $0.hasPrefix("{") }).map(String.init))
        return try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    }

    /// What shows whether rows were written: each row's xmin (an UPDATE makes a new row
    /// version with a new one) and version, and the change records.
    static func footprint(_ connection: Connection) throws -> (rows: [String], changes: Int) {
        let rows = try connection.query("SELECT user_id || ':' || xmin::text || ':' || version FROM users ORDER BY user_id")
            .map { try $0.decode(String.self, at: 0) }
        let changes = try connection.query("SELECT count(*) FROM pgdatakit_changes")[0].decode(Int.self, at: 0)
        return (rows, changes)
    }

    @Test func importingTheSameFileTwiceChangesNothingTheSecondTime() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try TestDatabase.withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("users.json")
                try Self.writeUsers(10_000, to: file)
                let first = try Self.runImport([file.path, "--entity", "users", "--json"], database: configuration)
                #expect(first.status == 0, "\(first.output)\n\(first.error)")
                let firstSummary = try Self.summary(first)
                #expect(firstSummary["inserted"] as? Int == 10_000)
                #expect(firstSummary["batches"] as? Int == 10)
                #expect(firstSummary["outcome"] as? String == "complete")

                let connection = try Connection(configuration)
                defer { connection.close() }
                let before = try Self.footprint(connection)
                #expect(before.rows.count == 10_000)
                #expect(try connection.query("SELECT name FROM users WHERE user_id = 'u42'")[0].decode(String.self, at: 0) == "User 42")

                let second = try Self.runImport([file.path, "--entity", "users", "--json"], database: configuration)
                #expect(second.status == 0, "\(second.output)\n\(second.error)")
                let secondSummary = try Self.summary(second)
                #expect(secondSummary["unchanged"] as? Int == 10_000)
                #expect(secondSummary["inserted"] as? Int == 0)
                #expect(secondSummary["updated"] as? Int == 0)
                let after = try Self.footprint(connection)
                #expect(after.rows == before.rows, "a row was rewritten (new xmin or version)")
                #expect(after.changes == before.changes, "the second import wrote a change record")
            }
        }
    }

    @Test func jsonLinesWithMapsAndLinksFromFlagsAndAMappingFile() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try TestDatabase.withTemporaryDirectory { directory in
                let users = directory.appendingPathComponent("users.jsonl")
                try "{\"UserID\": \"a\", \"Name\": \"Ann\"}\n\n{\"UserID\": \"b\", \"Name\": \"Bob\"}\n"
                    .write(to: users, atomically: true, encoding: .utf8)
                let usersRun = try Self.runImport(
                    [users.path, "--entity", "users", "--map", "UserID=userID", "--map", "Name=name", "--only-mapped"],
                    database: configuration)
                #expect(usersRun.status == 0, "\(usersRun.output)\n\(usersRun.error)")
                #expect(usersRun.output.contains("2 inserted"))

                let posts = directory.appendingPathComponent("posts.json")
                try """
                    [{"id": "p1", "headline": "Hello", "author": {"id": "a"}},
                     {"id": "p2", "headline": "Again", "author": {"id": "c"}}]
                    """.write(to: posts, atomically: true, encoding: .utf8)
                let mapping = directory.appendingPathComponent("posts-mapping.json")
                try """
                    {"entity": "posts", "maps": {"id": "postID", "headline": "title"}, "links": {"author.id": "user"},
                     "onlyMapped": true}
                    """.write(to: mapping, atomically: true, encoding: .utf8)
                let postsRun = try Self.runImport([posts.path, "--mapping", mapping.path], database: configuration)
                #expect(postsRun.status == 0, "\(postsRun.output)\n\(postsRun.error)")

                let connection = try Connection(configuration)
                defer { connection.close() }
                let linked = try connection.query("""
                    SELECT p.post_id, p.title, u.user_id, u.name FROM posts p JOIN users u ON u.id = p.user_id ORDER BY p.post_id
                    """).map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1)) "
                        + "\(try $0.decode(String.self, at: 2)) \(try $0.decode(String?.self, at: 3) ?? "-")" }
                // "c" did not exist: a stub user carrying only its key.
                #expect(linked == ["p1 Hello a Ann", "p2 Again c -"])
            }
        }
    }

    @Test func badDataStopsAtItsBatchAndNamesTheLine() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try TestDatabase.withTemporaryDirectory { directory in
                // Not JSON on line 2101: batches 0 and 1 stay saved, batch 2 is rolled back.
                var lines = (0..<2_500).map { "{\"userID\": \"x\($0)\"}" }
                lines[2_100] = "{\"userID\": \"x2100\""
                let broken = directory.appendingPathComponent("broken.jsonl")
                try (lines.joined(separator: "\n") + "\n").write(to: broken, atomically: true, encoding: .utf8)
                let outcome = try Self.runImport([broken.path, "--entity", "users", "--json"], database: configuration)
                #expect(outcome.status == 65)
                #expect(outcome.error.contains("broken.jsonl:2101: record 2100: not valid JSON"), "\(outcome.error)")
                #expect(try Self.summary(outcome)["records"] as? Int == 2_000)

                // A value of the wrong type in the second batch.
                lines = (0..<1_500).map { "{\"userID\": \"y\($0)\", \"age\": \($0)}" }
                lines[1_200] = "{\"userID\": \"y1200\", \"age\": \"secret-value\"}"
                let mismatch = directory.appendingPathComponent("mismatch.jsonl")
                try (lines.joined(separator: "\n") + "\n").write(to: mismatch, atomically: true, encoding: .utf8)
                let typed = try Self.runImport([mismatch.path, "--entity", "users"], database: configuration)
                #expect(typed.status == 65)
                #expect(typed.error.contains("mismatch.jsonl:1201: record 1200: \"age\" is a string"), "\(typed.error)")
                #expect(!typed.error.contains("secret-value") && !typed.output.contains("secret-value"))

                // An array element that is not an object.
                let notObject = directory.appendingPathComponent("numbers.json")
                try "[{\"userID\": \"z1\"},\n 3]".write(to: notObject, atomically: true, encoding: .utf8)
                let numbers = try Self.runImport([notObject.path, "--entity", "users"], database: configuration)
                #expect(numbers.status == 65)
                #expect(numbers.error.contains("numbers.json:2: record 1: not a JSON object"), "\(numbers.error)")

                let connection = try Connection(configuration)
                defer { connection.close() }
                let stored = try connection.query("""
                    SELECT count(*) FILTER (WHERE user_id LIKE 'x%'), count(*) FILTER (WHERE user_id LIKE 'y%'),
                           count(*) FILTER (WHERE user_id LIKE 'z%') FROM users
                    """)[0]
                #expect(try stored.decode(Int.self, at: 0) == 2_000)
                #expect(try stored.decode(Int.self, at: 1) == 1_000)
                #expect(try stored.decode(Int.self, at: 2) == 0)
            }
        }
    }

    @Test func badOptionsAndFilesHaveTheirExitStatus() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try TestDatabase.withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("users.json")
                try Self.writeUsers(10, to: file)
                let unknownAttribute = try Self.runImport(
                    [file.path, "--entity", "users", "--map", "id=nickname"], database: configuration)
                #expect(unknownAttribute.status == 64)
                #expect(unknownAttribute.error.contains("User has no attribute or relationship named \"nickname\""))
                #expect(try Self.runImport([file.path, "--entity", "comments"], database: configuration).status == 64)
                #expect(try Self.runImport([file.path], database: configuration).status == 64)
                #expect(try Self.runImport([file.path, "--entity", "users", "--batch-size", "0"], database: configuration).status == 64)
                #expect(try Self.runImport([file.path, "--entity", "users", "--map", "id"], database: configuration).status == 64)
                #expect(try Self.runImport([file.path, "--entity", "users", "--link", "x=posts"], database: configuration).status == 64)

                let mapping = directory.appendingPathComponent("mapping.json")
                try "{\"maps\": {\"id\": \"userID\"}, \"onlyMaped\": true}".write(to: mapping, atomically: true, encoding: .utf8)
                let misspelt = try Self.runImport([file.path, "--entity", "users", "--mapping", mapping.path], database: configuration)
                #expect(misspelt.status == 64)
                #expect(misspelt.error.contains("unknown member \"onlyMaped\""))

                let missing = try Self.runImport([directory.appendingPathComponent("none.json").path, "--entity", "users"], database: configuration)
                #expect(missing.status == 66)
                let text = directory.appendingPathComponent("notes.txt")
                try "hello".write(to: text, atomically: true, encoding: .utf8)
                #expect(try Self.runImport([text.path, "--entity", "users"], database: configuration).status == 65)

                // A database without the example schema.
                try TestDatabase.withFreshDatabase(migrations: false) { empty in
                    let outcome = try Self.runImport([file.path, "--entity", "users"], database: empty)
                    #expect(outcome.status == 1)
                    #expect(outcome.error.contains("pgdatakit migrate"), "\(outcome.error)")
                }
            }
        }
    }

    /// SIGINT between batches: exit 130, whole batches only, the summary counts them.
    @Test func interruptingRollsBackTheBatchInProgress() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try TestDatabase.withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("many.jsonl")
                try Self.writeUsers(400_000, to: file, lines: true)
                let url = try #require(configuration.renderedConnectionString())
                let running = try CLI.start(
                    ["import", file.path, "--entity", "users", "--batch-size", "700", "--json"],
                    environment: ["DATABASE_URL": url])
                let connection = try Connection(configuration)
                defer { connection.close() }
                let deadline = Date().addingTimeInterval(120)
                while try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) < 2_100, Date() < deadline {
                    Thread.sleep(forTimeInterval: 0.05)
                }
                kill(running.pid, SIGINT)
                let outcome = try running.wait()
                #expect(outcome.status == 130, "\(outcome.output)\n\(outcome.error)")
                let summary = try Self.summary(outcome)
                #expect(summary["outcome"] as? String == "interrupted")
                let stored = try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0)
                #expect(stored % 700 == 0, "a half batch was saved: \(stored) rows")
                #expect(stored == summary["records"] as? Int)
                #expect(stored < 400_000)
            }
        }
    }

    /// Without DATABASE_URL the throwaway server is stopped and removed, also on SIGINT.
    @Test func interruptingLeavesNoThrowawayServerBehind() throws {
        try TestDatabase.withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("many.jsonl")
            try Self.writeUsers(400_000, to: file, lines: true)
            let running = try CLI.start(["import", file.path, "--entity", "users"])
            var interrupted = false
            defer {
                // A requirement that failed before the interrupt: leave no import (and no
                // server) running into the tests after this one.
                if !interrupted {
                    kill(running.pid, SIGINT)
                    _ = try? running.wait()
                }
            }
            let deadline = Date().addingTimeInterval(120)
            var progress = ""
            while !progress.contains("records saved"), Date() < deadline {
                Thread.sleep(forTimeInterval: 0.1)
                progress = (try? String(contentsOfFile: running.errorPath, encoding: .utf8)) ?? ""
            }
            let url = try #require(progress.firstMatch(of: /server at (\S+)/).map { String($0.1) })
            let port = try #require(url.firstMatch(of: /:(\d+)\//).map { String($0.1) })
            let dataDirectory = try #require(try ProcessTable.postgresDataDirectory(port: port))
            kill(running.pid, SIGINT)
            interrupted = true
            let outcome = try running.wait()
            #expect(outcome.status == 130, "\(outcome.output)\n\(outcome.error)")
            #expect(throws: PostgresError.self) { try Connection(url: url).close() }
            #expect(!FileManager.default.fileExists(atPath: dataDirectory), "the server's folder is still there")
        }
    }

    /// On a terminal (a pseudo-terminal from `script`) progress is a bar with the rate
    /// and the time left, redrawn in place.
    @Test func aTerminalShowsAProgressBar() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try TestDatabase.withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("users.jsonl")
                try Self.writeUsers(30_000, to: file, lines: true)
                let url = try #require(configuration.renderedConnectionString())
                let output = try PseudoTerminal.run(
                    try CLI.executable.path, ["import", file.path, "--entity", "users", "--batch-size", "500"],
                    environment: ["DATABASE_URL": url])
                #expect(output.status == 0, "\(output.text)")
                #expect(output.text.contains("\r["))
                #expect(output.text.contains("records/s  ETA"))
                #expect(output.text.contains("] 100%  30000 records"))
                #expect(output.text.contains("users: 30000 records in 60 batches: 30000 inserted"))
            }
        }
    }
}
