/// A migration run could not go ahead or failed.
///
/// For example:
///
/// ```swift
/// do {
///     try Migrator(directory: folder).migrate(on: connection)
/// } catch let error as MigrationError where error.code == .missingPrivilege {
///     print(error.role ?? "", error.privileges)   // app ["CREATE on schema public"]
/// }
/// ```
public struct MigrationError: Error, Sendable, DescribedError {
    /// What went wrong.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch MigrationError.Code.unreadableDirectory { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case unreadableDirectory, invalidFileName, duplicateVersion, checksumMismatch,
                migrationFailed, transactionControl, missingPrivilege, transactionPooledConnection
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The folder (`path`) could not be read; `reason` says why.
        public static let unreadableDirectory = Code(.unreadableDirectory)
        /// A `.sql` file's name (`file`) does not look like `NNNN_name.sql`.
        public static let invalidFileName = Code(.invalidFileName)
        /// Two files (`files`) share a version number (`version`).
        public static let duplicateVersion = Code(.duplicateVersion)
        /// An applied migration's file was edited afterwards (`recordedChecksum`,
        /// `currentChecksum`).
        public static let checksumMismatch = Code(.checksumMismatch)
        /// A migration's SQL failed (`underlying`); nothing of it was applied.
        public static let migrationFailed = Code(.migrationFailed)
        /// A pending migration begins, commits or rolls back a transaction itself
        /// (`command`, such as `COMMIT`); nothing was applied.
        public static let transactionControl = Code(.transactionControl)
        /// The connection's role (`role`) lacks rights that migrating needs —
        /// `privileges`, each as `PRIVILEGE on object`, such as `CREATE on schema public`
        /// — to do `neededFor` (such as `apply migration 2 (add_tags)`); nothing of that
        /// step was done. `underlying` is PostgreSQL's error when a migration's own SQL
        /// was refused (it names the object, as in `must be owner of table users`);
        /// `privileges` may then be empty, when the rights the migrator can look up are
        /// all there.
        ///
        /// A role with DML rights only may run the migrator when everything is applied
        /// (it then only reads `pgdatakit_migrations`, which needs `SELECT` on it); a
        /// pending migration needs the schema owner's role.
        public static let missingPrivilege = Code(.missingPrivilege)
        /// The connection (to `endpoint`, `user@host:port/database`) goes through a
        /// pooler in transaction mode (`Connection.pooling`): the migrator's advisory
        /// lock belongs to a session, and would be taken in one server process and
        /// released in another. Migrate on a direct connection; nothing was done.
        public static let transactionPooledConnection = Code(.transactionPooledConnection)

