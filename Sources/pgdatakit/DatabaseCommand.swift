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
            `pgdatakit db stop` stops it and removes its files. One such server per user.
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

    static func runningServer() -> EmbeddedPostgres? {
        guard let path = try? String(contentsOf: stateFile, encoding: .utf8) else { return nil }
        let directory = URL(fileURLWithPath: path.trimmingCharacters(in: .whitespacesAndNewlines))
        return try? EmbeddedPostgres.attach(to: directory)
    }

    struct Start: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a throwaway server (or report the one already running).")

        @Option(help: "TCP port on 127.0.0.1 (default: a free one).")
        var port: Int?

        func run() throws {
            if let server = DatabaseCommand.runningServer() {
                printError("A throwaway server is already running (\(server.directory.path)).")
                print("export DATABASE_URL='\(server.url)'")
                return
            }
            let server = try EmbeddedPostgres.start(
                EmbeddedPostgres.Options(port: port, keepsRunningAfterExit: true))
            try server.directory.path.write(to: DatabaseCommand.stateFile, atomically: true, encoding: .utf8)
            printError("Started a throwaway PostgreSQL server in \(server.directory.path); stop it with `pgdatakit db stop`.")
            print("export DATABASE_URL='\(server.url)'")
        }
    }

    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop the throwaway server and remove its files.")

        func run() throws {
            guard let server = DatabaseCommand.runningServer() else {
                printError("No throwaway server is running.")
                try? FileManager.default.removeItem(at: DatabaseCommand.stateFile)
                return
            }
            try server.stop()
            try? FileManager.default.removeItem(at: DatabaseCommand.stateFile)
            printError("Stopped the throwaway server.")
        }
    }

    struct URLCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "url", abstract: "Print the URL of the running throwaway server.")

        func run() throws {
            guard let server = DatabaseCommand.runningServer() else {
                printError("No throwaway server is running; start one with `pgdatakit db start`.")
                throw ExitCode(1)
            }
            print(server.url)
        }
    }
}
