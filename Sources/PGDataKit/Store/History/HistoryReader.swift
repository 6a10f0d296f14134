import Foundation

/// A named, durable consumer of the change log's history: it reads after the token it
/// last acknowledged, which is stored in the database, and pruning keeps the records it
/// has not acknowledged (Core Data's persistent history with a purge that waits for every
/// reader). Get one with `StoreCoordinator.historyReader(named:startingAt:)`.
///
/// For example, a worker that feeds another service exactly once:
///
/// ```swift
/// let reader = try coordinator.historyReader(named: "search-index")
/// for try await record in reader.records() {
///     try searchIndex.apply(record.changes)
///     try await reader.acknowledge(record)    // a restart goes on after this record
/// }
/// ```
///
/// From async code, use the async forms of `acknowledge` and `acknowledgedToken()`: they
/// wait for a pooled connection without a thread and run their statement off the
/// cooperative threads. The synchronous forms block the calling thread while they wait
/// for a connection and for the server.
///
/// What the consumer did and what it acknowledged must agree after a crash: either make
/// applying a record idempotent, or store the token with the effect and acknowledge from
/// there — in the same PostgreSQL transaction (`acknowledge(_:on:)`), or by writing it
/// beside the effect and acknowledging it again at start-up.
public final class HistoryReader: Sendable {
    /// Where a newly registered reader starts.
    public enum Start: Sendable, Equatable {
        /// With every record the change log still holds (`oldestHistoryToken()`).
        case oldest
        /// After everything committed so far (`currentHistoryToken()`).
        case now
        /// After this token.
        case token(HistoryToken)
    }

    /// A registered reader as `StoreCoordinator.historyReaders()` lists it.
    public struct Status: Sendable, Equatable {
        /// The reader's name.
        public let name: String
        /// Where it stands: the token it last acknowledged (or started at).
        public let acknowledgedToken: HistoryToken
        /// When it last acknowledged (or was registered): it holds pruning until
        /// `ChangeLogOptions.maximumHistoryReaderAge` after this.
        public let acknowledgedAt: Date
        /// When it was registered.
        public let registeredAt: Date
    }

    /// The reader's name.
    public let name: String
    private let coordinator: StoreCoordinator

    init(name: String, coordinator: StoreCoordinator) {
        self.name = name
        self.coordinator = coordinator
    }

    /// Every record after the reader's acknowledged token (read from the database when
    /// iteration starts), replayed and then live, as `StoreCoordinator.history(after:)`.
    ///
    /// - Throws (while iterating): `HistoryError.readerNotRegistered` when the reader
    ///   was dropped, `HistoryError.historyExpired` when records it had not acknowledged
    ///   were pruned (it was silent for longer than the maximum reader age), and what
    ///   `history(after:)` throws.
    public func records() -> HistorySequence {
        HistorySequence(coordinator: coordinator, start: .reader(name))
    }

    /// The token the reader last acknowledged, from the database — or the same position
    /// cleaned since: before each prune, transactions the token lists as running that
    /// ended without a change record (of any database: transaction IDs are the server's)
    /// are dropped from it. Reading after either gives the same records, but the two may
    /// differ as values (the cleaned one compares greater).
    ///
    /// - Throws: `HistoryError.readerNotRegistered`, `ChangeLogError.notInstalled`,
    ///   `PostgresError`.
    public func acknowledgedToken() throws -> HistoryToken {
        try coordinator.pool.withConnection { try ChangeLog.acknowledgedToken(reader: name, on: $0) }
    }

    /// Records that everything up to `token` is processed: a restart reads after it, and
    /// pruning may delete what it covers. One statement; acknowledging every record is
    /// fine, acknowledging every few hundred is cheaper. Tokens of one feed only move
    /// forward; acknowledging an earlier token moves the reader back (as long as the log
    /// still holds what lies after it).
    ///
    /// - Throws: `HistoryError.readerNotRegistered` when the reader was dropped,
    ///   `ChangeLogError.notInstalled`, `PostgresError`.
    public func acknowledge(_ token: HistoryToken) throws {
        try coordinator.pool.withConnection { try ChangeLog.acknowledge(token, reader: name, on: $0) }
    }

    /// Acknowledges everything up to and including `record` (its `historyToken`).
    ///
    /// - Throws: `HistoryError.recordWithoutToken` for a record that did not come from a
    ///   history read; then as `acknowledge(_:)`.
    public func acknowledge(_ record: ChangeRecord) throws {
        guard let token = record.historyToken else { throw HistoryError.recordWithoutToken(recordID: record.id) }
        try acknowledge(token)
    }

    /// `acknowledgedToken()` for async code: waits for a pooled connection suspended
    /// and reads off the cooperative threads.
    ///
    /// - Throws: as `acknowledgedToken()`, or `CancellationError` while it waits for a
    ///   connection.
    public func acknowledgedToken() async throws -> HistoryToken {
        let (coordinator, name) = (self.coordinator, self.name)
        return try await coordinator.offCooperativeThreads {
            try coordinator.pool.withConnection { try ChangeLog.acknowledgedToken(reader: name, on: $0) }
        }
    }

    /// `acknowledge(_:)` for async code: waits for a pooled connection suspended and
    /// writes off the cooperative threads.
    ///
    /// For example:
    ///
    /// ```swift
    /// try await reader.acknowledge(lastToken)
    /// ```
    ///
    /// - Throws: as `acknowledge(_:)`, or `CancellationError` while it waits for a
    ///   connection.
    public func acknowledge(_ token: HistoryToken) async throws {
        let (coordinator, name) = (self.coordinator, self.name)
        try await coordinator.offCooperativeThreads {
            try coordinator.pool.withConnection { try ChangeLog.acknowledge(token, reader: name, on: $0) }
        }
    }

    /// `acknowledge(_:)` of a record for async code (see `acknowledge(_:) async`).
    ///
    /// - Throws: `HistoryError.recordWithoutToken` for a record that did not come from a
    ///   history read; then as `acknowledge(_:) async`.
    public func acknowledge(_ record: ChangeRecord) async throws {
        guard let token = record.historyToken else { throw HistoryError.recordWithoutToken(recordID: record.id) }
        try await acknowledge(token)
    }

    /// Acknowledges `token` on `connection`, inside the transaction the caller has open
    /// there: the acknowledgement commits or rolls back with the caller's own writes —
    /// exactly once into a table of the same database.
    ///
    /// For example:
    ///
    /// ```swift
    /// try connection.transaction { connection in
    ///     try connection.execute("INSERT INTO audit (record_id) VALUES ($1)", [record.id])
    ///     try reader.acknowledge(token, on: connection)
    /// }
    /// ```
    ///
    /// - Throws: `HistoryError.readerNotRegistered`, `ChangeLogError.notInstalled`,
    ///   `PostgresError`.
    public func acknowledge(_ token: HistoryToken, on connection: Connection) throws {
        try ChangeLog.acknowledge(token, reader: name, on: connection)
    }
}
