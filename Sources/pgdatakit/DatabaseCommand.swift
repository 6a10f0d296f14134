import ArgumentParser
import Foundation
import PGDataKit
import PGDataKitCommands

struct DatabaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db",
        abstract: "Start, stop or locate a local PostgreSQL server for use from a shell.",
        discussion: """
            `pgdatakit db start` starts a server that keeps running after the command exits \
            and prints `export DATABASE_URL=…`; `eval "$(pgdatakit db start)"` sets it. \
            One such server per user. It syncs to disk (fsync on), and its data stays \
            until `pgdatakit db stop`, which stops it and removes its files: nothing else \
            deletes them.

            `db start` and `db url` check that the recorded server still answers. If its \
            process died (killed, crashed), they start it again on its own data directory \
            (PostgreSQL recovers what was committed), on the same port when that port is \
            free, and say so on standard error. If PostgreSQL cannot start on that \
            directory (a damaged folder), the folder is moved aside next to where it was, \
            named in the message, and kept; then a new, empty server starts.
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

    /// Runs `body` holding an exclusive lock on a file next to the state file, so that
    /// two `db` commands at once cannot both restart, replace or stop the server.
    static func withStateLock<T>(_ body: () throws -> T) throws -> T {
        let path = stateFile.path + ".lock"
        let descriptor = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            printError("Cannot open the lock file \(path): \(String(cString: strerror(errno))).")
            throw ExitCode(1)
        }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else {
                printError("Cannot lock \(path): \(String(cString: strerror(errno))).")
                throw ExitCode(1)
            }
        }
        return try body()
    }

    /// The server the state file points at, whether or not it still runs.
    static func recordedServer() -> EmbeddedPostgres? {
        guard let path = try? String(contentsOf: stateFile, encoding: .utf8) else { return nil }
        let directory = URL(fileURLWithPath: path.trimmingCharacters(in: .whitespacesAndNewlines))
        return try? EmbeddedPostgres.attach(to: directory)
    }

    /// How `liveServer` came by its server.
    enum Origin {
        /// The recorded server answered.
        case running
        /// The recorded server had died and was started again on its data.
        case restarted
        /// A new, empty server was started.
        case started
    }

    /// The recorded server when it answers; restarted on its data directory when it
    /// died; a new one when none is recorded (and `startIfNone`) or the dead one could
    /// not start (its folder moved aside first). `nil` when none is recorded and
    /// `startIfNone` is false.
    ///
    /// - Throws: when the recorded server's process lives but does not answer, or a dead
    ///   one cannot be restarted for a reason other than its folder (its processes
    ///   linger, its port is taken); its folder is left alone. Also when a new server
    ///   cannot start.
    static func liveServer(port: Int?, startIfNone: Bool) throws -> (server: EmbeddedPostgres, origin: Origin)? {
        var preferredPort = port
        if let recorded = recordedServer() {
            switch recorded.liveness() {
            case .running:
                return (recorded, .running)
            case .notAnswering(let reason):
                printError(
                    "The server in \(recorded.directory.path) runs but does not answer: \(reason). "
                        + "Try again in a moment (it may be starting up or recovering), or stop it and "
                        + "remove its data with `pgdatakit db stop`.")
                throw ExitCode(1)
            case .dead:
                if try restart(recorded, port: port) { return (recorded, .restarted) }
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
        printError(
            "Started a PostgreSQL server in \(server.directory.path); its data stays until `pgdatakit db stop`.")
        return (server, .started)
    }

    /// Starts a recorded server that died again on its data directory and says so;
    /// `false` when PostgreSQL could not start on it and its folder was moved aside.
    ///
    /// - Throws: `ExitCode(1)` (having said why) when it cannot be restarted for a reason
    ///   other than its folder, or the folder cannot be moved.
    static func restart(_ server: EmbeddedPostgres, port: Int?) throws -> Bool {
        let folder = server.directory.path
        let oldPort = server.port
        do {
            try server.restart(port: port)
        } catch let restartError as EmbeddedPostgresError {
            guard restartError.code == .cannotRestart else {
                printError(
                    "The server in \(folder) had stopped (its process is gone) and could not be restarted: "
                        + "\(restartError). Its data is untouched.")
                throw ExitCode(1)
            }
            let kept: URL
            do {
                kept = try server.moveAside()
            } catch {
                printError(
                    "The server in \(folder) had stopped (its process is gone), and \(restartError). "
                        + "Its folder could not be moved aside either (\(error)); it is untouched.")
                throw ExitCode(1)
            }
            printError(
                "The server in \(folder) had stopped (its process is gone), and \(restartError).\n"
                    + "Moved its folder, data included, to \(kept.path): nothing was deleted. "
                    + "Its log is \(kept.appendingPathComponent("server.log").path); remove the folder "
                    + "when you no longer need it. Starting a new, empty server.")
            return false
        }
        var message =
            "The server in \(folder) had stopped (its process is gone); restarted it on its data directory, "
            + "and PostgreSQL recovered its data."
        if server.port != oldPort {
            message += " Its port \(oldPort) was taken, so it now listens on \(server.port): its URL changed."
        }
        printError(message)
        return true
    }

    struct Start: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start the server (or report the one running, restarting it if it died).")

        @Option(help: "TCP port on 127.0.0.1 (default: a free one; a restarted server's old one when free).")
        var port: Int?

        func run() throws {
            let (server, origin) = try DatabaseCommand.withStateLock {
                guard let found = try DatabaseCommand.liveServer(port: port, startIfNone: true) else {
                    throw ExitCode(1)
                }
                return found
            }
            if origin == .running {
                printError("A server is already running (\(server.directory.path)).")
            }
            print("export DATABASE_URL='\(server.url)'")
        }
    }

    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop the server and remove its files, data included.")

        func run() throws {
            try DatabaseCommand.withStateLock {
                guard let server = DatabaseCommand.recordedServer() else {
                    printError("No server is running.")
                    try? FileManager.default.removeItem(at: DatabaseCommand.stateFile)
                    return
                }
                let wasRunning = server.liveness() != .dead
                try server.stop()
                try? FileManager.default.removeItem(at: DatabaseCommand.stateFile)
                printError(
                    wasRunning
                        ? "Stopped the server and removed its files."
                        : "The server had already stopped (its process is gone); removed its files.")
            }
        }
    }

    struct URLCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "url",
            abstract: "Print the URL of the server (restarting it if it died).")

        func run() throws {
            let found = try DatabaseCommand.withStateLock {
                try DatabaseCommand.liveServer(port: nil, startIfNone: false)
            }
            guard let (server, _) = found else {
                printError("No server is running; start one with `pgdatakit db start`.")
                throw ExitCode(1)
            }
            print(server.url)
        }
    }
}
