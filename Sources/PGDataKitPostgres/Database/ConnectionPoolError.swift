/// The pool could not hand out a connection.
///
/// For example:
///
/// ```swift
/// do {
///     try pool.withConnection { connection in … }
/// } catch let error as ConnectionPoolError where error.code == .timedOut {
///     print(error)   // no connection became free within 5.0 seconds (all 10 in use); …
/// }
/// ```
public struct ConnectionPoolError: Error, Sendable, Equatable, DescribedError {
    /// Why no connection was handed out.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ConnectionPoolError.Code.timedOut { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case timedOut, closed
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// Every connection (`maximumConnections`) stayed busy for the whole timeout
        /// (`waited`).
        public static let timedOut = Code(.timedOut)
        /// The pool was closed.
        public static let closed = Code(.closed)

        /// The code's name, such as `timedOut`.
        public var description: String { base.rawValue }
    }

    /// Why no connection was handed out.
    public let code: Code
    /// Says how long it waited and how large the pool is.
    public let message: String
    /// How long the caller waited (`timedOut`).
    public private(set) var waited: Duration?
    /// The pool's size (`timedOut`).
    public private(set) var maximumConnections: Int?

    package var contextFields: [ErrorContextField?] {
        [.name("waited", waited), .name("maximumConnections", maximumConnections)]
    }

    /// Every connection stayed busy for the whole timeout.
    public static func timedOut(waited: Duration, maximumConnections: Int) -> ConnectionPoolError {
        ConnectionPoolError(
            code: .timedOut,
            message: "no connection became free within \(waited) (all \(maximumConnections) in use); "
                + "release connections sooner or raise maximumConnections",
            waited: waited, maximumConnections: maximumConnections)
    }

    /// The pool was closed.
    public static var closed: ConnectionPoolError {
        ConnectionPoolError(code: .closed, message: "the connection pool was closed")
    }
}
