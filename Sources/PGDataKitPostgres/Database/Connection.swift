internal import CLibPQ
import Foundation
import Logging

/// One session with a PostgreSQL server, through libpq.
///
/// A connection runs parameterised statements (values are always bound, never spliced
/// into the SQL), transactions, `COPY … FROM STDIN` and `LISTEN`/`NOTIFY`. Only one
/// thread uses the underlying `PGconn` at a time: every call takes the connection's
/// lock, and `transaction(_:)` holds it for the whole transaction, so other threads wait.
/// The same thread may call in again from inside a transaction.
///
/// For example:
///
/// ```swift
/// let connection = try Connection(url: "postgres://app@localhost/app")
/// try connection.execute(
///     "INSERT INTO users (user_id, name) VALUES ($1, $2)", ["u1", "Ada"])
/// let count = try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0)
/// ```
///
/// Every new session is set to `DateStyle = ISO`, `bytea_output = hex`,
/// `extra_float_digits = 3` and UTF-8, which the value decoders rely on. Through a
/// connection pooler in transaction mode (`pooling`, detected at connect) these and
/// `lock_timeout` are set in every transaction the library begins, and no statement is
/// prepared by name.
public final class Connection: @unchecked Sendable {
    // Safe to share between threads: every access to `handle` and the counters happens
    // under `lock`, and libpq allows a PGconn to move between threads as long as one
    // thread uses it at a time.
    let lock = NSRecursiveLock()
    var handle: OpaquePointer?
    /// Where this connection goes.
    public let configuration: ConnectionConfiguration
    let logger: Logger
    /// How many statements were sent. Under `lock`.
    var executedStatements = 0
    /// A `BEGIN` to send with the next statement (`beginWithNextStatement`). Under `lock`.
    var pendingBegin: String?
    /// What the transaction of `pendingBegin` sets for itself (`beginWithNextStatement`'s
    /// statement timeout), sent right after its `BEGIN`. Under `lock`.
    var pendingBeginSettings: String?
    /// Set when the server sent a FATAL error outside a query: the session is over.
    var serverEndedSession = false
    /// Work to do once while the server runs the next pipeline. Under `lock`.
    var workWhileWaiting: (() -> Void)?
    /// This session's named prepared statements. Under `lock`.
    var preparedStatements: PreparedStatementCache
    /// Whether a pooler sits between this session and the server (seen at connect).
    /// Under `lock`.
    var detectedPooler = false
    /// The pooling mode in effect (`configuration.pooling`, or what was detected).
    /// Under `lock`.
    var effectivePooling = ConnectionPooling.session
    /// A statement that sets, for the current transaction only, what the library relies
    /// on; sent after every `BEGIN` when each transaction may run in another server
    /// process. Under `lock`.
    var transactionSettings: String?
    /// Guards `cancelKey`, which cancel requests from other threads read while `lock` is
    /// held by the statement they stop.
    let cancelLock = NSLock()
    /// What a cancel request for this session carries (libpq's `PGcancel`). Under
    /// `cancelLock`.
    var cancelKey: OpaquePointer?
    /// The statement timer, when a metrics backend was bootstrapped before this opened.
    let statementMetrics: StatementMetrics?

    /// Opens a connection from a `postgres://` URL or a libpq `key=value` string.
    ///
    /// - Throws: `PostgresError` with kind `.connectionFailed`, naming host, port,
    ///   database and user and saying why (host not found, refused, authentication
    ///   failed, database does not exist, a URL scheme other than `postgres://` or
    ///   `postgresql://`); the password never appears in it.
    public convenience init(url: String, logger: Logger = Logger(label: "pgdatakit.connection")) throws {
        try self.init(ConnectionConfiguration(url), logger: logger)
    }

    /// Opens a connection for a configuration.
    ///
    /// - Throws: `PostgresError` with kind `.connectionFailed`.
    public init(
        _ configuration: ConnectionConfiguration,
        logger: Logger = Logger(label: "pgdatakit.connection")
    ) throws {
        self.configuration = configuration
        self.logger = logger
        self.statementMetrics = StatementMetrics()
        self.preparedStatements = PreparedStatementCache(capacity: configuration.preparedStatementCacheSize)
        self.handle = try Connection.open(configuration)
        setCancelKey(for: handle)
        do {
            try setUpSession()
        } catch {
            close()
            throw error
        }
        logger.debug("connected", metadata: ["server": "\(configuration)"])
    }

