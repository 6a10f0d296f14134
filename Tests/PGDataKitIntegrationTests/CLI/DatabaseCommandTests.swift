import Foundation
import Testing

@testable import PGDataKit

#if canImport(Glibc)
    import Glibc
#endif

@Suite("pgdatakit db (the built binary)")
struct DatabaseCommandTests {
    @Test func dbStartURLStop() throws {
        try DBState.with { state in
            let start = try CLI.run(["db", "start"], environment: state.environment)
            #expect(start.status == 0, "\(start.error)")
            let exported = start.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(exported.hasPrefix("export DATABASE_URL='postgresql://"))
            let url = try CLI.run(["db", "url"], environment: state.environment)
            #expect(url.status == 0)
            let serverURL = url.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(exported.contains(serverURL))
            // Still running after `db start` exited.
            #expect(try DBState.answers(serverURL))
            let stop = try CLI.run(["db", "stop"], environment: state.environment)
            #expect(stop.status == 0, "\(stop.error)")
            #expect(try CLI.run(["db", "url"], environment: state.environment).status == 1)
            #expect(!(try DBState.answers(serverURL)))
        }
    }

    /// The `db` server outlives the command that started it, so it keeps PostgreSQL's
    /// durable defaults (the per-command throwaway server turns them off for speed).
    @Test func dbServerSyncsToDisk() throws {
        try DBState.with { state in
            let start = try CLI.run(["db", "start"], environment: state.environment)
            #expect(start.status == 0, "\(start.error)")
            let connection = try Connection(url: try state.currentURL())
            defer { connection.close() }
            for setting in ["fsync", "synchronous_commit", "full_page_writes"] {
                let value = try connection.query("SHOW \(setting)")[0].decode(String.self, at: 0)
                #expect(value == "on", "\(setting) = \(value)")
            }
        }
    }

    /// A server killed behind the CLI's back (SIGKILL to the postmaster) is noticed:
    /// `db url` and `db start` replace it with a live one instead of printing the dead
    /// one's URL, and `db stop` removes a dead one without failing.
    @Test func killedServerIsReplacedNotReported() throws {
        try DBState.with { state in
            let start = try CLI.run(["db", "start"], environment: state.environment)
            #expect(start.status == 0, "\(start.error)")
            let firstDirectory = try state.serverDirectory()
            let firstURL = try state.currentURL()
            try DBState.kill(serverIn: firstDirectory, url: firstURL)

            // `db url`: a live server, not the dead one.
            let url = try CLI.run(["db", "url"], environment: state.environment)
            #expect(url.status == 0, "\(url.error)")
            let secondURL = url.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try DBState.answers(secondURL), "db url printed \(secondURL), which does not answer")
            #expect(url.error.contains("had stopped"), "\(url.error)")
            let secondDirectory = try state.serverDirectory()
            #expect(secondDirectory != firstDirectory)
            #expect(!FileManager.default.fileExists(atPath: firstDirectory.path), "the dead server's files were kept")

            // `db start` while it runs: reports that same live server.
            let again = try CLI.run(["db", "start"], environment: state.environment)
            #expect(again.status == 0, "\(again.error)")
            #expect(again.output.contains(secondURL))
            #expect(again.error.contains("already running"))

            // `db start` after another kill: a new live server.
            try DBState.kill(serverIn: secondDirectory, url: secondURL)
            let restart = try CLI.run(["db", "start"], environment: state.environment)
            #expect(restart.status == 0, "\(restart.error)")
            let exported = restart.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let thirdURL = String(exported.dropFirst("export DATABASE_URL='".count).dropLast())
            #expect(exported.hasPrefix("export DATABASE_URL='postgresql://"))
            #expect(try DBState.answers(thirdURL), "db start printed \(exported), which does not answer")
            #expect(!restart.error.contains("already running"), "\(restart.error)")
            #expect(try state.serverDirectory() != secondDirectory)

            // `db stop` after a kill: succeeds and removes the files.
            let thirdDirectory = try state.serverDirectory()
            try DBState.kill(serverIn: thirdDirectory, url: thirdURL)
            let stop = try CLI.run(["db", "stop"], environment: state.environment)
            #expect(stop.status == 0, "\(stop.error)")
            #expect(!FileManager.default.fileExists(atPath: thirdDirectory.path))
            #expect(try CLI.run(["db", "url"], environment: state.environment).status == 1)
        }
    }
}

/// A state folder of its own for `pgdatakit db`, so tests do not share a server; the
/// server is stopped and its files removed afterwards even when the test fails.
struct DBState {
    let folder: URL

    var environment: [String: String] { ["PGDATAKIT_STATE_DIR": folder.path] }

    /// The file in which `pgdatakit db start` records the server's folder.
    var stateFile: URL { folder.appendingPathComponent("pgdatakit-db-\(getuid()).path") }

    static func with(_ body: (DBState) throws -> Void) throws {
        try TestDatabase.withTemporaryDirectory { folder in
            let state = DBState(folder: folder)
            defer { state.cleanUp() }
            try body(state)
        }
    }

    /// The folder of the server the state file points at.
    func serverDirectory() throws -> URL {
        let path = try String(contentsOf: stateFile, encoding: .utf8)
        return URL(fileURLWithPath: path.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The URL `pgdatakit db url` prints now.
    func currentURL() throws -> String {
        let outcome = try CLI.run(["db", "url"], environment: environment)
        guard outcome.status == 0 else { throw TestFailure("db url failed: \(outcome.error)") }
        return outcome.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops whatever server is left, the hard way if `db stop` fails.
    func cleanUp() {
        let directory = try? serverDirectory()
        let stop = try? CLI.run(["db", "stop"], environment: environment)
        if stop?.status != 0, let directory {
            if let pid = DBState.postmasterPID(in: directory) { Glibc.kill(pid, SIGKILL) }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// The postmaster's process id from `data/postmaster.pid`.
    static func postmasterPID(in directory: URL) -> pid_t? {
        let file = directory.appendingPathComponent("data/postmaster.pid")
        guard let text = try? String(contentsOf: file, encoding: .utf8),
            let line = text.split(separator: "\n").first
        else { return nil }
        return pid_t(line.trimmingCharacters(in: .whitespaces))
    }

    /// Kills the postmaster with SIGKILL, as an out-of-memory killer or a careless
    /// `kill -9` would, and waits until the server no longer answers.
    static func kill(serverIn directory: URL, url: String) throws {
        guard let pid = postmasterPID(in: directory) else {
            throw TestFailure("no postmaster.pid in \(directory.path)")
        }
        guard Glibc.kill(pid, SIGKILL) == 0 else {
            throw TestFailure("kill \(pid): \(String(cString: strerror(errno)))")
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while try answers(url) {
            guard ContinuousClock.now < deadline else { throw TestFailure("server \(url) survived SIGKILL") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// The rows of the `kept` table at `url`.
    static func notes(at url: String) throws -> [String] {
        let connection = try Connection(url: url)
        defer { connection.close() }
        return try connection.query("SELECT note FROM kept ORDER BY note").map { try $0.decode(String.self, at: 0) }
    }

    /// Whether a server answers `SELECT 1` at `url`.
    static func answers(_ url: String) throws -> Bool {
        let connection: Connection
        do {
            connection = try Connection(url: url + "?connect_timeout=3")
        } catch let error as PostgresError where error.kind == .connectionFailed {
            return false
        }
        defer { connection.close() }
        return try connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1
    }
}
