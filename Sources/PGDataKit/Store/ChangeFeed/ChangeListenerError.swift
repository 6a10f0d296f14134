/// What is wrong with the change listener's session, found when it connects.
///
/// For example, after starting a manager whose listener was given PgBouncer's address:
///
/// ```swift
/// if let problem = manager.coordinator.listenerError, problem.code == .notificationsNotDelivered {
///     print(problem)   // the change listener's session … does not receive notifications …
/// }
/// ```
public struct ChangeListenerError: Error, Sendable, Equatable, DescribedError {
    /// What is wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    public struct Code: ErrorCode {
        /// The codes there are.
        enum Base: String, Sendable {
            case notificationsNotDelivered
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The listener's connection (to `endpoint`) goes through a pooler, and a
        /// notification sent from another session did not arrive within `waited`: the
        /// pooler hands each transaction to some server process (PgBouncer's transaction
        /// mode), so the `LISTEN` stays in a server process the listener does not keep.
        /// Other processes' saves then reach this process only when its listener
        /// reconnects and catches up from the change log. Give the listener a direct
        /// connection (or one through a session-mode pooler): `listenerConfiguration`.
        public static let notificationsNotDelivered = Code(.notificationsNotDelivered)

        /// The code's name, such as `notificationsNotDelivered`.
        public var description: String { base.rawValue }
    }

    /// What is wrong, broadly.
    public let code: Code
    /// What went wrong and what to do, without the password.
    public let message: String
    /// The listener's endpoint, `user@host:port/database` (never the password).
    public let endpoint: String
    /// How long the listener waited for the test notification
    /// (`notificationsNotDelivered`).
    public private(set) var waited: Duration?

    package var contextFields: [ErrorContextField?] { [.name("endpoint", endpoint), .name("waited", waited)] }

    /// The listener's session goes through a pooler that does not deliver notifications.
    public static func notificationsNotDelivered(endpoint: String, waited: Duration) -> ChangeListenerError {
        let message =
            "the change listener's session to \(endpoint) goes through a connection pooler and "
            + "does not receive notifications (a test notification sent from another session did not "
            + "arrive within \(waited)): a pooler in transaction mode cannot keep a LISTEN. Other "
            + "processes' saves will not reach this process's main context; give the listener a direct "
            + "connection (listenerConfiguration of StoreCoordinator or ContextManager), or one through "
            + "a session-mode pooler"
        return ChangeListenerError(code: .notificationsNotDelivered, message: message, endpoint: endpoint, waited: waited)
    }
}