    deinit {
        if let cancelKey { PQfreeCancel(cancelKey) }
        if let handle { PQfinish(handle) }
    }

    private static func open(_ configuration: ConnectionConfiguration) throws -> OpaquePointer {
        if let problem = configuration.schemeProblem {
            var error = PostgresError(kind: .connectionFailed, message: problem)
            error.connectionFailureReason = .other
            throw error
        }
        var pairs: [(String, String)] = [
            ("dbname", configuration.connectionString),
            ("client_encoding", "UTF8"),
            ("fallback_application_name", "pgdatakit"),
        ]
        for key in configuration.overrides.keys.sorted() {
            pairs.append((key, configuration.overrides[key] ?? ""))
        }
        let keywords = pairs.map { strdup($0.0) }
        let values = pairs.map { strdup($0.1) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        var keywordPointers: [UnsafePointer<CChar>?] = keywords.map { UnsafePointer($0) } + [nil]
        var valuePointers: [UnsafePointer<CChar>?] = values.map { UnsafePointer($0) } + [nil]
        let connection = keywordPointers.withUnsafeMutableBufferPointer { keys in
            valuePointers.withUnsafeMutableBufferPointer { values in
                PQconnectdbParams(keys.baseAddress, values.baseAddress, 1)
            }
        }
        guard let connection else {
            throw PostgresError(kind: .client, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let error = connectionFailure(connection, configuration: configuration)
            PQfinish(connection)
            throw error
        }
        return connection
    }

    private static func connectionFailure(
        _ connection: OpaquePointer, configuration: ConnectionConfiguration
    ) -> PostgresError {
        // libpq quotes the connection string (or a part of it) in some parse errors:
        // never let the password through.
        let message = configuration.redacting(
            String(cString: PQerrorMessage(connection)).trimmingCharacters(in: .whitespacesAndNewlines))
        var error = PostgresError(kind: .connectionFailed, message: message)
        let parameters = configuration.parameters() ?? [:]
        func text(_ value: UnsafeMutablePointer<CChar>?) -> String? {
            guard let value else { return nil }
            let string = configuration.redacting(String(cString: value))
            return string.isEmpty ? nil : string
        }
        let user = text(PQuser(connection)) ?? parameters["user"] ?? "<default user>"
        error.endpoint = PostgresError.Endpoint(
            host: text(PQhost(connection)) ?? parameters["host"] ?? "localhost",
            port: text(PQport(connection)) ?? parameters["port"] ?? "5432",
            database: text(PQdb(connection)) ?? parameters["dbname"] ?? user,
            user: user)
        let lowered = message.lowercased()
        if lowered.contains("could not translate host name")
            || lowered.contains("name or service not known")
        {
            error.connectionFailureReason = .hostNotFound
        } else if lowered.contains("connection refused") || lowered.contains("no such file or directory") {
            error.connectionFailureReason = .connectionRefused
        } else if lowered.contains("password authentication failed")
            || lowered.contains("no password supplied") || lowered.contains("authentication failed")
            || lowered.contains("no pg_hba.conf entry")
        {
            error.connectionFailureReason = .authenticationFailed
            error.sqlState = .invalidPassword
        } else if lowered.contains("database") && lowered.contains("does not exist") {
            error.connectionFailureReason = .databaseDoesNotExist
            error.sqlState = .invalidCatalogName
        } else if lowered.contains("timeout") {
            error.connectionFailureReason = .timeout
        } else {
            error.connectionFailureReason = .other
        }
        return error
    }

    private func setUpSession() throws {
        if let handle {
            // Server notices (such as "table does not exist, skipping") go to the logger
            // at debug level instead of libpq's default of printing to standard error. An
            // idle session's FATAL error (pg_terminate_backend, server shutdown) also
            // arrives here, as libpq treats an error outside a query as a notice: it
            // marks the session as ended.
            serverEndedSession = false
            let context = Unmanaged.passUnretained(self).toOpaque()
            PQsetNoticeReceiver(handle, { context, result in
                guard let context, let result else { return }
                let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
                let severity = PQresultErrorField(result, Int32(UInt8(ascii: "V"))).map { String(cString: $0) }
                if severity == "FATAL" || severity == "PANIC" {
                    // Called from inside a libpq call, which runs under `lock`.
                    connection.serverEndedSession = true
                }
                let message = String(cString: PQresultErrorMessage(result))
                connection.logger.debug(
                    "server notice: \(message.trimmingCharacters(in: .whitespacesAndNewlines))")
            }, context)
        }
        var settings = "SET DateStyle TO ISO; SET bytea_output TO hex; SET extra_float_digits TO 3"
        if let milliseconds = configuration.lockTimeoutMilliseconds { settings += "; SET lock_timeout TO \(milliseconds)" }
        // In the same round trip, the server process's id as the server sees it: a pooler
        // gives its clients an id of its own (see `ConnectionPooling.automatic`).
        lock.lock()
        defer { lock.unlock() }
        let handle = try requireHandle()
        executedStatements += 1
        let result = try check(
            PQexec(handle, settings + "; SELECT pg_backend_pid()"), handle: handle, sql: settings, parameters: [])
        try configurePooling(behindPooler: try result[0].decode(Int32.self, at: 0) != PQbackendPID(handle))
    }

    /// Closes the session. Later calls throw `PostgresError` with kind
    /// `.connectionClosed`. Closing twice is harmless.
    ///
    /// Called from another thread while a statement runs, it first asks the server to
    /// stop that statement (libpq's cancel request; its caller gets a `PostgresError`
    /// with SQLSTATE `57014`) and closes once it has, rather than waiting for it to end.
    /// A transaction held on another thread between statements (`transaction(_:)`) is
    /// waited for.
    public func close() {
        if !lock.try() {
            requestCancel()
            lock.lock()
        }
        defer { lock.unlock() }
        pendingBegin = nil
        pendingBeginSettings = nil
        preparedStatements.removeAll()
        setCancelKey(for: nil)
        if let handle {
            PQfinish(handle)
            self.handle = nil
            logger.debug("closed", metadata: ["server": "\(configuration)"])
        }
    }

    /// Whether `close()` was called.
    public var isClosed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return handle == nil
    }

    /// Whether libpq still considers the session usable. A session whose server process
    /// was terminated is noticed once data (the termination message) has arrived; this
    /// property reads any such pending input without blocking.
    public var isUsable: Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let handle, PQstatus(handle) == CONNECTION_OK else { return false }
        let socket = PQsocket(handle)
        guard socket >= 0 else { return false }
        // A terminated backend leaves its FATAL message and then end-of-file on the
        // socket; the message reaches the notice receiver once parsed, the end-of-file
        // fails the read after it. An idle session costs one readiness check (a pool
        // asks this at every acquire and release).
        let read = Self.readArrivedInput(limit: 4, readable: { pgdatakit_wait_readable(socket, 0) == 1 }) {
            guard PQconsumeInput(handle) != 0 else { return false }
            _ = PQisBusy(handle)  // parses what arrived, reporting errors to the receiver
            return true
        }
        return read && PQstatus(handle) == CONNECTION_OK && !serverEndedSession
    }

