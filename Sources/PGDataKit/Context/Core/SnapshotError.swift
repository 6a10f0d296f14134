/// A context could not pin its snapshot, or lost the one it had pinned (see
/// `ManagedObjectContext.pinSnapshot()`).
///
/// For example, a report that starts over when its snapshot was lost (the server ended
/// its session, a failover, a statement that failed in the pinned transaction):
///
/// ```swift
/// do {
///     try context.performAndWait {
///         try context.withPinnedSnapshot { try renderReport(in: context) }
///     }
/// } catch SnapshotError.Code.lost {
///     // the context is unpinned again: render the report anew
/// }
/// ```
public struct SnapshotError: Error, Sendable, DescribedError {
    /// What went wrong.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch SnapshotError.Code.lost { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case lost, readCommitted
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The pinned snapshot's transaction ended before `unpinSnapshot()`: its
        /// connection was lost (a terminated server process, a failover, an idle
        /// transaction timeout) or a statement in it failed, which ends a transaction.
        /// Reads do not silently go on in a newer snapshot: each throws this until
        /// `unpinSnapshot()` (or a `save()`) ends the pin.
        public static let lost = Code(.lost)
        /// A private context whose `isolationLevel` is `.readCommitted` reads a new
        /// snapshot with each statement, so it has none to pin.
        public static let readCommitted = Code(.readCommitted)

        /// The code's name, such as `lost`.
        public var description: String { base.rawValue }
    }

    /// What went wrong.
    public let code: Code
    /// Names the context and what to do.
    public let message: String
    /// The context's name.
    public let context: String
    /// What ended the snapshot's transaction (`lost`), when this read met it: a
    /// `PostgresError`, such as a lost connection or a cancelled statement.
    public private(set) var underlying: PostgresError?

    package var contextFields: [ErrorContextField?] {
        [.name("context", context), .underlying("underlying", underlying)]
    }

    /// The pinned snapshot of the context named `context` is gone.
    ///
    /// - Parameters:
    ///   - context: the context's name.
    ///   - underlying: what ended its transaction, when the read that throws met it.
    public static func lost(context: String, underlying: PostgresError? = nil) -> SnapshotError {
        let cause = underlying.map { ": \($0.code), SQLSTATE \($0.sqlState?.rawValue ?? "none")" } ?? ""
        return SnapshotError(
            code: .lost,
            message: "the pinned snapshot of context \"\(context)\" is lost (its transaction ended\(cause)); "
                + "call unpinSnapshot() and read again",
            context: context, underlying: underlying)
    }

    /// The private context named `context` reads at read committed: no snapshot to pin.
    ///
    /// - Parameter context: the context's name.
    public static func readCommitted(context: String) -> SnapshotError {
        SnapshotError(
            code: .readCommitted,
            message: "context \"\(context)\" reads at read committed, a new snapshot per statement: set its "
                + "isolationLevel to .repeatableRead (the default) before pinning its snapshot",
            context: context)
    }
}
