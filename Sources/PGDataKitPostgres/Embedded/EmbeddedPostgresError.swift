import Foundation

/// A throwaway PostgreSQL server could not be started or stopped.
///
/// For example, a restart that finds the server's folder damaged:
///
/// ```swift
/// do {
///     try server.restart()
/// } catch let error as EmbeddedPostgresError where error.code == .cannotRestart {
///     let kept = try server.moveAside()
///     print("\(error); its folder is now \(kept.path)")
/// }
/// ```
public struct EmbeddedPostgresError: Error, Sendable, Equatable, DescribedError {
    /// What failed.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch EmbeddedPostgresError.Code.binariesNotFound { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case binariesNotFound, noUnprivilegedUser, commandFailed, fileSystem,
                notAServerDirectory, alreadyRunning, oldProcessesRemain, portInUse, cannotRestart
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// `initdb`, `pg_ctl` or `postgres` were not found; `searched` lists where.
        public static let binariesNotFound = Code(.binariesNotFound)
        /// The process runs as root and no unprivileged account (`user`) exists to run
        /// the server.
        public static let noUnprivilegedUser = Code(.noUnprivilegedUser)
        /// A server command (`command`) failed with `status`; `output` holds what it
        /// printed.
        public static let commandFailed = Code(.commandFailed)
        /// The folder could not be prepared; `reason` says why.
        public static let fileSystem = Code(.fileSystem)
        /// The folder (`directory`) holds no server started by `EmbeddedPostgres`.
        public static let notAServerDirectory = Code(.notAServerDirectory)
        /// `restart(port:)` or `moveAside()` found the server's postmaster running (it
        /// may still be starting up or recovering); `directory` is the server's folder.
        public static let alreadyRunning = Code(.alreadyRunning)
        /// Processes of a dead server (`pids`) still use its data directory and did not
        /// exit when asked, so PostgreSQL cannot start on it yet.
        public static let oldProcessesRemain = Code(.oldProcessesRemain)
        /// The port asked for (`port`) is taken by another program.
        public static let portInUse = Code(.portInUse)
        /// PostgreSQL could not start on the data directory of a server that died (a
        /// damaged folder, a full disk, …); `log` holds what the server logged. The
        /// folder is left as it was.
        public static let cannotRestart = Code(.cannotRestart)

        /// The code's name, such as `cannotRestart`.
        public var description: String { base.rawValue }
    }

    /// What failed.
    public let code: Code
    /// What failed and what to do about it.
    public let message: String
    /// Where the server binaries were looked for (`binariesNotFound`).
    public private(set) var searched: [String] = []
    /// The account that should run the server (`noUnprivilegedUser`).
    public private(set) var user: String?
    /// The command that failed (`commandFailed`).
    public private(set) var command: String?
    /// The command's exit status (`commandFailed`; -1 when it could not start).
    public private(set) var status: Int32?
    /// What the command printed (`commandFailed`).
    public private(set) var output: String?
    /// Why the folder could not be prepared (`fileSystem`).
    public private(set) var reason: String?
    /// The server's folder.
    public private(set) var directory: String?
    /// The remaining processes' ids (`oldProcessesRemain`).
    public private(set) var pids: [Int32] = []
    /// The port asked for (`portInUse`).
    public private(set) var port: Int?
    /// What the server logged (`cannotRestart`).
    public private(set) var log: String?

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    // (`output` and `log` are left out: the message holds them in full.)
    package var contextFields: [ErrorContextField?] {
        [
            .names("searched", searched), .name("user", user), .name("command", command), .name("status", status),
            .name("reason", reason), .name("directory", directory), .names("pids", pids), .name("port", port),
        ]
    }

    /// `initdb`, `pg_ctl` or `postgres` were not found; `searched` lists where.
    public static func binariesNotFound(searched: [String]) -> EmbeddedPostgresError {
        var error = EmbeddedPostgresError(
            .binariesNotFound,
            "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in "
                + searched.joined(separator: ", ")
                + "; install them (Debian/Ubuntu: apt-get install postgresql), set "
                + "PGDATAKIT_POSTGRES_BIN to their folder, or set DATABASE_URL to use a running server")
        error.searched = searched
        return error
    }

    /// The process runs as root and the unprivileged account does not exist.
    public static func noUnprivilegedUser(_ user: String) -> EmbeddedPostgresError {
        var error = EmbeddedPostgresError(
            .noUnprivilegedUser,
            "PostgreSQL refuses to run as root and the account \"\(user)\" does not exist; "
                + "create it (apt-get install postgresql creates \"postgres\") or run as another user")
        error.user = user
        return error
    }

    /// A server command failed; `output` holds what it printed.
    public static func commandFailed(command: String, status: Int32, output: String) -> EmbeddedPostgresError {
        var error = EmbeddedPostgresError(
            .commandFailed,
            "\(command) failed with status \(status): \(output.trimmingCharacters(in: .whitespacesAndNewlines))")
        (error.command, error.status, error.output) = (command, status, output)
        return error
    }

    /// The folder could not be prepared.
    public static func fileSystem(_ reason: String) -> EmbeddedPostgresError {
        var error = EmbeddedPostgresError(.fileSystem, "could not prepare the server folder: \(reason)")
        error.reason = reason
        return error
    }

    /// The folder holds no server started by `EmbeddedPostgres`.
    public static func notAServerDirectory(_ path: String) -> EmbeddedPostgresError {
        var error = EmbeddedPostgresError(.notAServerDirectory, "\(path) holds no server started by pgdatakit")
        error.directory = path
        return error
    }

    /// The server's postmaster runs (it may still be starting up or recovering).
    public static func alreadyRunning(directory: String) -> EmbeddedPostgresError {
        var error = EmbeddedPostgresError(
            .alreadyRunning,
            "the server in \(directory) is running (it may still be starting up or recovering); "
                + "try again in a moment")
        error.directory = directory
        return error
    }

    /// Processes of a dead server still use its data directory.
    public static func oldProcessesRemain(directory: String, pids: [Int32]) -> EmbeddedPostgresError {
        var error = EmbeddedPostgresError(
            .oldProcessesRemain,
            "processes of the stopped server in \(directory) still run ("
                + pids.map(String.init).joined(separator: ", ")
                + ") and did not exit when asked; stop them, then try again")
        (error.directory, error.pids) = (directory, pids)
        return error
    }

    /// The port asked for is taken by another program.
    public static func portInUse(_ port: Int) -> EmbeddedPostgresError {
        var error = EmbeddedPostgresError(.portInUse, "port \(port) is taken by another program")
        error.port = port
        return error
    }

    /// PostgreSQL could not start on the data directory of a server that died.
    public static func cannotRestart(directory: String, log: String) -> EmbeddedPostgresError {
        let trimmed = log.trimmingCharacters(in: .whitespacesAndNewlines)
        var error = EmbeddedPostgresError(
            .cannotRestart,
            "PostgreSQL could not start on the data directory in \(directory)"
                + (trimmed.isEmpty ? "" : "; it logged:\n\(trimmed)"))
        (error.directory, error.log) = (directory, log)
        return error
    }
}
