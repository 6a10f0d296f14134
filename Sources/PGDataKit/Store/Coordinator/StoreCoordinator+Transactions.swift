extension StoreCoordinator {
    /// Runs a statement for a context, counting it. With `reusesPlan` false it is sent
    /// unprepared and planned at each execution: statements that find rows by a long
    /// list of keys or locations (`reusesPlan(keys:)`).
    @discardableResult
    func execute(
        _ sql: String, _ parameters: [(any PostgresEncodable)?] = [], on connection: Connection, reusesPlan: Bool = true
    ) throws -> QueryResult {
        countStatements(1)
        return try connection.execute(sql, parameters, reusesPlan: reusesPlan)
    }

    /// Whether a statement over a list of `count` keys or locations may keep its plan.
    /// A list of up to `shortListLength` may. Planning each time costs 0.1–0.3 ms per
    /// statement, about what such a statement itself costs, and every process pays it
    /// again for each save it merges: with lists of more than 16 planned, the demo's four
    /// workers (saves of 3–20 objects) made 20% fewer saves per second and a merge of a
    /// 100-object save took 0.5 ms longer. A plan kept from when the table was small
    /// costs such a list a read of the table (40 ms for 100 keys in 100,000 rows), while
    /// the tables grow faster than autovacuum analyses them only under bulk imports,
    /// whose batches (1,000 by default) are long lists. Those are planned at each
    /// execution: a kept plan compared every row with every key, 1.0 s per batch (see
    /// `PreparedStatementCache`).
    static func reusesPlan(keys count: Int) -> Bool { count <= shortListLength }

    /// The longest list of keys whose statements keep their plans (`reusesPlan(keys:)`).
    static let shortListLength = 128

    /// Borrows a connection from the pool and begins a transaction on it. The caller ends
    /// it with `commitAndRelease(_:)` or `rollbackAndRelease(_:)`.
    ///
    /// The `BEGIN` travels with the transaction's first statement (one round trip less;
    /// it is still counted as a statement), so an error it meets is thrown by that
    /// statement.
    ///
    /// With a `statementTimeout` (a context's), the transaction's statements are limited
    /// to it. A save already under way that must redo its work in a transaction of its
    /// own (`continuesWork`) is let through after `beginShutdown()`; nothing else is.
    ///
    /// - Throws: `ShutdownError` once a shutdown began, `PostgresError` when no
    ///   connection can be had.
    func beginTransaction(
        isolation: IsolationLevel, readOnly: Bool = false, statementTimeout: Duration? = nil, continuesWork: Bool = false
    ) throws -> Connection {
        if !continuesWork { try admitNewWork() }
        let connection = try pool.acquire()
        countStatements(1)
        connection.beginWithNextStatement(isolation: isolation, readOnly: readOnly, statementTimeout: statementTimeout)
        return connection
    }

    /// Commits a transaction and returns its connection to the pool. On failure the
    /// connection stays with the caller, who rolls back with `rollbackAndRelease(_:)`.
    ///
    /// - Throws: `PostgresError`, also when the transaction had failed and PostgreSQL
    ///   rolled it back instead.
    func commitAndRelease(_ connection: Connection) throws {
        countStatements(1)
        try connection.commit()
        pool.release(connection)
    }

    /// Rolls a transaction back (when one is open) and returns the connection to the
    /// pool. A failing rollback is only logged: the pool then discards the connection.
    func rollbackAndRelease(_ connection: Connection) {
        if connection.transactionStatus != .idle {
            do {
                countStatements(1)
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
