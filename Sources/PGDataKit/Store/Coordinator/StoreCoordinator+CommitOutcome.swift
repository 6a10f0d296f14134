import Foundation

/// Commits of write transactions whose outcome is never reported wrong.
///
/// A write transaction ends with one round trip: a statement that returns the
/// transaction's id (the change record's, or `pg_current_xact_id_if_assigned()` when
/// there is no record), then `COMMIT`. When the connection breaks in it:
///
/// - the `COMMIT`'s answer arrived: the transaction committed, whatever broke after it;
/// - the server answered a statement with an error and the session lives on: it ended
///   the transaction without committing;
/// - the statement before the `COMMIT` was not answered because the session ended (or
///   the server refused it): the `COMMIT` never ran — the server answers that
///   statement, and flushes the answer, before it reads the `COMMIT`, and the session
///   delivers bytes in order;
/// - otherwise the transaction id is known, and a new connection asks
///   `pg_xact_status`: committed (the commit succeeded), aborted (a transient
///   `PostgresError` saying it did not commit), in progress (the old server process is
///   still at it: asked again, and after a moment ended with `pg_terminate_backend` when
///   it is still that transaction's), or unknown (`SaveOutcomeUnknownError`, not
///   transient).
///
/// After a failover the new primary may report the id as "in the future": it never saw
/// the transaction (asynchronous replication lost it), so it did not commit there and
/// never will; that counts as not committed. A standby (in recovery) saying so, or
/// saying "aborted", is not trusted: it may not have caught up.
///
/// A promoted standby also hands out again the ids the old primary had given to
/// transactions it never received: its next id is one past the last it replayed. Once
/// another session's transaction has taken the lost one's id, `pg_xact_status` answers
/// for that transaction. So when the transaction wrote a change record (every save that
/// changed rows), "committed" counts only if the record is there with this transaction
/// id: the record commits with the transaction, so it is missing exactly when another
/// transaction holds the id. A transaction with no record changed no rows: whatever is
/// reported for it, the database is the same.
extension StoreCoordinator {
    /// What a lookup found out about a transaction.
    enum CommitResolution: Sendable {
        case committed
        case notCommitted
        case unknown(SaveOutcomeUnknownError.Code, lookupError: (any Error)?)
    }

    /// Commits a write transaction and returns its connection to the pool; a `BEGIN`
    /// still waiting for its first statement is dropped instead (nothing ran). On failure
    /// the connection stays with the caller, who rolls back with `rollbackAndRelease(_:)`.
    ///
    /// - Throws: `PostgresError` when the transaction did not commit (a lost connection
    ///   is then marked `transactionDidNotCommit`), `SaveOutcomeUnknownError` when that
    ///   could not be found out.
    func commitWriteAndRelease(_ connection: Connection) throws {
        guard !connection.beginIsPending else {
            try commitAndRelease(connection)
            return
        }
        countStatements(2)
        try commit(
            connection, after: (sql: "SELECT pg_current_xact_id_if_assigned()::text", parameters: []),
            transactionIDColumn: 0, recordIDColumn: nil)
    }

    /// Sends `statement` and `COMMIT` in one round trip, makes sure of the outcome when
    /// the connection breaks, and returns the connection to the pool when the
    /// transaction committed. `statement` returns one row whose `transactionIDColumn` is
    /// the transaction's id (`xid8` as text), `NULL` when it has none (it wrote nothing),
    /// and `recordIDColumn` the id of the change record it wrote, if any; `onAnswer` gets
    /// its result as soon as it is read, before the `COMMIT`'s.
    ///
    /// - Throws: as `commitWriteAndRelease(_:)`, or `PostgresValueError` (then nothing
    ///   was sent).
    func commit(
        _ connection: Connection, after statement: (sql: String, parameters: [(any PostgresEncodable)?]),
        transactionIDColumn: Int, recordIDColumn: Int?, onAnswer: (QueryResult) -> Void = { _ in }
    ) throws {
        var answer: TransactionIDAnswer?
        var commitTag: String?
        // (libpq forgets the server process's id once the connection breaks.)
        let backendPID = connection.backendPID
        let results: [QueryResult]
        do {
            // Streamed: the server sends the statement's answer (a flush request after
            // it) before it reads the COMMIT; `settle` relies on that.
            results = try connection.executePipeline([statement, (sql: "COMMIT", parameters: [])], streamsResults: true) {
                index, result in
                if index == 0 {
                    answer = TransactionIDAnswer(result, column: transactionIDColumn, recordColumn: recordIDColumn)
                    onAnswer(result)
                } else if index == 1 {
                    commitTag = result.commandTag
                }
            }
        } catch {
            try settle(connection, after: error, answer: answer, commitTag: commitTag, backendPID: backendPID)
            return
        }
        if results.last?.commandTag == "ROLLBACK" {
            throw PostgresError(
                kind: .server, sqlState: .inFailedTransaction,
                message: "the transaction had failed and was rolled back instead of committed", statement: "COMMIT")
        }
        pool.release(connection)
    }

