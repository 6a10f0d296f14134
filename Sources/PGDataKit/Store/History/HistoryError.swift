/// A history token or reader could not be used.
///
/// For example, a consumer that was stopped for longer than the change log's retention:
///
/// ```swift
/// do {
///     for try await record in reader.records() { … }
/// } catch let error as HistoryError where error.code == .historyExpired {
///     try rebuildEverything()                       // records were pruned unread
///     if let oldest = error.oldestAvailable {
///         try reader.acknowledge(oldest)            // then go on from what is left
///     }
/// }
/// ```
public struct HistoryError: Error, Sendable, Equatable, DescribedError {
    /// What went wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch HistoryError.Code.malformedToken { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case malformedToken, historyExpired, tokenAhead, readerNotRegistered,
                invalidReaderName, recordWithoutToken
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// Text that is not a history token (`HistoryToken.init(parsing:)`); `reason`
        /// says what is wrong, without repeating the text.
        public static let malformedToken = Code(.malformedToken)
        /// Records after `token` were pruned from the change log (older than the
        /// retention, and no registered reader held them): reading on would silently miss
        /// them, so nothing is read. `oldestAvailable` is the oldest position the log
        /// still holds every record after — reading after it gives everything that is
        /// left.
        public static let historyExpired = Code(.historyExpired)
        /// `token` covers transactions that this database (now at `current`) has not seen
        /// end: it comes from another database, or from this one before it was restored
        /// from a backup (or before a failover lost the last transactions). Reading after
        /// it could skip records.
        public static let tokenAhead = Code(.tokenAhead)
        /// No history reader named `readerName` is registered (it was never registered,
        /// or was dropped with `StoreCoordinator.dropHistoryReader(named:)`).
        public static let readerNotRegistered = Code(.readerNotRegistered)
        /// A reader name must have 1 to 128 characters and no control characters;
        /// `reason` says what is wrong.
        public static let invalidReaderName = Code(.invalidReaderName)
        /// The record `recordID` did not come from a history read
        /// (`observeRemoteChanges` and `remoteChanges()` records carry no token), so it
        /// cannot be acknowledged.
        public static let recordWithoutToken = Code(.recordWithoutToken)

        /// The code's name, such as `historyExpired`.
        public var description: String { base.rawValue }
    }

    /// What went wrong, broadly.
    public let code: Code
    /// What went wrong and what to do.
    public let message: String
    /// The token that could not be used (`historyExpired`, `tokenAhead`).
    public private(set) var token: HistoryToken?
    /// The oldest position after which the log still holds every record
    /// (`historyExpired`).
    public private(set) var oldestAvailable: HistoryToken?
    /// Where this database is now (`tokenAhead`).
    public private(set) var current: HistoryToken?
    /// The reader's name (`readerNotRegistered`).
    public private(set) var readerName: String?
    /// What is wrong with a token's text or a reader's name (`malformedToken`,
    /// `invalidReaderName`).
    public private(set) var reason: String?
    /// The change record's id (`recordWithoutToken`).
    public private(set) var recordID: Int64?

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var contextFields: [ErrorContextField?] {
        [
            .name("token", token), .name("oldestAvailable", oldestAvailable), .name("current", current),
            .name("readerName", readerName), .name("reason", reason), .name("recordID", recordID),
        ]
    }

    /// Text that is not a history token; `reason` says what is wrong, without the text.
    public static func malformedToken(reason: String) -> HistoryError {
        var error = HistoryError(.malformedToken, "not a history token: \(reason)")
        error.reason = reason
        return error
    }

    /// Records after `token` were pruned from the change log unread.
    public static func historyExpired(token: HistoryToken, oldestAvailable: HistoryToken) -> HistoryError {
        var error = HistoryError(
            .historyExpired,
            "history after token \(token) has expired: records after it were pruned from the change log "
                + "unread; the oldest position with every later record still held is \(oldestAvailable)")
        (error.token, error.oldestAvailable) = (token, oldestAvailable)
        return error
    }

    /// The token covers transactions that this database has not seen end.
    public static func tokenAhead(token: HistoryToken, current: HistoryToken) -> HistoryError {
        var error = HistoryError(
            .tokenAhead,
            "history token \(token) is ahead of this database (now at \(current)): it comes from another "
                + "database, or from before a restore or failover")
        (error.token, error.current) = (token, current)
        return error
    }

    /// No history reader of this name is registered.
    public static func readerNotRegistered(name: String) -> HistoryError {
        var error = HistoryError(.readerNotRegistered, "no history reader named \(name) is registered")
        error.readerName = name
        return error
    }

    /// A reader name must have 1 to 128 characters and no control characters.
    public static func invalidReaderName(reason: String) -> HistoryError {
        var error = HistoryError(.invalidReaderName, "invalid history reader name: \(reason)")
        error.reason = reason
        return error
    }

    /// The record did not come from a history read, so it cannot be acknowledged.
    public static func recordWithoutToken(recordID: Int64) -> HistoryError {
        var error = HistoryError(
            .recordWithoutToken,
            "change record \(recordID) carries no history token (it did not come from a history read)")
        error.recordID = recordID
        return error
    }
}
