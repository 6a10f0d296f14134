import Foundation

/// The change log's durable history (Core Data's persistent history tracking): read
/// every save after a `HistoryToken`, resume after a restart, and keep records until the
/// registered readers have them.
///
/// History reads return the records of every coordinator, this one's own saves included
/// (a process that feeds another service usually writes nothing itself; one that does
/// wants its own saves fed too). They read the change log on a pooled connection; live
/// sequences are woken by the coordinator's change listener (the host's relay, when one
/// serves), which they start if nothing else has.
extension StoreCoordinator {
    /// The position after everything committed so far: reading after it returns only
    /// later saves (Core Data's `currentPersistentHistoryToken(fromStores:)`).
    ///
    /// For example, to follow saves from now on:
    ///
    /// ```swift
    /// let start = try coordinator.currentHistoryToken()
    /// for try await record in coordinator.history(after: start) { … }
    /// ```
    ///
    /// - Throws: `PostgresError`.
    public func currentHistoryToken() throws -> HistoryToken {
        try pool.withConnection { try ChangeLog.currentToken(on: $0) }
    }

    /// The oldest position from which the change log still holds every later record:
    /// reading after it returns everything retention has kept (Core Data's
    /// `fetchHistory(after: nil)`). Before anything was pruned, the position before the
    /// first record.
    ///
    /// - Throws: `ChangeLogError.notInstalled` (the history's tables are missing: run
    ///   `pgdatakit migrate`), `PostgresError`.
    public func oldestHistoryToken() throws -> HistoryToken {
        try pool.withConnection { try ChangeLog.oldestToken(on: $0) }
    }

    /// Up to `limit` records committed after `token`, in commit order, each carrying the
    /// token after it, and the token to read from next — Core Data's
    /// `NSPersistentHistoryChangeRequest.fetchHistory(after:)` with a fetch limit.
    ///
    /// For example:
    ///
    /// ```swift
    /// let page = try coordinator.history(after: token, limit: 500)
    /// for record in page.records { try index(record) }
    /// token = page.token   // and read again while page.hasMore
    /// ```
    ///
    /// Records of one read come oldest id first; a record that commits after a later id
    /// was read comes in a later read, so saves that touch the same rows come in the order
    /// they committed. A transaction's records (the library writes one per save) come
    /// together, even past the limit.
    ///
    /// - Parameters:
    ///   - token: where to start (a record's `historyToken`, `currentHistoryToken()`,
    ///     `oldestHistoryToken()`, or one read back with `HistoryToken(parsing:)`).
    ///   - limit: the most records to return: 1 to 100,000 (values outside are taken as
    ///     the nearest bound).
    /// - Throws: `HistoryError.historyExpired` when records after `token` were pruned
    ///   (with the oldest position still held), `HistoryError.tokenAhead` for a token
    ///   from another database, `ChangeLogError.notInstalled` or `.unreadableRecord`,
    ///   `PostgresError`.
    public func history(after token: HistoryToken, limit: Int) throws -> HistoryPage {
        try pool.withConnection { try ChangeLog.readHistory(after: token, limit: limit, on: $0) }
    }

    /// Every record committed after `token`, as an async sequence that first replays the
    /// log and then goes on live: each save exactly once, in commit order, each carrying
    /// the token after it. It ends (returns `nil`) when the task is cancelled or the
    /// coordinator is closed.
    ///
    /// For example:
    ///
    /// ```swift
    /// for try await record in coordinator.history(after: token) {
    ///     try searchIndex.apply(record.changes)
    ///     try save(record.historyToken)   // or use a HistoryReader
    /// }
    /// ```
    ///
    /// Live records come from the same reads as the replay: each notification the
    /// coordinator's listener receives (and each reconnection of it) makes the sequence
    /// read the log after its position, so there is no second source to reconcile, and
    /// a save committed while a read runs is simply in the next one. A lost connection
    /// is retried (logged); other errors end the sequence by throwing, as
    /// `history(after:limit:)` does.
    public func history(after token: HistoryToken) -> HistorySequence {
        HistorySequence(coordinator: self, start: .token(token))
    }

    /// The durable history reader of this name, registered now unless it exists: its
    /// acknowledged token is kept in the database (`pgdatakit_history_readers`), so a
    /// restarted process goes on where it acknowledged, and pruning keeps every record it
    /// has not acknowledged for as long as it acknowledges within
    /// `ChangeLogOptions.maximumHistoryReaderAge`.
    ///
    /// For example, a process that feeds a search index:
    ///
    /// ```swift
    /// let reader = try coordinator.historyReader(named: "search-index")
    /// for try await record in reader.records() {
    ///     try searchIndex.apply(record.changes)
    ///     try reader.acknowledge(record)
    /// }
    /// ```
    ///
    /// One consumer per name at a time: two processes reading one reader would each get
    /// every record.
    ///
    /// - Parameters:
    ///   - name: 1 to 128 characters, no control characters.
    ///   - start: where a new reader starts (ignored when it exists): `.oldest` (every
    ///     record the log still holds, the default), `.now`, or a token.
    /// - Throws: `HistoryError.invalidReaderName`, `ChangeLogError.notInstalled`,
    ///   `PostgresError`.
    public func historyReader(named name: String, startingAt start: HistoryReader.Start = .oldest) throws
        -> HistoryReader
    {
        let (token, registered) = try pool.withConnection {
            try ChangeLog.registerReader(name, startingAt: start, on: $0)
        }
        if registered { logger.info("registered history reader \(name) at \(token)") }
        return HistoryReader(name: name, coordinator: self)
    }

    /// The history reader of this name, without registering one.
    ///
    /// - Throws: `HistoryError.readerNotRegistered`, `HistoryError.invalidReaderName`,
    ///   `ChangeLogError.notInstalled`, `PostgresError`.
    public func existingHistoryReader(named name: String) throws -> HistoryReader {
        try ChangeLog.validateReaderName(name)
        _ = try pool.withConnection { try ChangeLog.acknowledgedToken(reader: name, on: $0) }
        return HistoryReader(name: name, coordinator: self)
    }

    /// Removes a history reader: pruning stops keeping records for it. Logged.
    ///
    /// - Returns: whether a reader of that name existed.
    /// - Throws: `ChangeLogError.notInstalled`, `PostgresError`.
    @discardableResult
    public func dropHistoryReader(named name: String) throws -> Bool {
        guard let dropped = try pool.withConnection({ try ChangeLog.dropReader(name, on: $0) }) else { return false }
        logger.info(
            "dropped history reader \(name) (last acknowledged at \(dropped.acknowledgedAt), at \(dropped.token))")
        return true
    }

    /// Every registered history reader, by name: where each stands and when it last
    /// acknowledged (a reader silent for longer than
    /// `ChangeLogOptions.maximumHistoryReaderAge` no longer holds pruning).
    ///
    /// - Throws: `HistoryError.malformedToken` (a row changed by hand),
    ///   `ChangeLogError.notInstalled`, `PostgresError`.
    public func historyReaders() throws -> [HistoryReader.Status] {
        try pool.withConnection { try ChangeLog.readers(on: $0) }.map {
            HistoryReader.Status(
                name: $0.name, acknowledgedToken: $0.token, acknowledgedAt: $0.acknowledgedAt,
                registeredAt: $0.registeredAt)
        }
    }
}
