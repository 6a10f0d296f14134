/// Whether a connection's session state lasts from one transaction to the next: what a
/// connection pooler such as PgBouncer between it and the server changes.
///
/// A direct session, or one through a pooler in session mode, keeps its server process:
/// named prepared statements and `SET`s last. Through a pooler in transaction mode (the
/// mode that lets many processes share a few server connections), each transaction may
/// run in another server process: only what is sent within the transaction holds.
///
/// For example, keep prepared statements behind PgBouncer in session mode (which the
/// automatic detection cannot tell from transaction mode):
///
/// ```swift
/// var configuration = ConnectionConfiguration("postgres://app@pgbouncer:6432/app")
/// configuration.pooling = .session
/// ```
public enum ConnectionPooling: Sendable, Equatable, CustomStringConvertible {
    /// Decide at connect (the default): when the server process id libpq got at startup
    /// is not the one the server reports (`pg_backend_pid()`) — PgBouncer, like other
    /// poolers, hands its clients a key of its own — the connection counts as going
    /// through a transaction pooler; otherwise as a session of its own.
    case automatic
    /// Session state lasts: a direct session, or a pooler in session mode.
    case session
    /// Each transaction may run in another server process (PgBouncer's `pool_mode =
    /// transaction`): named prepared statements are off (statements are sent unnamed,
    /// parsed with each execution), and `lock_timeout`, `bytea_output` and
    /// `extra_float_digits` are set in every transaction the library begins, since a
    /// session's `SET` would reach only one of the server processes.
    case transaction

    /// `automatic`, `session` or `transaction`.
    public var description: String {
        switch self {
        case .automatic: return "automatic"
        case .session: return "session"
        case .transaction: return "transaction"
        }
    }
}
