/// An error from PostgreSQL or from the connection to it.
///
/// Server errors carry the SQLSTATE, the server's message, detail and hint, and the
/// statement that failed. Connection failures say which server was asked
/// (host, port, database, user — never the password) and why it failed.
///
/// For example:
///
/// ```swift
/// do {
///     try connection.execute("SELECT * FROM missing")
/// } catch let error as PostgresError {
///     print(error.sqlState == .undefinedTable)  // true
///     print(error)  // server error 42P01: relation "missing" does not exist …
/// }
/// ```
///
/// The description never shows bound parameter values (they may be personal data);
/// `debugDescription` does. A `catch` clause can match the SQLSTATE or the kind without
/// binding the error: `catch SQLState.uniqueViolation { … }`,
/// `catch PostgresError.Code.connectionLost { … }`.
public struct PostgresError: Error, Sendable, DescribedError {
    /// What went wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add kinds
    /// without breaking a caller's `switch` (which therefore needs a `default:`), as
    /// postgres-nio's `PSQLError.Code` does. Compare with `==`, match in a `switch`, or
    /// let a kind stand as a `catch` pattern: `catch PostgresError.Code.connectionLost
    /// { … }` (see `ErrorCode`); it is backed by an internal enum.
    public struct Kind: ErrorCode {
        /// The kinds, one case each: kinds compare by case and none is made from a string.
        enum Base: String, Sendable {
            case server, connectionFailed, connectionLost, connectionClosed, client
        }

        /// Which kind this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The server rejected a statement; see `sqlState`, `message`, `detail`, `hint`.
        public static let server = Kind(.server)
        /// A connection could not be opened; see `connectionFailureReason`.
        public static let connectionFailed = Kind(.connectionFailed)
        /// An open connection broke (the server went away or the backend was terminated).
        public static let connectionLost = Kind(.connectionLost)
        /// The connection was closed by this program and cannot be used.
        public static let connectionClosed = Kind(.connectionClosed)
        /// libpq reported a client-side failure (out of memory, protocol trouble, bad
        /// state).
        public static let client = Kind(.client)

        /// The kind's name, such as `connectionLost`.
        public var description: String { base.rawValue }
    }

    /// Why a connection could not be opened.
    ///
    /// A struct of named values rather than an enum, like `Kind`, so later versions can
    /// tell more reasons apart without breaking a caller's `switch`; backed by an
    /// internal enum.
    public struct ConnectionFailureReason: Sendable, Hashable, CustomStringConvertible {
        /// The reasons, one case each: reasons compare by case and none is made from a
        /// string.
        enum Base: String, Sendable {
            case hostNotFound, connectionRefused, authenticationFailed, databaseDoesNotExist, timeout, other
        }

        /// Which reason this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// How the description says it, such as `host not found`.
        var phrase: String {
            switch base {
            case .hostNotFound: return "host not found"
            case .connectionRefused: return "connection refused"
            case .authenticationFailed: return "authentication failed"
            case .databaseDoesNotExist: return "database does not exist"
            case .timeout: return "timeout"
            case .other: return "connection failed"
            }
        }

        /// The host name could not be resolved.
        public static let hostNotFound = ConnectionFailureReason(.hostNotFound)
        /// Nothing accepts connections at the host and port.
        public static let connectionRefused = ConnectionFailureReason(.connectionRefused)
        /// The server rejected the credentials.
        public static let authenticationFailed = ConnectionFailureReason(.authenticationFailed)
        /// The database does not exist on the server.
        public static let databaseDoesNotExist = ConnectionFailureReason(.databaseDoesNotExist)
        /// The server did not answer in time.
        public static let timeout = ConnectionFailureReason(.timeout)
        /// The server refused for another reason (too many connections, shutting down…).
        public static let other = ConnectionFailureReason(.other)

        /// The reason's name, such as `hostNotFound`.
        public var description: String { base.rawValue }
    }

    /// Where a failed connection tried to go. The password is never kept.
    public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
        /// The host name or socket directory.
        public internal(set) var host: String
        /// The port.
        public internal(set) var port: String
        /// The database name.
        public internal(set) var database: String
        /// The user name.
        public internal(set) var user: String

