/// A history token or reader could not be used.
///
/// For example, a consumer that was stopped for longer than the change log's retention:
///
/// ```swift
/// do {
///     for try await record in reader.records() { … }
/// } catch HistoryError.historyExpired(_, let oldest) {
///     try rebuildEverything()                       // records were pruned unread
///     try reader.acknowledge(oldest)                // then go on from what is left
/// }
/// ```
public enum HistoryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Text that is not a history token (`HistoryToken.init(parsing:)`); the reason says
    /// what is wrong, without repeating the text.
    case malformedToken(reason: String)
    /// Records after `token` were pruned from the change log (older than the retention,
    /// and no registered reader held them): reading on would silently miss them, so
    /// nothing is read. `oldestAvailable` is the oldest position the log still holds
    /// every record after — reading after it gives everything that is left.
    case historyExpired(token: HistoryToken, oldestAvailable: HistoryToken)
    /// The token covers transactions that this database has not seen end: it comes from
    /// another database, or from this one before it was restored from a backup (or before
    /// a failover lost the last transactions). Reading after it could skip records.
    case tokenAhead(token: HistoryToken, current: HistoryToken)
    /// No history reader of this name is registered (it was never registered, or was
    /// dropped with `StoreCoordinator.dropHistoryReader(named:)`).
    case readerNotRegistered(name: String)
    /// A reader name must have 1 to 128 characters and no control characters.
    case invalidReaderName(reason: String)
    /// The record did not come from a history read (`observeRemoteChanges` and
    /// `remoteChanges()` records carry no token), so it cannot be acknowledged.
    case recordWithoutToken(recordID: Int64)

    /// What went wrong and what to do.
    public var description: String {
        switch self {
        case .malformedToken(let reason):
            return "not a history token: \(reason)"
        case .historyExpired(let token, let oldest):
            return "history after token \(token) has expired: records after it were pruned from the change log "
                + "unread; the oldest position with every later record still held is \(oldest)"
        case .tokenAhead(let token, let current):
            return "history token \(token) is ahead of this database (now at \(current)): it comes from another "
                + "database, or from before a restore or failover"
        case .readerNotRegistered(let name):
            return "no history reader named \(name) is registered"
        case .invalidReaderName(let reason):
            return "invalid history reader name: \(reason)"
        case .recordWithoutToken(let id):
            return "change record \(id) carries no history token (it did not come from a history read)"
        }
    }
}
