internal import CLibPQ

/// The isolation level of a transaction.
public enum IsolationLevel: String, Sendable, CaseIterable {
    /// Each statement sees what was committed before it started (PostgreSQL's default).
    case readCommitted = "READ COMMITTED"
    /// Every statement sees the snapshot taken at the first statement.
    case repeatableRead = "REPEATABLE READ"
    /// Repeatable read plus detection of anomalies between concurrent transactions.
    case serializable = "SERIALIZABLE"
}

/// Where a session stands with respect to transactions.
public enum TransactionStatus: Sendable, Equatable {
    /// Not in a transaction.
    case idle
    /// A statement is running.
    case active
    /// Inside a transaction that is still good.
    case inTransaction
    /// Inside a transaction that failed; only `ROLLBACK` is accepted.
    case inFailedTransaction
    /// The connection is broken or closed.
    case unknown
}

extension Connection {
    /// The session's transaction state, as libpq last saw it.
    public var transactionStatus: TransactionStatus {
        lock.lock()
        defer { lock.unlock() }
        guard let handle else { return .unknown }
        if pendingBegin != nil { return .inTransaction }  // (its BEGIN goes with the next statement)
        switch PQtransactionStatus(handle) {
        case PQTRANS_IDLE: return .idle
        case PQTRANS_ACTIVE: return .active
        case PQTRANS_INTRANS: return .inTransaction
        case PQTRANS_INERROR: return .inFailedTransaction
        default: return .unknown
        }
    }

    /// Starts a transaction.
    ///
    /// - Parameters:
    ///   - isolation: the isolation level; `nil` keeps the session's default.
    ///   - readOnly: whether the transaction may only read.
    /// - Throws: `PostgresError`.
    public func begin(isolation: IsolationLevel? = nil, readOnly: Bool = false) throws {
        lock.lock()
        defer { lock.unlock() }
        try execute(Connection.beginSQL(isolation: isolation, readOnly: readOnly))
        if let settings = transactionSettings { try execute(settings) }
    }

    /// `BEGIN ISOLATION LEVEL … READ ONLY`.
    static func beginSQL(isolation: IsolationLevel?, readOnly: Bool) -> String {
        // (Literals: a transaction's start builds no string.)
        switch (isolation, readOnly) {
        case (nil, false): "BEGIN"
        case (nil, true): "BEGIN READ ONLY"
        case (.readCommitted, false): "BEGIN ISOLATION LEVEL READ COMMITTED"
        case (.readCommitted, true): "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY"
        case (.repeatableRead, false): "BEGIN ISOLATION LEVEL REPEATABLE READ"
        case (.repeatableRead, true): "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        case (.serializable, false): "BEGIN ISOLATION LEVEL SERIALIZABLE"
        case (.serializable, true): "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY"
        }
    }

    /// Commits the current transaction.
    ///
    /// - Throws: `PostgresError`; also when the transaction had failed and PostgreSQL
    ///   rolled it back instead of committing (SQLSTATE `25P02`).
    public func commit() throws {
        if takePendingBegin() { return }  // nothing ran in it
        let result = try execute("COMMIT")
        if result.commandTag == "ROLLBACK" {
            throw PostgresError(
                kind: .server, sqlState: .inFailedTransaction,
                message: "the transaction had failed and was rolled back instead of committed",
                statement: "COMMIT")
        }
    }

    /// Rolls back the current transaction. Harmless outside a transaction. It runs even
    /// when the work calling it was cancelled.
    ///
    /// - Throws: `PostgresError` when the connection is gone.
    public func rollback() throws {
        if takePendingBegin() { return }  // nothing ran in it
        try StatementCancellation.run(nil) { _ = try execute("ROLLBACK") }
    }

    /// Whether the transaction's `BEGIN` still waits for its first statement: the server
    /// has not started it, so it has nothing to commit.
    package var beginIsPending: Bool {
        lock.lock()
        defer { lock.unlock() }
        return pendingBegin != nil
    }

    /// Drops a `BEGIN` kept for the next statement; whether there was one.
    private func takePendingBegin() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard pendingBegin != nil else { return false }
        pendingBegin = nil
        pendingBeginSettings = nil
        return true
    }

    /// Runs `body` in a transaction: commits when it returns, rolls back when it throws.
    /// Other threads wait for the connection until the transaction ends.
    ///
    /// For example:
    ///
    /// ```swift
    /// let id = try connection.transaction(isolation: .serializable) { connection in
    ///     try connection.query("INSERT INTO users (user_id) VALUES ($1) RETURNING id", ["u7"])[0]
    ///         .decode(Int.self, at: 0)
    /// }
    /// ```
    ///
    /// - Throws: whatever `body` throws (after the rollback), or `PostgresError` from
    ///   `BEGIN` / `COMMIT`.
    public func transaction<T>(
        isolation: IsolationLevel? = nil, readOnly: Bool = false,
        _ body: (Connection) throws -> T
    ) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        try begin(isolation: isolation, readOnly: readOnly)
        let value: T
        do {
            value = try body(self)
        } catch {
            if handle != nil, transactionStatus != .idle {
                do {
                    try rollback()
                } catch let rollbackError {
                    logger.debug("rollback after failure failed: \(rollbackError)")
                }
            }
            throw error
        }
        try commit()
        return value
    }
}