        /// `user@host:port/database`.
        public var description: String { "\(user)@\(host):\(port)/\(database)" }
    }

    /// The broad kind of failure.
    public internal(set) var kind: Kind

    /// The kind, as every PGDataKit error calls it: `PostgresError.Code.connectionLost`
    /// is `PostgresError.Kind.connectionLost`.
    public typealias Code = Kind

    /// The broad kind of failure (`kind`), under the name every PGDataKit error gives its
    /// code: `catch PostgresError.Code.connectionLost { … }` matches it.
    public var code: Kind { kind }
    /// The SQLSTATE code of a server error (also set for some connection failures).
    public internal(set) var sqlState: SQLState?
    /// The primary message (from the server or from libpq).
    public internal(set) var message: String
    /// The server's detail line, if any.
    public internal(set) var detail: String?
    /// The server's hint, if any.
    public internal(set) var hint: String?
    /// The statement that failed, if a statement was running.
    public package(set) var statement: String?
    /// The name of the constraint involved, if the server reported one.
    public internal(set) var constraint: String?
    /// The table involved, if the server reported one.
    public package(set) var table: String?
    /// The column involved, if the server reported one.
    public package(set) var column: String?
    /// Where in the statement's text the server located the error: a 1-based index
    /// counted in characters (Unicode code points), not bytes; `nil` when the server
    /// gave none (most errors that are not about the text, such as a unique violation).
    public internal(set) var position: Int?
    /// The endpoint of a failed connection.
    public internal(set) var endpoint: Endpoint?
    /// Why a connection could not be opened (for `.connectionFailed`).
    public internal(set) var connectionFailureReason: ConnectionFailureReason?
    /// Whether the transaction this error interrupted is known not to have committed.
    ///
    /// PGDataKit sets it on a lost connection of a save that it made sure of: the
    /// connection broke before the `COMMIT` was sent, or after, and a new connection
    /// found the transaction rolled back. Such an error is transient (`isTransient`):
    /// redoing the work cannot apply it twice. A lost connection whose `COMMIT` may have
    /// run is never reported this way (see `SaveOutcomeUnknownError`).
    public internal(set) var transactionDidNotCommit = false
    /// A redacted rendering of the bound parameters, shown only by `debugDescription`.
    package var parameterDescriptions: [String]?

    /// Creates an error; the library makes these, tests and wrappers may too.
    public init(
        kind: Kind, sqlState: SQLState? = nil, message: String, detail: String? = nil,
        hint: String? = nil, statement: String? = nil
    ) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.statement = statement
    }

    /// Whether the connection that raised this error is unusable now.
    public var isConnectionError: Bool {
        if kind == .connectionFailed || kind == .connectionLost || kind == .connectionClosed { return true }
        // 57P01..57P03 and class 08 mean the session is gone.
        return sqlState?.errorClass == "08" || sqlState == .adminShutdown
    }

    /// Whether retrying the whole transaction may succeed and cannot apply it twice: a
    /// serialisation failure, a deadlock (see `SQLState.isTransient`), or a lost
    /// connection whose transaction is known not to have committed
    /// (`transactionDidNotCommit`).
    public var isTransient: Bool { (sqlState?.isTransient ?? false) || transactionDidNotCommit }

    /// This error as a lost connection whose transaction is known not to have committed.
    package func notCommitted() -> PostgresError {
        var error = self
        if !error.isConnectionError { error.kind = .connectionLost }
        error.transactionDidNotCommit = true
        return error
    }

    /// One line for logs: kind, SQLSTATE, message, detail, hint and the statement —
    /// without data: the detail of integrity violations (class 23, which quotes keys and
    /// rows) is withheld, and quoted values in data exceptions' messages (class 22) are
    /// blanked. `debugDescription` has them, and the bound parameters.
    public var description: String {
        var text: String
        switch kind {
        case .server:
            text = "server error \(sqlState?.rawValue ?? "?????"): \(redactedMessage)"
        case .connectionFailed:
            let reason = connectionFailureReason?.phrase ?? "connection failed"
            let target = endpoint.map { " to \($0)" } ?? ""
            text = "could not connect\(target) (\(reason)): \(message)"
        case .connectionLost:
            text = "connection lost: \(message)"
        case .connectionClosed:
            text = "connection closed: \(message)"
        default:
            text = "client error: \(message)"
        }
        if let detail, !detail.isEmpty {
            text += carriesRowData ? " — detail withheld (may hold row data)" : " — detail: \(detail)"
        }
        if let hint, !hint.isEmpty { text += " — hint: \(hint)" }
        if let statement { text += " — in: \(statement)" }
        if transactionDidNotCommit { text += " — the transaction did not commit" }
        return text
    }

    /// Whether the server's message and detail may quote data: integrity violations
    /// (class 23) put the key or the whole failing row in the detail, data exceptions
    /// (class 22) quote the value that did not fit or parse. `description` leaves such
    /// data out; `message`, `detail` and `debugDescription` keep it.
    var carriesRowData: Bool {
        guard kind == .server, let errorClass = sqlState?.errorClass else { return false }
        return errorClass == "23" || errorClass == "22"
    }

    /// `message`, with the quoted parts of a data exception's message blanked
    /// (`invalid input syntax for type integer: "…"`).
    var redactedMessage: String {
        guard carriesRowData, sqlState?.errorClass == "22" else { return message }
        var result = ""
        var quoted = false
        for character in message {
            if character == "\"" {
                result.append(quoted ? "…\"" : "\"")
                quoted.toggle()
            } else if !quoted {
                result.append(character)
            }
        }
        if quoted { result.append("…") }
        return result
    }

    /// What `debugDescription` shows after `PostgresError.kind: `: the description
    /// (statement, hint, endpoint), followed by what it withholds as context fields.
    package var debugMessage: String { description }

    /// What the description leaves out: the names the server reported, and (shown only by
    /// `debugDescription`) the server's full message and detail where they may quote row
    /// data, and the bound parameters.
    package var contextFields: [ErrorContextField?] {
        [
            .name("constraint", constraint), .name("table", table), .name("column", column),
            .name("position", position),
            carriesRowData ? .value("message", message, limit: nil) : nil,
            carriesRowData ? .value("detail", detail.flatMap { $0.isEmpty ? nil : $0 }, limit: nil) : nil,
            .values("parameters", parameterDescriptions),
        ]
    }
}
