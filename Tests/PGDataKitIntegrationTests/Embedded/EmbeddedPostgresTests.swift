import Foundation
import PGDataKit
import Testing

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
