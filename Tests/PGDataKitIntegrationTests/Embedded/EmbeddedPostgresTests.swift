import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("EmbeddedPostgres")
struct EmbeddedPostgresTests {
    @Test func startsAServerAndRemovesItOnStop() throws {
        let server = try EmbeddedPostgres.start()
        #expect(FileManager.default.fileExists(atPath: server.directory.path))
        let connection = try Connection(url: server.url)
        #expect(try connection.query("SHOW fsync")[0].decode(String.self, at: 0) == "off")
        let user = try connection.query("SELECT current_user")[0].decode(String.self, at: 0)
        #expect(user == "postgres")
        connection.close()
        try server.stop()
        try server.stop()
        #expect(server.isStopped)
        #expect(!FileManager.default.fileExists(atPath: server.directory.path))
        #expect(throws: PostgresError.self) { try Connection(url: server.url + "?connect_timeout=3") }
    }

    /// `stop(keepingLogIn:)` (what `PGDATAKIT_SERVER_LOG_DIR` asks of `stop()`) copies the
    /// server's log, with what the server said, before the folder goes.
    @Test func stopKeepsTheLogWhereAsked() throws {
        let server = try EmbeddedPostgres.start()
        let logs = FileManager.default.temporaryDirectory.appendingPathComponent("pgdatakit-logs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: logs) }
        let connection = try Connection(url: server.url)
        #expect(throws: PostgresError.self) { try connection.execute("SELECT pgdatakit_no_such_function()") }
        connection.close()
        try server.stop(keepingLogIn: logs.path)
        #expect(!FileManager.default.fileExists(atPath: server.directory.path))
        let kept = logs.appendingPathComponent(server.directory.lastPathComponent + ".log")
        let text = try String(contentsOf: kept, encoding: .utf8)
        #expect(text.contains("database system is ready to accept connections"))
        #expect(text.contains("pgdatakit_no_such_function"))
    }

    @Test func livenessNoticesAKilledServerAndStopRemovesIt() throws {
        let server = try EmbeddedPostgres.start()
        defer { try? server.stop() }
        #expect(server.liveness() == .running)
        // The killed postmaster may linger as a zombie, which `kill(pid, 0)` still finds.
        try DBState.kill(serverIn: server.directory, url: server.url)
        #expect(server.liveness() == .dead)
        try server.stop()
        #expect(!FileManager.default.fileExists(atPath: server.directory.path))
    }

    /// A restart after `kill -9` of the postmaster waits out (and then `SIGQUIT`s) a
    /// backend still busy with a query, which holds the old shared memory, and brings the
    /// committed rows back on the same URL. (Without `syncsToDisk`, `synchronous_commit =
    /// off` lets a kill lose the last commits, still in the dead server's WAL buffers.)
    @Test func restartAfterAKillWaitsForABusyBackendAndKeepsTheData() throws {
        let server = try EmbeddedPostgres.start(EmbeddedPostgres.Options(syncsToDisk: true))
        defer { try? server.stop() }
        let connection = try Connection(url: server.url)
        try connection.execute("CREATE TABLE kept (note text)")
        try connection.execute("INSERT INTO kept VALUES ('still here')")
        // A backend that computes without waiting notices its postmaster's death late.
        let url = server.url
        Thread.detachNewThread {
            guard let busy = try? Connection(url: url) else { return }
            _ = try? busy.query("SELECT count(*) FROM generate_series(1, 10000000000)")
            busy.close()
        }
        let deadline = ContinuousClock.now + patience
        while try connection.query(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%generate_series(1, 10000000000)%' "
                + "AND state = 'active' AND pid <> pg_backend_pid()")[0].decode(Int.self, at: 0) == 0
        {
            guard ContinuousClock.now < deadline else { throw TestFailure("the busy query did not start") }
            Thread.sleep(forTimeInterval: 0.05)
        }
        connection.close()
        try DBState.kill(serverIn: server.directory, url: server.url)
        #expect(server.liveness() == .dead)
        #expect(!server.remainingServerProcesses().isEmpty, "the busy backend should outlive its postmaster")

        try server.restart()
        #expect(server.url == url)
        #expect(server.liveness() == .running)
        #expect(server.remainingServerProcesses().count > 1, "the new server's own processes")
        #expect(try DBState.notes(at: server.url) == ["still here"])
        // A running server is neither restarted nor moved.
        let running = EmbeddedPostgresError.alreadyRunning(directory: server.directory.path)
        for attempt in [{ try server.restart() }, { _ = try server.moveAside() }] {
            do {
                try attempt()
                Issue.record("expected \(running)")
            } catch let error as EmbeddedPostgresError {
                #expect(error == running)
            }
        }
        #expect(FileManager.default.fileExists(atPath: server.dataDirectory.path))
    }

    @Test func livenessOfAStoppedServerIsDead() throws {
        let server = try EmbeddedPostgres.start()
        try server.stop()
        #expect(server.liveness() == .dead)
    }

    @Test func missingBinariesSayWhatToInstall() throws {
        do {
            _ = try EmbeddedPostgres.locateBinaries(
                environment: ["PATH": "/nonexistent/bin"], systemDirectory: "/nonexistent/postgresql")
            Issue.record("expected an error")
        } catch let error as EmbeddedPostgresError {
            #expect(error.description.contains("apt-get install postgresql"))
            #expect(error.description.contains("/nonexistent/bin"))
        }
    }

    @Test func environmentURLWinsOverTheThrowawayServer() throws {
        let url = try EmbeddedPostgres.environmentOrSharedURL(environment: ["DATABASE_URL": "postgres://elsewhere/db"])
        #expect(url == "postgres://elsewhere/db")
    }
}
