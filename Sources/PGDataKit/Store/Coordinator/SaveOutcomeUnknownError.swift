/// A save sent its `COMMIT`, the connection broke before the answer came, and PGDataKit
/// could not find out afterwards whether the transaction committed.
///
/// A save whose `COMMIT` goes unanswered looks its transaction up on a new connection
/// (`pg_xact_status`) before it reports anything: it succeeds when the transaction
/// committed and fails with a transient `PostgresError` when it did not. This error is
/// what is left when the lookup cannot say — the server stayed unreachable for
/// `StoreCoordinator.commitOutcomeTimeout`, the transaction stayed in progress, or the
/// server no longer knows it. The save may or may not have been applied, so the error
/// is not transient: retrying it blindly could apply it twice. The context keeps its
/// changes; find out with `transactionID` once the server answers, then either roll
/// the context back (it committed) or save again (it did not). After a failover, look
/// for the save's change record instead (`changeRecordID`): a promoted standby gives the
/// ids of transactions it never received to new ones, whose status `pg_xact_status`
/// then reports.
///
/// For example:
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error as SaveOutcomeUnknownError {
///     // Later, once the server answers again:
///     let status = try connection.query(
///         "SELECT pg_xact_status($1::xid8)", [String(error.transactionID)]
///     )[0].decode(String?.self, at: 0)
///     switch status {
///     case "committed": context.rollback()  // it is stored: fetch it again
///     case "aborted": try context.save()
///     default: break  // still in progress, or unknown: ask again later
///     }
/// }
/// ```
public struct SaveOutcomeUnknownError: Error, Sendable, DescribedError {
    /// Why the lookup could not tell.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch SaveOutcomeUnknownError.Code.serverUnreachable { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case serverUnreachable, stillInProgress, statusUnavailable
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// No new connection could be opened before the timeout.
        public static let serverUnreachable = Code(.serverUnreachable)
        /// The transaction was still in progress at the timeout (its server process
        /// lives on, and could not be ended).
        public static let stillInProgress = Code(.stillInProgress)
        /// The server does not know the transaction's status: it is too old (the
        /// status is kept for a limited number of transactions), or the server is a
        /// standby that has not caught up with it.
        public static let statusUnavailable = Code(.statusUnavailable)

        /// The code's name, such as `serverUnreachable`.
        public var description: String { base.rawValue }

        /// The reason in words, for the message.
        var phrase: String {
            switch base {
            case .serverUnreachable: return "the server could not be reached to look it up"
            case .stillInProgress: return "the transaction was still in progress"
            case .statusUnavailable: return "the server does not know the transaction's status"
            }
        }
    }

    /// The save's transaction id (PostgreSQL's `xid8`, as `pg_current_xact_id()` gives
    /// it): ask `SELECT pg_xact_status($1::xid8)` whether it committed. (0 only when
    /// the id never arrived: the client itself failed before reading it, which does not
    /// happen in practice.)
    public let transactionID: UInt64
    /// Why its outcome is unknown.
    public let code: Code
    /// The error that broke the connection at the `COMMIT`.
    public let commitError: PostgresError
    /// The last error met while looking the transaction up, if any (such as why no
    /// connection could be opened).
    public let lookupError: (any Error)?
    /// The id of the change record the save wrote (`nil` for a save that changed no
    /// rows). The save committed exactly when `pgdatakit_changes` holds this record
    /// with `transactionID`, also after a failover, when the id may have gone to another
    /// transaction:
    ///
    /// ```swift
    /// let committed = try connection.query(
    ///     "SELECT EXISTS (SELECT FROM pgdatakit_changes WHERE id = $1 AND transaction_id = $2::xid8)",
    ///     [recordID, String(error.transactionID)])[0].decode(Bool.self, at: 0)
    /// ```
    public let changeRecordID: Int64?

    /// Creates an error; the library makes these, tests and wrappers may too.
    public init(
        transactionID: UInt64, code: Code, commitError: PostgresError, lookupError: (any Error)? = nil,
        changeRecordID: Int64? = nil
    ) {
        self.transactionID = transactionID
        self.code = code
        self.commitError = commitError
        self.lookupError = lookupError
        self.changeRecordID = changeRecordID
    }

    /// What happened and what to do, without data.
    public var message: String {
        var text =
            "the outcome of a save is unknown: the connection broke at its COMMIT (\(commitError)) and \(code.phrase)"
        if let lookupError { text += " (\(lookupError))" }
        if let changeRecordID {
            return text
                + "; transaction \(transactionID) may have committed: check that pgdatakit_changes holds record "
                + "\(changeRecordID) with transaction_id \(transactionID) before saving again"
        }
        return text
            + "; transaction \(transactionID) may have committed: check SELECT pg_xact_status('\(transactionID)'::xid8) "
            + "before saving again"
    }

    package var contextFields: [ErrorContextField?] {
        [
            .name("transactionID", transactionID), .name("changeRecordID", changeRecordID),
            .underlying("commitError", commitError), .underlying("lookupError", lookupError),
        ]
    }
}