    /// The statement before the `COMMIT` said: the transaction's id (with the id of the
    /// change record it wrote, if any), none (it wrote nothing), or something unreadable.
    private enum TransactionIDAnswer {
        case id(UInt64, record: Int64?)
        case none
        case unreadable

        init(_ result: QueryResult, column: Int, recordColumn: Int?) {
            guard let row = result.first, column < result.columnCount else {
                self = .unreadable
                return
            }
            if row.isNull(at: column) {
                self = .none
            } else if let text = try? row.decode(String.self, at: column), let id = UInt64(text) {
                if let recordColumn {
                    guard recordColumn < result.columnCount, let record = try? row.decode(Int64.self, at: recordColumn) else {
                        self = .unreadable
                        return
                    }
                    self = .id(id, record: record)
                } else {
                    self = .id(id, record: nil)
                }
            } else {
                self = .unreadable
            }
        }
    }

    /// Decides, after the commit's round trip failed with `error`, whether the
    /// transaction committed: returns (releasing the connection) when it did, throws
    /// when it did not or when that cannot be found out.
    private func settle(
        _ connection: Connection, after error: any Error, answer: TransactionIDAnswer?, commitTag: String?,
        backendPID: Int32
    ) throws {
        if commitTag == "COMMIT" {
            logger.debug("the connection broke after the COMMIT's answer; the transaction committed: \(error)")
            connection.close()
            pool.release(connection)
            return
        }
        // A parameter that could not be encoded: nothing was sent.
        guard let failure = error as? PostgresError else { throw error }
        let sessionEnded =
            failure.kind != .server || failure.isConnectionError || failure.sqlState?.rawValue.hasPrefix("57P") == true
        if !sessionEnded && connection.isUsable {
            // The server refused a statement and the session goes on: it ended the
            // transaction without committing. (The connection is the caller's to roll back.)
            throw failure
        }
        connection.close()
        let transactionID: UInt64
        let recordID: Int64?
        switch answer {
        case nil where failure.isConnectionError || failure.kind == .server:
            // The statement before the COMMIT went unanswered (the session ended, or the
            // server refused it): the COMMIT never ran.
            throw failure.notCommitted()
        case nil:
            // A failure of the client's own before the answer was read (not a lost
            // session): the server may have gone on to the COMMIT.
            throw SaveOutcomeUnknownError(transactionID: 0, code: .statusUnavailable, commitError: failure)
        case .none?:
            // The transaction wrote nothing: committed or not, the database is the same.
            logger.debug("the connection broke at a COMMIT of a transaction that wrote nothing: \(failure)")
            pool.release(connection)
            return
        case .unreadable?:
            throw SaveOutcomeUnknownError(transactionID: 0, code: .statusUnavailable, commitError: failure)
        case .id(let id, let record)?:
            transactionID = id
            recordID = record
        }
        logger.debug("the connection broke at COMMIT: looking up transaction \(transactionID)", metadata: ["error": "\(failure)"])
        switch resolveCommit(of: transactionID, record: recordID, backendPID: backendPID) {
        case .committed:
            logger.debug("transaction \(transactionID) committed")
            pool.release(connection)
        case .notCommitted:
            logger.debug("transaction \(transactionID) did not commit")
            throw failure.notCommitted()
        case .unknown(let reason, let lookupError):
            logger.warning("the outcome of transaction \(transactionID) is unknown: \(reason.phrase)")
            throw SaveOutcomeUnknownError(
                transactionID: transactionID, code: reason, commitError: failure, lookupError: lookupError,
                changeRecordID: recordID)
        }
    }

