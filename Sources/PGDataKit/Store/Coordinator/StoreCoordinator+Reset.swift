import Foundation

/// `resetStore(database:)` was refused: `database` does not name the database the
/// coordinator is connected to. Nothing was deleted.
///
/// For example:
///
/// ```swift
/// do {
///     try manager.coordinator.resetStore(database: "myapp_test")
/// } catch StoreResetError.Code.wrongDatabase {
///     // connected elsewhere: nothing was deleted
/// }
/// ```
public struct StoreResetError: Error, Sendable, Equatable, DescribedError {
    /// Why the reset was refused.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch StoreResetError.Code.wrongDatabase { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case wrongDatabase
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The name given is not the connected database's (`connectedDatabase`).
        public static let wrongDatabase = Code(.wrongDatabase)

        /// The code's name, such as `wrongDatabase`.
        public var description: String { base.rawValue }
    }

    /// The database the coordinator is connected to.
    public var connectedDatabase: String
    /// The name the caller gave.
    public var requestedDatabase: String

    /// Creates an error.
    public init(connectedDatabase: String, requestedDatabase: String) {
        self.connectedDatabase = connectedDatabase
        self.requestedDatabase = requestedDatabase
    }

    /// Why the reset was refused: `wrongDatabase`.
    public var code: Code { .wrongDatabase }

    /// Names both databases.
    public var message: String {
        "resetStore(database: \"\(requestedDatabase)\") refused: the coordinator is connected to "
            + "\"\(connectedDatabase)\"; nothing was deleted"
    }

    /// Both names, for `debugDescription`.
    package var contextFields: [ErrorContextField?] {
        [.name("connectedDatabase", connectedDatabase), .name("requestedDatabase", requestedDatabase)]
    }
}

extension StoreCoordinator {
    /// Empties the store for tests (SQKDataKit's and RHManagedObject's delete-store):
    /// every entity table of the model, its join tables and the change log, in one
    /// `TRUNCATE … RESTART IDENTITY` (so keys start again at 1), committed at once.
    ///
    /// Nothing else in the database is touched, and nothing is done unless `database`
    /// names the database the coordinator is connected to (`current_database()`): an
    /// explicit opt-in that a test's configuration cannot meet by accident on another
    /// database. Objects that contexts hold stand for rows that are gone: reset those
    /// contexts. Other processes' listeners go on from where they stand.
    ///
    /// For example:
    ///
    /// ```swift
    /// try manager.coordinator.resetStore(database: "myapp_test")
    /// ```
    ///
    /// - Throws: `StoreResetError` when `database` is not the connected database's name
    ///   (nothing is deleted), `PostgresError` (a lock wait beyond `lockTimeout`, a
    ///   missing `TRUNCATE` right).
    public func resetStore(database: String) throws {
        let tables = model.entities.map(\.quotedTable)
            + model.joinTables.map { Connection.quoteIdentifier($0.table.tableName) }
            + [Connection.quoteIdentifier(ChangeLog.table)]
        try pool.withConnection { connection in
            let connected = try connection.query("SELECT current_database()")[0].decode(String.self, at: 0)
            guard connected == database else {
                throw StoreResetError(connectedDatabase: connected, requestedDatabase: database)
            }
            _ = try connection.execute("TRUNCATE \(tables.joined(separator: ", ")) RESTART IDENTITY")
        }
    }
}
