import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

#if canImport(Glibc)
    import Glibc
#endif

@Suite("pgdatakit db (the built binary)", .heavy)
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

    /// The issue 25 scenario: a row committed on the `db` server survives a `kill -9` of
    /// its postmaster. `db url` restarts the server on its own data directory (PostgreSQL
    /// replays its write-ahead log) on the same port, says so, and the row is there.
    @Test func killedServerKeepsItsData() throws {
        try DBState.with { state in
            let start = try CLI.run(["db", "start"], environment: state.environment)
            #expect(start.status == 0, "\(start.error)")
            let directory = try state.serverDirectory()
            let url = try state.currentURL()
            let connection = try Connection(url: url)
            try connection.execute("CREATE TABLE kept (note text)")
            try connection.execute("INSERT INTO kept VALUES ('still here')")
            connection.close()
            try DBState.kill(serverIn: directory, url: url)

            let after = try CLI.run(["db", "url"], environment: state.environment)
            #expect(after.status == 0, "\(after.error)")
            let recoveredURL = after.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(recoveredURL == url, "the port was free, so the URL should not change")
            #expect(after.error.contains("restarted"), "\(after.error)")
            #expect(!after.error.contains("lost"), "\(after.error)")
            #expect(try state.serverDirectory() == directory)
            #expect(try DBState.notes(at: recoveredURL) == ["still here"])
        }
    }

    /// A server that cannot start again (here `global/pg_control` is gone) is not deleted:
    /// `db start` moves its folder aside, names it on standard error, and starts a new,
    /// empty server.
    @Test func damagedServerIsMovedAsideNotDeleted() throws {
        try DBState.with { state in
            let start = try CLI.run(["db", "start"], environment: state.environment)
            #expect(start.status == 0, "\(start.error)")
            let directory = try state.serverDirectory()
            let url = try state.currentURL()
            let connection = try Connection(url: url)
            try connection.execute("CREATE TABLE kept (note text)")
            try connection.execute("INSERT INTO kept VALUES ('still here')")
            connection.close()
            try DBState.kill(serverIn: directory, url: url)
            try FileManager.default.removeItem(at: directory.appendingPathComponent("data/global/pg_control"))

            let restart = try CLI.run(["db", "start"], environment: state.environment)
            let setAside = DBState.foldersSetAside(from: directory)
            #expect(restart.status == 0, "\(restart.error)")
            #expect(setAside.count == 1, "\(setAside.map(\.path))")
            if let folder = setAside.first {
                #expect(restart.error.contains(folder.path), "\(restart.error)")
                #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("data/base").path))
                #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("server.log").path))
            }
            #expect(!FileManager.default.fileExists(atPath: directory.path))
            #expect(try state.serverDirectory() != directory)
            let exported = restart.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let newURL = String(exported.dropFirst("export DATABASE_URL='".count).dropLast())
            #expect(try DBState.answers(newURL), "db start printed \(exported), which does not answer")
            #expect(throws: PostgresError.self) { try DBState.notes(at: newURL) }
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
    /// `db url` and `db start` restart it on its data instead of printing the dead one's
    /// URL, and `db stop` removes a dead one without failing.
    @Test func killedServerIsRestartedNotReported() throws {
        try DBState.with { state in
            let start = try CLI.run(["db", "start"], environment: state.environment)
            #expect(start.status == 0, "\(start.error)")
            let directory = try state.serverDirectory()
            let firstURL = try state.currentURL()
            try DBState.kill(serverIn: directory, url: firstURL)

            // `db url`: a live server, the same one, not the dead one's stale answer.
            let url = try CLI.run(["db", "url"], environment: state.environment)
            #expect(url.status == 0, "\(url.error)")
            let secondURL = url.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try DBState.answers(secondURL), "db url printed \(secondURL), which does not answer")
            #expect(url.error.contains("had stopped"), "\(url.error)")
            #expect(try state.serverDirectory() == directory)

            // `db start` while it runs: reports that same live server.
            let again = try CLI.run(["db", "start"], environment: state.environment)
            #expect(again.status == 0, "\(again.error)")
            #expect(again.output.contains(secondURL))
            #expect(again.error.contains("already running"))

            // `db start` after another kill: the server restarted, not "already running".
            try DBState.kill(serverIn: directory, url: secondURL)
            let restart = try CLI.run(["db", "start"], environment: state.environment)
            #expect(restart.status == 0, "\(restart.error)")
            let exported = restart.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let thirdURL = String(exported.dropFirst("export DATABASE_URL='".count).dropLast())
            #expect(exported.hasPrefix("export DATABASE_URL='postgresql://"))
            #expect(try DBState.answers(thirdURL), "db start printed \(exported), which does not answer")
            #expect(restart.error.contains("restarted"), "\(restart.error)")
            #expect(!restart.error.contains("already running"), "\(restart.error)")
            #expect(try state.serverDirectory() == directory)

            // `db stop` after a kill: succeeds and removes the files.
            try DBState.kill(serverIn: directory, url: thirdURL)
            let stop = try CLI.run(["db", "stop"], environment: state.environment)
            #expect(stop.status == 0, "\(stop.error)")
            #expect(!FileManager.default.fileExists(atPath: directory.path))
            #expect(try CLI.run(["db", "url"], environment: state.environment).status == 1)
        }
    }

    /// When another program took the dead server's port, the server restarts on a free
    /// one with its data, and the message says the URL changed.
    @Test func killedServerWhosePortWasTakenRestartsElsewhere() throws {
        try DBState.with { state in
            let start = try CLI.run(["db", "start"], environment: state.environment)
            #expect(start.status == 0, "\(start.error)")
            let directory = try state.serverDirectory()
            let url = try state.currentURL()
            let connection = try Connection(url: url)
            try connection.execute("CREATE TABLE kept (note text)")
            try connection.execute("INSERT INTO kept VALUES ('still here')")
            connection.close()
            try DBState.kill(serverIn: directory, url: url)
            guard let port = URLComponents(string: url)?.port else { throw TestFailure("no port in \(url)") }
            let squatter = try DBState.listen(onPort: port)
            defer { close(squatter) }

            let after = try CLI.run(["db", "url"], environment: state.environment)
            #expect(after.status == 0, "\(after.error)")
            let movedURL = after.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(movedURL != url)
            #expect(after.error.contains("URL changed"), "\(after.error)")
            #expect(try state.serverDirectory() == directory)
            #expect(try DBState.notes(at: movedURL) == ["still here"])
        }
    }
}

