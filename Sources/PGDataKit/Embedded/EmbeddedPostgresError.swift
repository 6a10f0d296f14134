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
        }
    }
}
