import Foundation

/// A throwaway PostgreSQL server could not be started or stopped.
public struct EmbeddedPostgresError: Error, Sendable, CustomStringConvertible {
    /// What failed.
    public enum Reason: Sendable, Equatable {
        /// `initdb`, `pg_ctl` or `postgres` were not found; `searched` lists where.
        case binariesNotFound(searched: [String])
        /// The process runs as root and no unprivileged account exists to run the server.
        case noUnprivilegedUser(String)
        /// A server command failed; `output` holds what it printed.
        case commandFailed(command: String, status: Int32, output: String)
        /// The folder could not be prepared.
        case fileSystem(String)
        /// The folder holds no server started by `EmbeddedPostgres`.
        case notAServerDirectory(String)
        /// `restart(port:)` or `moveAside()` found the server's postmaster running (it may
        /// still be starting up or recovering); `directory` is the server's folder.
        case alreadyRunning(directory: String)
        /// Processes of a dead server (`pids`) still use its data directory and did not
        /// exit when asked, so PostgreSQL cannot start on it yet.
        case oldProcessesRemain(directory: String, pids: [Int32])
        /// The port asked for is taken by another program.
        case portInUse(Int)
        /// PostgreSQL could not start on the data directory of a server that died (a
        /// damaged folder, a full disk, …); `log` holds what the server logged. The folder
        /// is left as it was.
        case cannotRestart(directory: String, log: String)
    }

    /// What failed.
    public var reason: Reason

    /// Says what failed and what to do about it.
    public var description: String {
        switch reason {
        case .binariesNotFound(let searched):
            return "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in "
                + searched.joined(separator: ", ")
                + "; install them (Debian/Ubuntu: apt-get install postgresql), set "
                + "PGDATAKIT_POSTGRES_BIN to their folder, or set DATABASE_URL to use a running server"
        case .noUnprivilegedUser(let user):
            return "PostgreSQL refuses to run as root and the account \"\(user)\" does not exist; "
                + "create it (apt-get install postgresql creates \"postgres\") or run as another user"
        case .commandFailed(let command, let status, let output):
            return "\(command) failed with status \(status): \(output.trimmingCharacters(in: .whitespacesAndNewlines))"
        case .fileSystem(let message):
            return "could not prepare the server folder: \(message)"
        case .notAServerDirectory(let path):
            return "\(path) holds no server started by pgdatakit"
        case .alreadyRunning(let directory):
            return "the server in \(directory) is running (it may still be starting up or recovering); "
                + "try again in a moment"
        case .oldProcessesRemain(let directory, let pids):
            return "processes of the stopped server in \(directory) still run ("
                + pids.map(String.init).joined(separator: ", ")
                + ") and did not exit when asked; stop them, then try again"
        case .portInUse(let port):
            return "port \(port) is taken by another program"
        case .cannotRestart(let directory, let log):
            let trimmed = log.trimmingCharacters(in: .whitespacesAndNewlines)
            return "PostgreSQL could not start on the data directory in \(directory)"
                + (trimmed.isEmpty ? "" : "; it logged:\n\(trimmed)")
        }
    }
}