        /// The code's name, such as `checksumMismatch`.
        public var description: String { base.rawValue }
    }

    /// A place in a migration file.
    public struct Location: Sendable, Equatable, CustomStringConvertible {
        /// The file's path (or its name, for a migration made in code).
        public var file: String
        /// The 1-based line, when known.
        public var line: Int?
        /// The 1-based column, counted in characters (Unicode code points, as PostgreSQL
        /// counts them), when known.
        public var column: Int?
        /// The text of that line, when known.
        public var lineText: String?

        /// `file:line:column`, or as much of it as is known.
        public var description: String {
            guard let line else { return file }
            return "\(file):\(line)" + (column.map { ":\($0)" } ?? "")
        }
    }

    /// What went wrong.
    public let code: Code
    /// Where in which file, for errors about one migration's SQL.
    public internal(set) var location: Location?
    /// The migrations folder (`unreadableDirectory`).
    public private(set) var path: String?
    /// Why the folder or a file could not be read (`unreadableDirectory`).
    public private(set) var reason: String?
    /// The badly named file (`invalidFileName`).
    public private(set) var file: String?
    /// The files that share a version (`duplicateVersion`).
    public private(set) var files: [String] = []
    /// The migration's version.
    public private(set) var version: Int?
    /// The migration's name.
    public private(set) var name: String?
    /// The checksum recorded when the migration was applied (`checksumMismatch`).
    public private(set) var recordedChecksum: String?
    /// The file's checksum now (`checksumMismatch`).
    public private(set) var currentChecksum: String?
    /// PostgreSQL's error (`migrationFailed`, and `missingPrivilege` when the server
    /// refused a migration's own SQL).
    public private(set) var underlying: PostgresError?
    /// The transaction command a migration runs itself (`transactionControl`).
    public private(set) var command: String?
    /// The connection's role (`missingPrivilege`).
    public private(set) var role: String?
    /// The rights the role lacks, each as `PRIVILEGE on object` (`missingPrivilege`).
    public private(set) var privileges: [String] = []
    /// What the role could not do, such as `apply migration 2 (add_tags)`
    /// (`missingPrivilege`).
    public private(set) var neededFor: String?
    /// The pooled connection's endpoint, `user@host:port/database`
    /// (`transactionPooledConnection`).
    public private(set) var endpoint: String?

    private init(_ code: Code, location: Location? = nil) {
        self.code = code
        self.location = location
    }

    package var contextFields: [ErrorContextField?] {
        [
            .name("location", location), .name("path", path), .name("reason", reason), .name("file", file),
            .names("files", files), .name("version", version), .name("name", name),
            .name("recordedChecksum", recordedChecksum), .name("currentChecksum", currentChecksum),
            .name("command", command), .name("role", role), .names("privileges", privileges),
            .name("neededFor", neededFor), .name("endpoint", endpoint), .underlying("underlying", underlying),
        ]
    }

    /// The folder could not be read.
    public static func unreadableDirectory(path: String, message: String) -> MigrationError {
        var error = MigrationError(.unreadableDirectory)
        (error.path, error.reason) = (path, message)
        return error
    }

    /// A `.sql` file's name does not look like `NNNN_name.sql`.
    public static func invalidFileName(_ file: String) -> MigrationError {
        var error = MigrationError(.invalidFileName)
        error.file = file
        return error
    }

    /// Two files share a version number.
    public static func duplicateVersion(_ version: Int, files: [String]) -> MigrationError {
        var error = MigrationError(.duplicateVersion)
        (error.version, error.files) = (version, files)
        return error
    }

    /// An applied migration's file was edited afterwards.
    public static func checksumMismatch(version: Int, name: String, recorded: String, current: String) -> MigrationError {
        var error = MigrationError(.checksumMismatch)
        (error.version, error.name, error.recordedChecksum, error.currentChecksum) = (version, name, recorded, current)
        return error
    }

    /// A migration's SQL failed; nothing of it was applied.
    public static func migrationFailed(
        version: Int, name: String, underlying: PostgresError, location: Location? = nil
    ) -> MigrationError {
        var error = MigrationError(.migrationFailed, location: location)
        (error.version, error.name, error.underlying) = (version, name, underlying)
        return error
    }

    /// A pending migration begins, commits or rolls back a transaction itself.
    public static func transactionControl(
        version: Int, name: String, command: String, location: Location? = nil
    ) -> MigrationError {
        var error = MigrationError(.transactionControl, location: location)
        (error.version, error.name, error.command) = (version, name, command)
        return error
    }

    /// The connection's role lacks rights that migrating needs.
    public static func missingPrivilege(
        role: String, privileges: [String], neededFor: String, underlying: PostgresError?, location: Location? = nil
    ) -> MigrationError {
        var error = MigrationError(.missingPrivilege, location: location)
        (error.role, error.privileges, error.neededFor, error.underlying) = (role, privileges, neededFor, underlying)
        return error
    }

    /// The connection goes through a pooler in transaction mode.
    public static func transactionPooledConnection(endpoint: String) -> MigrationError {
        var error = MigrationError(.transactionPooledConnection)
        error.endpoint = endpoint
        return error
    }

    /// Names the file or version and says what to do; errors about a file's SQL start
    /// with `file:line:column:`, as compilers do.
    public var message: String {
        let prefix = location.map { "\($0): " } ?? ""
        return prefix + text
    }

    private var text: String {
        let migration = "migration \(version.map(String.init) ?? "?") (\(name ?? "?"))"
        switch code {
        case .unreadableDirectory:
            return "cannot read migrations folder \(path ?? "?"): \(reason ?? "")"
        case .invalidFileName:
            return "migration file \"\(file ?? "")\" is not named NNNN_name.sql (digits, underscore, "
                + "letters, digits, _ or -)"
        case .duplicateVersion:
            return "migration version \(version.map(String.init) ?? "?") is used by several files: "
                + files.joined(separator: ", ")
        case .checksumMismatch:
            return "\(migration) was changed after it was applied "
                + "(recorded checksum \((recordedChecksum ?? "").prefix(12))…, file now \((currentChecksum ?? "").prefix(12))…); "
                + "applied migrations must not be edited: add a new migration instead"
        case .migrationFailed:
            // The statement is the whole file: the location and line say more.
            var underlying = underlying
            underlying?.statement = nil
            var text = "\(migration) failed and was rolled back: \(underlying.map { "\($0)" } ?? "")"
            if let location, let line = location.line, let lineText = location.lineText {
                text += " — line \(line): \(lineText.trimmingCharacters(in: .whitespaces))"
            }
            return text
        case .transactionControl:
            return "\(migration) runs \(command ?? "?") itself, but each migration runs in "
                + "the migrator's transaction (SAVEPOINT and RELEASE are fine); remove it. "
                + "Every pending file is checked before any runs: nothing was applied"
        case .transactionPooledConnection:
            return "the connection to \(endpoint ?? "?") goes through a connection pooler in transaction mode, where "
                + "the migration lock (a session's advisory lock) cannot be held: run the migrator on a direct "
                + "connection to the server; nothing was done"
        case .missingPrivilege:
            var text = "role \(role ?? "?") may not \(neededFor ?? "migrate"): "
            if !privileges.isEmpty {
                text += "it lacks " + privileges.joined(separator: ", ")
                if let underlying { text += " (server: \(underlying.message))" }
            } else {
                text += underlying?.message ?? "permission denied"
            }
            return text + "; nothing of it was done. Run `pgdatakit migrate` (or Migrator.migrate(on:)) with "
                + "the role that owns the schema; once every migration is applied, the application role "
                + "may run it too and finds nothing to do (it needs SELECT on \(Migrator.tableName))"
        default:
            return "migration failed (\(code))"
        }
    }
}
