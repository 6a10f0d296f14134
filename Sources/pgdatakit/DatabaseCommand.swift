import ArgumentParser
import Foundation
import PGDataKit

struct DatabaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db",
        abstract: "Start, stop or locate a throwaway PostgreSQL server for use from a shell.",
        discussion: """
            `pgdatakit db start` starts a server that keeps running after the command exits
            and prints `export DATABASE_URL=…`; `eval "$(pgdatakit db start)"` sets it.
            It syncs to disk (fsync on), since it outlives the command.
            `pgdatakit db stop` stops it and removes its files. One such server per user.
            `db start` and `db url` check that the recorded server still answers; if it
            died (killed, crashed), they remove its files and start a new one (its data is
            gone), on the same port when that port is free.
            """,
        subcommands: [Start.self, Stop.self, URLCommand.self]
    )

    /// The file that remembers the folder of the running server (in
    /// `$PGDATAKIT_STATE_DIR`, else the temporary folder).
    static var stateFile: URL {
        let folder = ProcessInfo.processInfo.environment["PGDATAKIT_STATE_DIR"].map {
            URL(fileURLWithPath: $0)
        } ?? FileManager.default.temporaryDirectory
        return folder.appendingPathComponent("pgdatakit-db-\(getuid()).path")
    }

    /// The server the state file points at, whether or not it still runs.
    static func recordedServer() -> EmbeddedPostgres? {
        guard let path = try? String(contentsOf: stateFile, encoding: .utf8) else { return nil }
        let directory = URL(fileURLWithPath: path.trimmingCharacters(in: .whitespacesAndNewlines))
        return try? EmbeddedPostgres.attach(to: directory)
    }

    /// The recorded server when it answers; a new one when it died (its files removed,
    /// on the same port when free). `nil` when none is recorded and `startIfNone` is
    /// false.
    ///
    /// - Throws: when the recorded server's process lives but does not answer (it is
    ///   left alone), or a new server cannot start.
    static func liveServer(port: Int?, startIfNone: Bool) throws -> (server: EmbeddedPostgres, isNew: Bool)? {
        var preferredPort = port
        if let recorded = recordedServer() {
            switch recorded.liveness() {
            case .running:
                return (recorded, false)
            case .notAnswering(let reason):
                printError(
                    "The throwaway server in \(recorded.directory.path) runs but does not answer: \(reason). "
                        + "Stop it with `pgdatakit db stop`.")
                throw ExitCode(1)
            case .dead:
                try recorded.stop()
                printError(
                    "The throwaway server in \(recorded.directory.path) had stopped (its process is gone); "
                        + "removed its files. Its data is lost.")
                preferredPort = port ?? recorded.port
            }
        } else {
            try? FileManager.default.removeItem(at: stateFile)
            guard startIfNone else { return nil }
        }
        let server: EmbeddedPostgres
        do {
            server = try EmbeddedPostgres.start(
                EmbeddedPostgres.Options(port: preferredPort, keepsRunningAfterExit: true, syncsToDisk: true))
        } catch where port == nil && preferredPort != nil {
            // The dead server's port was taken meanwhile: any free one will do.
            server = try EmbeddedPostgres.start(
                EmbeddedPostgres.Options(keepsRunningAfterExit: true, syncsToDisk: true))
        }
        do {
            try server.directory.path.write(to: stateFile, atomically: true, encoding: .utf8)
        } catch {
            try? server.stop()
            throw error
        }
        printError("Started a throwaway PostgreSQL server in \(server.directory.path); stop it with `pgdatakit db stop`.")
        return (server, true)
    }

    struct Start: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a throwaway server (or report the one already running).")

        @Option(help: "TCP port on 127.0.0.1 (default: a free one).")
        var port: Int?

        func run() throws {
            guard let (server, isNew) = try DatabaseCommand.liveServer(port: port, startIfNone: true) else {
                throw ExitCode(1)
            }
            if !isNew {
                printError("A throwaway server is already running (\(server.directory.path)).")
            }
            print("export DATABASE_URL='\(server.url)'")
        }
    }

    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop the throwaway server and remove its files.")

        func run() throws {
            guard let server = DatabaseCommand.recordedServer() else {
                printError("No throwaway server is running.")
                try? FileManager.default.removeItem(at: DatabaseCommand.stateFile)
                return
            }
            let wasRunning = server.liveness() != .dead
            try server.stop()
            try? FileManager.default.removeItem(at: DatabaseCommand.stateFile)
            printError(
                wasRunning
                    ? "Stopped the throwaway server."
                    : "The throwaway server had already stopped (its process is gone); removed its files.")
        }
    }

    struct URLCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "url",
            abstract: "Print the URL of the throwaway server (starting a new one if it died).")

        func run() throws {
            guard let (server, _) = try DatabaseCommand.liveServer(port: nil, startIfNone: false) else {
                printError("No throwaway server is running; start one with `pgdatakit db start`.")
                throw ExitCode(1)
            }
            print(server.url)
        }
    }
}
