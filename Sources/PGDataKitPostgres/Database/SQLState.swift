/// A five-character PostgreSQL error code (SQLSTATE), with named constants for the codes
/// programs most often match on.
///
/// For example:
///
/// ```swift
/// do {
///     try connection.execute("INSERT INTO users (user_id) VALUES ($1)", ["u1"])
/// } catch SQLState.uniqueViolation {
///     // the remote id exists already
/// }
/// ```
///
/// A code stands as a `catch` pattern for a `PostgresError` with that SQLSTATE, as error
/// codes do (`ErrorCode`); `catch let error as PostgresError where error.sqlState ==
/// .uniqueViolation` is the same with the error bound. Unlike error codes, an SQLSTATE can
/// be made from any five characters (`SQLState(rawValue: "23P01")`): the server has
/// hundreds of codes, and a program may match one this type does not name.
public struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The five-character code, such as `"23505"`.
    public let rawValue: String

    /// Wraps a five-character code.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The code itself.
    public var description: String { rawValue }

    /// The two-character class of the code, such as `"23"` for integrity violations.
    public var errorClass: String { String(rawValue.prefix(2)) }

    /// `23505`: a unique constraint or index was violated.
    public static let uniqueViolation = SQLState(rawValue: "23505")
    /// `23503`: a foreign key constraint was violated.
    public static let foreignKeyViolation = SQLState(rawValue: "23503")
    /// `23502`: a NULL was written to a `NOT NULL` column.
    public static let notNullViolation = SQLState(rawValue: "23502")
    /// `23514`: a check constraint was violated.
    public static let checkViolation = SQLState(rawValue: "23514")
    /// `40001`: a serializable or repeatable-read transaction could not be serialised.
    public static let serializationFailure = SQLState(rawValue: "40001")
    /// `40P01`: the transaction was chosen as the victim of a deadlock.
    public static let deadlockDetected = SQLState(rawValue: "40P01")
    /// `42601`: the statement has a syntax error.
    public static let syntaxError = SQLState(rawValue: "42601")
    /// `42P01`: a table or view does not exist.
    public static let undefinedTable = SQLState(rawValue: "42P01")
    /// `42703`: a column does not exist.
    public static let undefinedColumn = SQLState(rawValue: "42703")
    /// `42P07`: a table or other relation exists already.
    public static let duplicateTable = SQLState(rawValue: "42P07")
    /// `22P02`: a value has the wrong text representation for its type.
    public static let invalidTextRepresentation = SQLState(rawValue: "22P02")
    /// `22003`: a numeric value is out of range for its type.
    public static let numericValueOutOfRange = SQLState(rawValue: "22003")
    /// `25P02`: a statement was sent inside a transaction that has failed already.
    public static let inFailedTransaction = SQLState(rawValue: "25P02")
    /// `22023`: a function argument is not acceptable (among others, a transaction id
    /// "in the future" given to `pg_xact_status`).
    public static let invalidParameterValue = SQLState(rawValue: "22023")
    /// `57P01`: the server process was terminated by an administrator
    /// (`pg_terminate_backend`).
    public static let adminShutdown = SQLState(rawValue: "57P01")
    /// `57014`: the statement was cancelled (statement timeout or a cancel request).
    public static let queryCanceled = SQLState(rawValue: "57014")
    /// `3D000`: the database does not exist.
    public static let invalidCatalogName = SQLState(rawValue: "3D000")
    /// `28P01`: password authentication failed.
    public static let invalidPassword = SQLState(rawValue: "28P01")
    /// `42501`: the role lacks a privilege the statement needs.
    public static let insufficientPrivilege = SQLState(rawValue: "42501")
    /// `55P03`: a lock could not be obtained (`NOWAIT` or `lock_timeout`).
    public static let lockNotAvailable = SQLState(rawValue: "55P03")
    /// `26000`: the named prepared statement does not exist (dropped by `DISCARD ALL` or
    /// `DEALLOCATE`, or a connection pooler moved the session to another server process).
    public static let invalidSQLStatementName = SQLState(rawValue: "26000")
    /// `0A000`: a feature is not supported; among others, a prepared statement's result
    /// columns changed since it was prepared ("cached plan must not change result type").
    public static let featureNotSupported = SQLState(rawValue: "0A000")

    /// Whether `error` is a `PostgresError` with this SQLSTATE: lets a code stand as a
    /// `catch` or `case` pattern (`catch SQLState.uniqueViolation { … }`).
    ///
    /// - Parameters:
    ///   - state: The SQLSTATE to look for.
    ///   - error: The thrown error; any error but a `PostgresError` never matches.
    public static func ~= (state: SQLState, error: any Error) -> Bool {
        (error as? PostgresError)?.sqlState == state
    }

    /// Whether retrying the whole transaction may succeed: serialisation failures,
    /// deadlocks, a lock wait that ran past `lock_timeout` (`55P03`), and a prepared
    /// statement the session no longer has (`26000`: the connection forgets its prepared
    /// statements then and prepares them again).
    public var isTransient: Bool {
        self == .serializationFailure || self == .deadlockDetected || self == .lockNotAvailable
            || self == .invalidSQLStatementName
    }
}