    /// Asks on a new connection (the pool's configuration) whether a transaction
    /// committed, until `commitOutcomeTimeout` runs out: reconnecting while the server
    /// cannot be reached, asking again while the transaction is in progress, and ending
    /// its server process (`backendPID`, if it still runs that transaction) once it has
    /// been in progress for a moment. With the id of the change record the transaction
    /// wrote (`record`), it committed only if that record is stored with its transaction
    /// id (after a failover, another transaction may have the id; see above).
    ///
    /// It asks even when the work that committed was cancelled: a cancelled task must
    /// still learn whether its transaction committed.
    func resolveCommit(of transactionID: UInt64, record: Int64?, backendPID: Int32) -> CommitResolution {
        StatementCancellation.run(nil) { lookUpCommit(of: transactionID, record: record, backendPID: backendPID) }
    }

    /// `resolveCommit(of:record:backendPID:)` outside any cancellation scope.
    private func lookUpCommit(of transactionID: UInt64, record: Int64?, backendPID: Int32) -> CommitResolution {
        let timeout = commitOutcomeTimeout
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + timeout
        let patience = Swift.min(Duration.seconds(1), timeout / 4)
        let id = String(transactionID)
        var lookup: Connection?
        defer { lookup?.close() }
        var lookupError: (any Error)?
        var lastStatus: String??  // nil: the server never answered
        var endedBackend = false
        var pause = Duration.milliseconds(5)
        while true {
            do {
                let connection = try lookup ?? Connection(pool.configuration, logger: logger)
                lookup = connection
                do {
                    let row = try connection.query(
                        """
                        SELECT pg_xact_status($1::xid8), pg_is_in_recovery(),
                               EXISTS (SELECT FROM \(ChangeLog.table) WHERE id = $2 AND transaction_id = $1::xid8)
                        """, [id, record ?? 0])[0]
                    let status = try row.decode(String?.self, at: 0)
                    let inRecovery = try row.decode(Bool.self, at: 1)
                    let recordStored = try row.decode(Bool.self, at: 2)
                    lastStatus = .some(status)
                    switch status {
                    case "committed"? where record == nil || recordStored:
                        return .committed
                    case "committed"? where !inRecovery:
                        // Another transaction with the same id, on a promoted standby that
                        // never received this one: it did not commit here, and never will.
                        return .notCommitted
                    case "aborted"? where !inRecovery:
                        return .notCommitted
                    case nil where !inRecovery:
                        // Too old for the server to know.
                        return .unknown(.statusUnavailable, lookupError: nil)
                    case "in progress"? where !inRecovery && !endedBackend && clock.now - start >= patience:
                        endedBackend = true
                        try connection.execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND backend_xid = xid($2::xid8)",
                            [backendPID, id])
                    default:
                        break  // in progress, or a standby's word: ask again
                    }
                } catch let error as PostgresError where error.sqlState == .invalidParameterValue {
                    // "transaction ID … is in the future": this server never saw it.
                    lastStatus = .some(nil)
                    lookupError = error
                    let inRecovery = try connection.query("SELECT pg_is_in_recovery()")[0].decode(Bool.self, at: 0)
                    if !inRecovery { return .notCommitted }
                }
            } catch {
                lookupError = error
                if let error = error as? PostgresError, error.isConnectionError {
                    lookup?.close()
                    lookup = nil
                }
            }
            if clock.now + pause > deadline {
                switch lastStatus {
                case nil: return .unknown(.serverUnreachable, lookupError: lookupError)
                case .some(.some("in progress")): return .unknown(.stillInProgress, lookupError: lookupError)
                default: return .unknown(.statusUnavailable, lookupError: lookupError)
                }
            }
            Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) / 1e18 + Double(pause.components.seconds))
            pause = Swift.min(pause * 2, .milliseconds(100))
        }
    }
}
