extension StoreCoordinator {
    /// Runs a statement for a context, counting it.
    @discardableResult
    func execute(
        _ sql: String, _ parameters: [(any PostgresEncodable)?] = [], on connection: Connection, reusesPlan: Bool = true
    ) throws -> QueryResult {
        statementCounter.add(1, ordering: .relaxed)
        return try connection.execute(sql, parameters, reusesPlan: reusesPlan)
    }

    /// Whether a statement over a list of `count` keys or locations may keep its plan:
    /// with one key it may (it is then what any client's `WHERE key = $1` is); a longer
    /// list is planned at each execution (see `PreparedStatementCache`).
    static func reusesPlan(keys count: Int) -> Bool { count <= 1 }

    /// Borrows a connection from the pool and begins a transaction on it. The caller ends
    /// it with `commitAndRelease(_:)` or `rollbackAndRelease(_:)`.
    ///
    /// The `BEGIN` travels with the transaction's first statement (one round trip less;
    /// it is still counted as a statement), so an error it meets is thrown by that
    /// statement.
    ///
    /// - Throws: `PostgresError` when no connection can be had.
    func beginTransaction(isolation: IsolationLevel, readOnly: Bool = false) throws -> Connection {
        let connection = try pool.acquire()
        statementCounter.add(1, ordering: .relaxed)
        connection.beginWithNextStatement(isolation: isolation, readOnly: readOnly)
        return connection
    }

    /// Commits a transaction and returns its connection to the pool. On failure the
    /// connection stays with the caller, who rolls back with `rollbackAndRelease(_:)`.
    ///
    /// - Throws: `PostgresError`, also when the transaction had failed and PostgreSQL
    ///   rolled it back instead.
    func commitAndRelease(_ connection: Connection) throws {
        statementCounter.add(1, ordering: .relaxed)
        try connection.commit()
        pool.release(connection)
    }

    /// Rolls a transaction back (when one is open) and returns the connection to the
    /// pool. A failing rollback is only logged: the pool then discards the connection.
    func rollbackAndRelease(_ connection: Connection) {
        if connection.transactionStatus != .idle {
            do {
                statementCounter.add(1, ordering: .relaxed)
                try connection.rollback()
            } catch {
                logger.debug("rollback failed: \(error)")
            }
        }
        pool.release(connection)
    }

    /// Runs `body` in a read-only transaction on a borrowed connection (so a server-side
    /// cursor can live across statements) and commits.
    ///
    /// - Throws: what `body` throws, or `PostgresError`.
    func withReadOnlyTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        let connection = try beginTransaction(isolation: .readCommitted, readOnly: true)
        do {
            let value = try body(connection)
            try commitAndRelease(connection)
            return value
        } catch {
            rollbackAndRelease(connection)
            throw error
        }
    }
}
