import Foundation
import Logging

/// Applies numbered SQL files to a database, each exactly once, in order.
///
/// Files named `NNNN_name.sql` in a folder (other files are ignored) run in ascending
/// version order, each in its own transaction together with its row in the bookkeeping
/// table `pgdatakit_migrations` (version, name, SHA-256 checksum, time applied). A
/// migration that fails is rolled back whole and stops the run.
///
/// Several processes may migrate at the same moment (workers sharing a dataset all
/// starting up): the migrator holds a PostgreSQL advisory lock while it works, so each
/// migration is applied exactly once and the others find nothing left to do.
///
/// They may do so as the application role with DML rights only: the migrator reads the
/// catalog before it runs any DDL, so with everything applied the run only reads
/// (`SELECT` on `pgdatakit_migrations`), and what is missing is a `MigrationError` with
/// code `.missingPrivilege` naming the right the role lacks and the object.
///
/// An applied file whose content has changed is an error, not a silent re-run. Files
/// must not begin, commit or roll back transactions themselves (`BEGIN`, `COMMIT`,
/// `START TRANSACTION`, `END`, `ROLLBACK`, `ABORT`, `PREPARE TRANSACTION` as a
/// statement): before it runs anything, `migrate` checks every pending file and refuses
/// the whole run, naming the file, line and column, if one does. (`SAVEPOINT`, `RELEASE`
/// and `ROLLBACK TO` are fine.) Statements that cannot run in a transaction block (such
/// as `CREATE INDEX CONCURRENTLY`) fail with PostgreSQL's error and are rolled back.
///
/// When a migration's SQL fails, the error names `file:line:column` from the error
/// position PostgreSQL reports (syntax errors, unknown tables and columns…); errors
/// without a position (a constraint violation, say) name the file only.
///
/// For example:
///
/// ```swift
/// let migrator = try Migrator(directory: URL(fileURLWithPath: "migrations"))
/// let connection = try Connection(url: databaseURL)
/// if try !migrator.pending(on: connection).isEmpty {   // "does require migration"
///     let applied = try migrator.migrate(on: connection)
///     print("applied \(applied.map(\.fileName))")
/// }
/// ```
public struct Migrator: Sendable {
    /// The bookkeeping table's name.
    public static let tableName = "pgdatakit_migrations"
    /// The advisory lock key held while migrating (`pg_advisory_lock`).
    public static let advisoryLockKey: Int64 = 0x5047_444B_4D49_4752  // "PGDKMIGR"

    /// The migrations, in ascending version order.
    public let migrations: [Migration]
    private let logger: Logger

    /// Creates a migrator for given migrations.
    ///
    /// - Throws: `MigrationError` when two share a version.
    public init(migrations: [Migration], logger: Logger = Logger(label: "pgdatakit.migrator")) throws {
        var seen: [Int: Migration] = [:]
        for migration in migrations {
            if let other = seen[migration.version] {
                throw MigrationError.duplicateVersion(migration.version, files: [other.fileName, migration.fileName])
            }
            seen[migration.version] = migration
        }
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
    }