    /// Reads input that has already arrived, without waiting: while `readable()` says
    /// more is there, `read()`, at most `limit` times; stops at the first check that finds
    /// nothing (`isUsable`'s loop once checked four times whatever it found, four `poll`
    /// calls where one said the socket was quiet). Returns `false` when a read failed.
    package static func readArrivedInput(limit: Int, readable: () -> Bool, read: () -> Bool) -> Bool {
        for _ in 0..<limit {
            guard readable() else { return true }
            guard read() else { return false }
        }
        return true
    }

    /// The process id of the server process serving this session (for
    /// `pg_terminate_backend` or `pg_stat_activity`).
    public var backendPID: Int32 {
        lock.lock()
        defer { lock.unlock() }
        return handle.map { PQbackendPID($0) } ?? 0
    }

    /// The server's version number, such as `150004` for 15.4.
    public var serverVersion: Int {
        lock.lock()
        defer { lock.unlock() }
        return handle.map { Int(PQserverVersion($0)) } ?? 0
    }

    /// How many statements this connection has sent (for tests and statistics).
    public var statementCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return executedStatements
    }

    /// Closes and reopens the session with the same configuration (after the server
    /// dropped it, for example). `LISTEN`s and session settings are gone afterwards.
    ///
    /// - Throws: `PostgresError` with kind `.connectionFailed`.
    public func reconnect() throws {
        lock.lock()
        defer { lock.unlock() }
        if let handle { PQfinish(handle) }
        handle = nil
        pendingBegin = nil
        pendingBeginSettings = nil
        preparedStatements.removeAll()
        setCancelKey(for: nil)
        handle = try Connection.open(configuration)
        setCancelKey(for: handle)
        try setUpSession()
    }

    /// The open handle, or an error saying the connection is closed. Call under `lock`.
    func requireHandle() throws -> OpaquePointer {
        guard let handle else {
            throw PostgresError(kind: .connectionClosed, message: "the connection was closed")
        }
        return handle
    }

    /// Runs one statement with bound parameters and returns its rows.
    ///
    /// Parameters are `$1`, `$2`, … in the SQL; pass `nil` for `NULL`.
    ///
    /// - Throws: `PostgresError` (kind `.server` with the SQLSTATE, or
    ///   `.connectionLost`), or `PostgresValueError` when a parameter cannot be encoded.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws -> QueryResult {
        try execute(sql, parameters, reusesPlan: true)
    }

    /// Runs one statement with bound parameters; with `reusesPlan` false it is never
    /// prepared by name, so the server plans it at each execution for the table as it is
    /// then (see `PreparedStatementCache` for why some statements need that).
    ///
    /// - Throws: as `execute(_:_:)`.
    @discardableResult
    package func execute(_ sql: String, _ parameters: [(any PostgresEncodable)?], reusesPlan: Bool) throws -> QueryResult {
        try cancellable(.statement) { try sendStatement(sql, parameters, reusesPlan: reusesPlan) }
    }

    /// `execute(_:_:reusesPlan:)` inside the cancellation scope (and a `COPY`'s start).
    func sendStatement(_ sql: String, _ parameters: [(any PostgresEncodable)?], reusesPlan: Bool) throws -> QueryResult {
        let (encoded, storage) = try Connection.encode(parameters)
        defer { free(storage) }
        lock.lock()
        defer { lock.unlock() }
        let handle = try requireHandle()
        if let begin = pendingBegin {
            pendingBegin = nil
            var statements = beginStatements(begin)
            statements.append(PipelineStatement(sql: sql, encoded: encoded, parameters: parameters, reusesPlan: reusesPlan))
            let results = try runPipeline(handle, statements)
            guard let result = results.last else { throw PostgresError(kind: .client, message: "no result", statement: sql) }
            return result
        }
        guard reusesPlan, !encoded.types.isEmpty, preparedStatements.capacity > 0 else {
            // Work to do while the statement runs (`doWhileWaiting`): sent as a pipeline of
            // one, which does it between sending and reading. (Not a statement without
            // parameters: a `COPY`'s start cannot go in a pipeline.)
            if workWhileWaiting != nil, !encoded.types.isEmpty {
                return try runPipeline(handle, [PipelineStatement(sql: sql, encoded: encoded, parameters: parameters, reusesPlan: false)])[0]
            }
            executedStatements += 1
            let result = encoded.withArguments { values, lengths, formats in
                sql.withCString { PQexecParams(handle, $0, encoded.count, encoded.types, values, lengths, formats, 0) }
            }
            return try check(result, handle: handle, sql: sql, parameters: parameters)
        }
        dropEvictedStatements(handle)
        let key = PreparedStatementCache.Key(sql: sql, types: encoded.types)
        guard let name = preparedStatements.name(for: key) else {
            // Not prepared yet: prepare and run in one round trip.
            return try runPipeline(handle, [PipelineStatement(sql: sql, encoded: encoded, parameters: parameters, reusesPlan: true)])[0]
        }
        executedStatements += 1
        let result = encoded.withArguments { values, lengths, formats in
            name.withCString { PQexecPrepared(handle, $0, encoded.count, values, lengths, formats, 0) }
        }
        do {
            return try check(result, handle: handle, sql: sql, parameters: parameters)
        } catch let error as PostgresError where forgetPreparedStatement(key, after: error) {
            // The server no longer has the statement, or its result type changed: with no
            // transaction open nothing was done, so prepare it again and rerun once.
            guard PQtransactionStatus(handle) == PQTRANS_IDLE else { throw error }
            return try runPipeline(handle, [PipelineStatement(sql: sql, encoded: encoded, parameters: parameters, reusesPlan: true)])[0]
        }
    }

    /// Sends the `DEALLOCATE`s of statements evicted from the cache, one by one, when no
    /// transaction is open (a failure inside one would fail the transaction). A
    /// statement the server no longer has counts as dropped; one that fails otherwise
    /// (the connection is in trouble) stays listed for the next time. Call under `lock`.
    func dropEvictedStatements(_ handle: OpaquePointer) {
        guard !preparedStatements.evicted.isEmpty, PQtransactionStatus(handle) == PQTRANS_IDLE else { return }
        var dropped: [String] = []
        for name in preparedStatements.evicted {
            guard let result = PQexec(handle, "DEALLOCATE \(Connection.quoteIdentifier(name))") else { break }
            let status = PQresultStatus(result)
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            PQclear(result)
            if status == PGRES_COMMAND_OK || state == SQLState.invalidSQLStatementName.rawValue { dropped.append(name) }
        }
        preparedStatements.deallocated(dropped)
    }

    /// Forgets the prepared statement of `key` when `error` says the server no longer has
    /// it (every statement is forgotten then: `DISCARD ALL` or a pooler drops them all) or
    /// that its result columns changed. Returns whether it did. Call under `lock`.
    func forgetPreparedStatement(_ key: PreparedStatementCache.Key, after error: PostgresError) -> Bool {
        switch error.sqlState {
        case .invalidSQLStatementName?:
            preparedStatements.removeAll()
        case .featureNotSupported?:
            preparedStatements.remove(key)
        default:
            return false
        }
        logger.debug("prepared statement dropped", metadata: ["sqlstate": "\(error.sqlState?.rawValue ?? "")"])
        return true
    }

    /// Opens a transaction with the next statement: its `BEGIN` is sent in the same
    /// round trip (a transaction's snapshot is taken at its first statement anyway).
    /// `commit()` or `rollback()` before any statement end it without a round trip;
    /// `transactionStatus` reports it as open.
    /// With a `statementTimeout`, the transaction sets its own `statement_timeout`
    /// (`set_config(…, true)`, sent with the `BEGIN`): a statement of it that runs longer
    /// fails with SQLSTATE `57014` (`query_canceled`), which aborts the transaction.
    package func beginWithNextStatement(
        isolation: IsolationLevel? = nil, readOnly: Bool = false, statementTimeout: Duration? = nil
    ) {
        lock.lock()
        defer { lock.unlock() }
        pendingBegin = Connection.beginSQL(isolation: isolation, readOnly: readOnly)
        pendingBeginSettings = statementTimeout.map {
            "SELECT set_config('statement_timeout', '\(Connection.milliseconds($0))', true)"
        }
    }

    /// A duration in whole milliseconds, at least 1 (PostgreSQL's 0 would mean no limit).
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000)
        guard !overflow, whole < Int64(Int32.max) else { return Int64(Int32.max) }
        return max(1, min(Int64(Int32.max), whole + attoseconds / 1_000_000_000_000_000))
    }

    /// Sends a `BEGIN` kept for the next statement on its own, for statements that cannot
    /// share a round trip (scripts, `COPY`). Call under `lock`.
    func sendPendingBegin() throws {
        guard let begin = pendingBegin else { return }
        pendingBegin = nil
        let handle = try requireHandle()
        executedStatements += 1
        let settings = [transactionSettings, pendingBeginSettings].compactMap { $0 }
        pendingBeginSettings = nil
        let sql = ([begin] + settings).joined(separator: "; ")
        _ = try check(PQexec(handle, sql), handle: handle, sql: sql, parameters: [])
    }

    /// Runs one statement with bound parameters and returns its rows; the same as
    /// `execute(_:_:)`, named for reading.
    ///
    /// - Throws: as `execute(_:_:)`.
    public func query(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws -> QueryResult {
        try execute(sql, parameters)
    }

    /// Runs SQL text that may hold several statements (a migration file, say), with no
    /// parameters, through the simple query protocol.
    ///
    /// - Throws: `PostgresError` for the first statement that fails; later statements
    ///   do not run.
    public func executeScript(_ sql: String) throws {
        try cancellable(.statement) {
            lock.lock()
            defer { lock.unlock() }
            try sendPendingBegin()
            let handle = try requireHandle()
            executedStatements += 1
            _ = try check(PQexec(handle, sql), handle: handle, sql: sql, parameters: [])
        }
    }

    /// Turns a libpq result into a `QueryResult` or a `PostgresError`. Call under `lock`.
    func check(
        _ result: OpaquePointer?, handle: OpaquePointer, sql: String,
        parameters: [(any PostgresEncodable)?]
    ) throws -> QueryResult {
        guard let result else {
            var error = PostgresError(
                kind: PQstatus(handle) == CONNECTION_BAD ? .connectionLost : .client,
                message: String(cString: PQerrorMessage(handle))
                    .trimmingCharacters(in: .whitespacesAndNewlines),
                statement: sql)
            error.parameterDescriptions = Connection.describe(parameters)
            throw error
        }
        let status = PQresultStatus(result)
        switch status {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_COPY_IN, PGRES_COPY_OUT:
            return QueryResult(handle: result)
        default:
            var error = Connection.serverError(result, handle: handle, statement: sql)
            error.parameterDescriptions = Connection.describe(parameters)
            PQclear(result)
            throw error
        }
    }

    static func serverError(_ result: OpaquePointer, handle: OpaquePointer, statement: String?) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let ascii = code.asciiValue, let value = PQresultErrorField(result, Int32(ascii)) else {
                return nil
            }
            return String(cString: value)
        }
        let sqlState = field("C").map(SQLState.init(rawValue:))
        let message =
            field("M")
            ?? String(cString: PQresultErrorMessage(result)).trimmingCharacters(
                in: .whitespacesAndNewlines)
        let lost = PQstatus(handle) == CONNECTION_BAD
        var error = PostgresError(
            kind: lost ? .connectionLost : (sqlState == nil ? .client : .server),
            sqlState: sqlState, message: message, detail: field("D"), hint: field("H"),
            statement: statement)
        error.constraint = field("n")
        error.table = field("t")
        error.column = field("c")
        error.position = field("P").flatMap { Int($0) }
        return error
    }

    static func describe(_ parameters: [(any PostgresEncodable)?]) -> [String] {
        parameters.map { parameter in
            guard let parameter, let text = try? parameter.postgresText() else { return "NULL" }
            return text.count > 80 ? "'" + text.prefix(80) + "…'" : "'" + text + "'"
        }
    }

    /// Quotes an identifier (table, column, channel name) for SQL: wraps it in double
    /// quotes and doubles any double quote inside, so any string is safe as a name.
    ///
    /// For example, `Connection.quoteIdentifier("user")` is `"user"` (with the quotes).
    public static func quoteIdentifier(_ identifier: String) -> String {
        // (Foundation's replacing is slow, and statements quote every column they name.)
        guard identifier.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + identifier + "\"" }
        return "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Quotes a possibly schema-qualified name given as its parts, such as
    /// `["public", "users"]` → `"public"."users"`.
    public static func quoteQualifiedName(_ parts: [String]) -> String {
        parts.map(quoteIdentifier).joined(separator: ".")
    }
}
