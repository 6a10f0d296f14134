/// New work was refused because the coordinator is shutting down (or has shut down):
/// `ContextManager/shutdown(gracePeriod:)` or a `ContextManagerService` whose graceful
/// shutdown began. Nothing of the refused work reached the database; work that had begun
/// before (a transaction already open, a save under way) was let finish.
///
/// For example, a request handler that answers 503 while its server drains:
///
/// ```swift
/// do {
///     try await context.perform { try context.save() }
/// } catch ShutdownError.Code.shuttingDown {
///     // the server is stopping: the client retries against another instance
/// }
/// ```
public struct ShutdownError: Error, Sendable, Equatable, DescribedError {
    /// Why the work was refused.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ShutdownError.Code.shuttingDown { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case shuttingDown
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// A shutdown began: no new transaction or connection is lent any more.
        public static let shuttingDown = Code(.shuttingDown)

        /// The code's name, such as `shuttingDown`.
        public var description: String { base.rawValue }
    }

    /// Why the work was refused: `shuttingDown`.
    public let code: Code
    /// Says that the coordinator is shutting down and what to do.
    public let message: String

    package var contextFields: [ErrorContextField?] { [] }

    /// A shutdown began: no new transaction or connection is lent any more.
    public static var shuttingDown: ShutdownError {
        ShutdownError(
            code: .shuttingDown,
            message: "the store coordinator is shutting down: no new transaction is begun; "
                + "retry against another process")
    }
}