/// A state folder of its own for `pgdatakit db`, so tests do not share a server; the
/// server is stopped and its files removed afterwards even when the test fails. The
/// server's folder (and any folder set aside) is created in the state folder too
/// (`TMPDIR`), so removing that folder removes everything.
struct DBState {
    let folder: URL

    var environment: [String: String] { ["PGDATAKIT_STATE_DIR": folder.path, "TMPDIR": folder.path] }

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
        let deadline = ContinuousClock.now + patience
        while try answers(url) {
            guard ContinuousClock.now < deadline else { throw TestFailure("server \(url) survived SIGKILL") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// The folders `db` moved a damaged server's folder to (next to it, named after it).
    static func foldersSetAside(from directory: URL) -> [URL] {
        let parent = directory.deletingLastPathComponent()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? []
        return names.filter { $0.hasPrefix(directory.lastPathComponent + ".") }
            .map { parent.appendingPathComponent($0) }
    }

    /// A socket listening on 127.0.0.1:`port`, as another program holding the port would.
    static func listen(onPort port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var reuse: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard bound, Glibc.listen(descriptor, 1) == 0 else {
            let message = String(cString: strerror(errno))
            close(descriptor)
            throw TestFailure("listening on port \(port): \(message)")
        }
        return descriptor
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
