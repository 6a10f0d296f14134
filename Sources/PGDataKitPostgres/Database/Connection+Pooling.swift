internal import CLibPQ
import Synchronization

/// What the library told this process once about pooled connections, by message.
private let toldOnce = Mutex<Set<String>>([])

extension Connection {
    /// Whether a connection pooler (such as PgBouncer) sits between this connection and
    /// the server, as seen at connect: the server process id libpq got at startup
    /// (`backendPID`) is not the one the server reports, because poolers give their
    /// clients an id of their own. Through a pooler, `backendPID` is that id, not a
    /// server process's.
    ///
    /// For example:
    ///
    /// ```swift
    /// let connection = try Connection(url: "postgres://app@pgbouncer:6432/app")
    /// print(connection.isBehindPooler)   // true
    /// ```
    public var isBehindPooler: Bool {
        lock.lock()
        defer { lock.unlock() }
        return detectedPooler
    }

    /// The pooling mode in effect: `ConnectionConfiguration.pooling` when set, otherwise
    /// `.transaction` when a pooler was detected at connect (`isBehindPooler`) and
    /// `.session` when not. Never `.automatic`.
    ///
    /// For example:
    ///
    /// ```swift
    /// if connection.pooling == .transaction {
    ///     // no LISTEN here: each transaction may run in another server process
    /// }
    /// ```
    public var pooling: ConnectionPooling {
        lock.lock()
        defer { lock.unlock() }
        return effectivePooling
    }

    /// Settles the pooling mode of a new session: through a transaction pooler, no named
    /// prepared statements and the library's settings per transaction. Call under `lock`.
    func configurePooling(behindPooler: Bool) throws {
        detectedPooler = behindPooler
        switch configuration.pooling {
        case .automatic: effectivePooling = behindPooler ? .transaction : .session
        case .session, .transaction: effectivePooling = configuration.pooling
        }
        guard effectivePooling == .transaction else {
            transactionSettings = nil
            if preparedStatements.capacity != max(0, configuration.preparedStatementCacheSize) {
                preparedStatements = PreparedStatementCache(capacity: configuration.preparedStatementCacheSize)
            }
            return
        }
        // A named statement would be prepared in one server process and looked for in
        // another: statements go unnamed (parsed with each execution).
        preparedStatements = PreparedStatementCache(capacity: 0)
        var settings = ["set_config('bytea_output', 'hex', true)", "set_config('extra_float_digits', '3', true)"]
        if let milliseconds = configuration.lockTimeoutMilliseconds {
            settings.append("set_config('lock_timeout', '\(milliseconds)', true)")
        }
        transactionSettings = "SELECT " + settings.joined(separator: ", ")
        tellOnce(
            "connections to \(configuration) go through a connection pooler in transaction mode"
                + (configuration.pooling == .automatic ? " (detected)" : "")
                + ": named prepared statements are off, and lock_timeout, bytea_output and "
                + "extra_float_digits are set in every transaction; set ConnectionConfiguration.pooling "
                + "to .session for a pooler in session mode")
        try checkServerDefaults()
    }

    /// Statements outside a transaction run with the server's defaults through a
    /// transaction pooler: says once when those would not read back right. Call under
    /// `lock`.
    private func checkServerDefaults() throws {
        let handle = try requireHandle()
        let sql = "SELECT name, reset_val FROM pg_settings WHERE name IN ('bytea_output', 'extra_float_digits', 'DateStyle')"
        let rows = try check(PQexec(handle, sql), handle: handle, sql: sql, parameters: [])
        for row in rows {
            let name = try row.decode(String.self, at: 0)
            let value = try row.decode(String.self, at: 1)
            let (wrong, wanted): (Bool, String)
            switch name {
            case "bytea_output": (wrong, wanted) = (value != "hex", "hex")
            case "DateStyle": (wrong, wanted) = (!value.hasPrefix("ISO"), "ISO")
            default: (wrong, wanted) = ((Int(value) ?? 1) < 1, "3")
            }
            if wrong {
                tellOnce(
                    "\(name) is '\(value)' by default on \(configuration), and through a transaction pooler "
                        + "statements outside a transaction run with the default: set it for the role "
                        + "(ALTER ROLE … SET \(name) = '\(wanted)')",
                    warning: true)
            }
        }
    }

    /// Logs a message the first time this process meets it (one line per process, not
    /// per connection).
    private func tellOnce(_ message: String, warning: Bool = false) {
        guard toldOnce.withLock({ $0.insert(message).inserted }) else { return }
        if warning { logger.warning("\(message)") } else { logger.notice("\(message)") }
    }

    /// The statements that open a transaction: its `BEGIN`, through a transaction pooler
    /// the transaction's settings, and what the transaction sets for itself
    /// (`pendingBeginSettings`, taken). Call under `lock`.
    func beginStatements(_ begin: String) -> [PipelineStatement] {
        let own = pendingBeginSettings
        pendingBeginSettings = nil
        // (Appended one by one: a concatenation of mapped arrays was three allocations.)
        var statements: [PipelineStatement] = [PipelineStatement(sql: begin)]
        if let transactionSettings { statements.append(PipelineStatement(sql: transactionSettings)) }
        if let own { statements.append(PipelineStatement(sql: own)) }
        return statements
    }
}