    /// Reads the `NNNN_name.sql` files of a folder.
    ///
    /// - Throws: `MigrationError` when the folder cannot be read, a `.sql` file is
    ///   misnamed, or two files share a version.
    public init(directory: URL, logger: Logger = Logger(label: "pgdatakit.migrator")) throws {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError.unreadableDirectory(path: directory.path, message: error.localizedDescription)
        }
        var migrations: [Migration] = []
        var filesByVersion: [Int: String] = [:]
        for file in files.sorted() where file.hasSuffix(".sql") {
            guard let (version, name) = Migrator.parseFileName(file) else {
                throw MigrationError.invalidFileName(file)
            }
            if let other = filesByVersion[version] {
                throw MigrationError.duplicateVersion(version, files: [other, file])
            }
            filesByVersion[version] = file
            let sql: String
            do {
                sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            } catch {
                throw MigrationError.unreadableDirectory(
                    path: directory.path, message: "\(file): \(error.localizedDescription)")
            }
            migrations.append(
                Migration(
                    version: version, name: name, sql: sql,
                    path: directory.appendingPathComponent(file).relativePath))
        }
        try self.init(migrations: migrations, logger: logger)
    }

    static func parseFileName(_ file: String) -> (Int, String)? {
        guard file.hasSuffix(".sql") else { return nil }
        let stem = file.dropLast(4)
        guard let underscore = stem.firstIndex(of: "_") else { return nil }
        let digits = stem[..<underscore]
        let name = stem[stem.index(after: underscore)...]
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
            let version = Int(digits), !name.isEmpty,
            name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
        else { return nil }
        return (version, String(name))
    }

    /// The state of every migration, plus applied versions whose file is gone.
    ///
    /// - Throws: `MigrationError` (`.missingPrivilege`) when the role may not read
    ///   `pgdatakit_migrations`, or `PostgresError`.
    public func status(on connection: Connection) throws -> [MigrationStatus] {
        let applied = try appliedMigrations(on: connection)
        var statuses: [MigrationStatus] = migrations.map { migration in
            guard let record = applied[migration.version] else {
                return MigrationStatus(version: migration.version, name: migration.name, state: .pending)
            }
            if !migration.accepts(recordedChecksum: record.checksum) {
                return MigrationStatus(
                    version: migration.version, name: migration.name,
                    state: .changed(recorded: record.checksum, current: migration.checksum))
            }
            return MigrationStatus(
                version: migration.version, name: migration.name, state: .applied(at: record.appliedAt))
        }
        let known = Set(migrations.map(\.version))
        for (version, record) in applied where !known.contains(version) {
            statuses.append(MigrationStatus(version: version, name: record.name, state: .missingFile))
        }
        return statuses.sorted { $0.version < $1.version }
    }

    /// The migrations not applied yet (RHManagedObject's "does require migration").
    ///
    /// - Throws: `MigrationError` (`.missingPrivilege`) when the role may not read
    ///   `pgdatakit_migrations`, or `PostgresError`.
    public func pending(on connection: Connection) throws -> [Migration] {
        let applied = try appliedMigrations(on: connection)
        return migrations.filter { applied[$0.version] == nil }
    }

    /// The library's own schema, which `migrate(on:upTo:)` installs first: the change-log
    /// table `pgdatakit_changes` through which saves reach other processes, and the
    /// history's tables (`pgdatakit_history_readers`, `pgdatakit_history_horizon`) with
    /// the trigger that records every deletion from the change log. Give it to a DBA who
    /// applies schema changes by hand; it is idempotent.
    public static var librarySchemaSQL: String { ChangeLog.schemaSQL }

    /// Installs the library's own schema (`librarySchemaSQL`) when something of it is
    /// missing, one process at a time. It first looks in the catalog (the tables, the
    /// change log's indexes, record column's storage and triggers, the trigger function)
    /// and runs no DDL when everything is there, so
    /// a role with DML rights only may call it once an owner has installed the schema;
    /// what is missing needs a role that may create tables. (Coordinators never call it:
    /// they only check that the change log exists and is usable.)
    ///
    /// For example, at start-up of a worker that runs as the application role:
    ///
    /// ```swift
    /// try Migrator.installLibrarySchema(on: connection)   // no-op once installed
    /// ```
    ///
    /// - Throws: `MigrationError` with code `.missingPrivilege` when something is
    ///   missing and the role may not create it (naming the right, such as
    ///   `CREATE on schema public`), or `PostgresError`.
    public static func installLibrarySchema(on connection: Connection) throws {
        try ChangeLog.installIfMissing(on: connection)
    }

    /// Applies every pending migration up to `version` (all if `nil`), in order, each in
    /// its own transaction, while holding the migration advisory lock.
    ///
    /// The bookkeeping table and the library's schema are created only when missing (the
    /// catalog is read first): when everything is installed and applied, the call only
    /// reads, so workers running as a role with DML rights only (plus `SELECT` on
    /// `pgdatakit_migrations`) may call it at start-up and find nothing to do.
    ///
    /// - Returns: the migrations this call applied (empty when another process had
    ///   applied them already).
    /// - Throws: `MigrationError` with code `.transactionPooledConnection` when the
    ///   connection goes through a pooler in transaction mode (the lock needs a session
    ///   of its own);
    ///   `MigrationError` with code `.missingPrivilege` when the role lacks a right a
    ///   step needs (creating the bookkeeping table or the library's schema, reading the
    ///   bookkeeping table, or a pending migration's SQL refused with SQLSTATE `42501`),
    ///   naming the rights and the object;
    ///   `MigrationError` with code `.checksumMismatch` when an applied file changed,
    ///   `.transactionControl` when a pending file begins, commits or rolls back a
    ///   transaction itself (nothing is applied in either case), `.migrationFailed` when
    ///   a migration's SQL fails (earlier migrations of the run stay applied; the error's
    ///   `location` says where, when PostgreSQL said), or `PostgresError`.
    @discardableResult
    public func migrate(on connection: Connection, upTo version: Int? = nil) throws -> [Migration] {
        try Self.holdingLock(on: connection, logger: logger) {
            try migrateHoldingLock(on: connection, upTo: version)
        }
    }

    /// Runs `body` holding the migration advisory lock, released afterwards even when
    /// `body` throws.
    ///
    /// - Throws: `MigrationError.transactionPooledConnection` through a transaction pooler
    ///   (a session lock cannot be held there), or what `body` throws.
    static func holdingLock<T>(on connection: Connection, logger: Logger, _ body: () throws -> T) throws -> T {
        guard connection.pooling != .transaction else {
            throw MigrationError.transactionPooledConnection(endpoint: connection.configuration.description)
        }
        try connection.execute("SELECT pg_advisory_lock($1)", [Migrator.advisoryLockKey])
        defer {
            do {
                try connection.execute("SELECT pg_advisory_unlock($1)", [Migrator.advisoryLockKey])
            } catch {
                logger.warning("could not release the migration lock: \(error)")
            }
        }
        return try body()
    }

    /// `migrate(on:upTo:)` once the lock is held.
    private func migrateHoldingLock(on connection: Connection, upTo version: Int?) throws -> [Migration] {
        try createLedgerIfMissing(on: connection)
        try Migrator.installLibrarySchema(on: connection)
        let applied = try appliedMigrations(on: connection)
        for migration in migrations {
            guard let record = applied[migration.version], record.checksum != migration.checksum else { continue }
            guard migration.accepts(recordedChecksum: record.checksum) else {
                throw MigrationError.checksumMismatch(
                    version: migration.version, name: migration.name, recorded: record.checksum,
                    current: migration.checksum)
            }
            // Applied as an earlier text the file says it replaces: record the new one.
            try connection.execute(
                "UPDATE \(Connection.quoteIdentifier(Migrator.tableName)) SET checksum = $1 WHERE version = $2",
                [migration.checksum, migration.version])
        }
        let toApply = migrations.filter { migration in
            applied[migration.version] == nil && version.map { migration.version <= $0 } ?? true
        }
        // All of them before any runs: a COMMIT in the third file must not leave the
        // first two applied and the third half done.
        for migration in toApply {
            if let statement = migration.transactionControlStatements().first {
                throw MigrationError.transactionControl(
                    version: migration.version, name: migration.name, command: statement.command,
                    location: migration.location(ofCharacterAt: statement.offset))
            }
        }
        var done: [Migration] = []
        for migration in toApply {
            let started = ContinuousClock.now
            do {
                try connection.transaction { connection in
                    try connection.executeScript(migration.sql)
                    let elapsed = ContinuousClock.now - started
                    try connection.execute(
                        "INSERT INTO \(Connection.quoteIdentifier(Migrator.tableName)) "
                            + "(version, name, checksum, execution_ms) VALUES ($1, $2, $3, $4)",
                        [
                            migration.version, migration.name, migration.checksum,
                            Double(elapsed.components.seconds) * 1000
                                + Double(elapsed.components.attoseconds) / 1e15,
                        ])
                }
            } catch let error as PostgresError where error.sqlState == .insufficientPrivilege {
                throw MigrationError.missingPrivilege(
                    role: try Migrator.currentRole(on: connection),
                    privileges: try lackingMigrationRights(on: connection),
                    neededFor: "apply migration \(migration.version) (\(migration.name))", underlying: error,
                    location: MigrationError.Location(file: migration.path ?? migration.fileName))
            } catch let error as PostgresError {
                throw MigrationError.migrationFailed(
                    version: migration.version, name: migration.name, underlying: error,
                    location: error.position.map { migration.location(ofCharacterAt: $0 - 1) }
                        ?? MigrationError.Location(file: migration.path ?? migration.fileName))
            }
            // Debug, not info: callers report what was applied (the return value); a
            // normal run of the CLI or the tests prints no log lines.
            logger.debug("applied migration \(migration.fileName)")
            done.append(migration)
        }
        return done
    }

    private struct AppliedRecord {
        var name: String
        var checksum: String
        var appliedAt: Date
    }

    private func appliedMigrations(on connection: Connection) throws -> [Int: AppliedRecord] {
        let ledger = try connection.query(
            "SELECT to_regclass($1) IS NOT NULL, has_table_privilege(to_regclass($1), 'SELECT')",
            [Connection.quoteIdentifier(Migrator.tableName)])[0]
        guard try ledger.decode(Bool.self, at: 0) else { return [:] }
        guard try ledger.decode(Bool?.self, at: 1) == true else {
            throw MigrationError.missingPrivilege(
                role: try Migrator.currentRole(on: connection), privileges: ["SELECT on \(Migrator.tableName)"],
                neededFor: "read which migrations are applied", underlying: nil)
        }
        let rows = try connection.query(
            "SELECT version, name, checksum, applied_at FROM "
                + Connection.quoteIdentifier(Migrator.tableName))
        var records: [Int: AppliedRecord] = [:]
        for row in rows {
            records[try row.decode(Int.self, at: 0)] = AppliedRecord(
                name: try row.decode(String.self, at: 1), checksum: try row.decode(String.self, at: 2),
                appliedAt: try row.decode(Date.self, at: 3))
        }
        return records
    }
}
