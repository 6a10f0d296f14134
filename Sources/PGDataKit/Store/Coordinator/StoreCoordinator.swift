import Foundation
import Logging
import Synchronization

/// Owns the model and the connection pool of one database, checks the live schema
/// against the model, and runs the statements contexts generate.
///
/// For example:
///
/// ```swift
/// let model = try Model(entities: [User.self, Post.self])
/// let coordinator = try StoreCoordinator(
///     model: model, configuration: ConnectionConfiguration(databaseURL))
/// let manager = ContextManager(coordinator: coordinator)
/// ```
///
/// Behind PgBouncer in transaction mode, the pool goes through PgBouncer and the change
/// listener keeps one direct session:
///
/// ```swift
/// let coordinator = try StoreCoordinator(
///     model: model, configuration: ConnectionConfiguration("postgres://app@pgbouncer:6432/app"),
///     listenerConfiguration: ConnectionConfiguration("postgres://app@db:5432/app"))
/// ```
public final class StoreCoordinator: Sendable {
    /// The entities.
    public let model: Model
    /// The connections contexts borrow.
    public let pool: ConnectionPool
    let logger: Logger
    /// Statements sent for contexts, counted by `execute` and the transaction helpers.
    let statementCounter = Atomic<Int>(0)
    /// How many saves committed with the change record made while their last `UPDATE`
    /// ran (`SavePipeline.RecordAhead`).
    let recordsMadeAhead = Atomic<Int>(0)
    /// How many update groups were sent with the arrays bound while the save's lock
    /// statement ran (`SavePipeline.UpdatesAhead`).
    let updatesBoundAhead = Atomic<Int>(0)
    /// SQL text of batch updates and inserts already built, by entity, columns and
    /// version check (a save sends the same few shapes again and again).
    let writeStatements = Mutex<[WriteStatementKey: String]>([:])
    /// This coordinator's identity in the change log: its own records are not merged
    /// again when they come back through the listener.
    public let origin: UUID
    /// `origin` as a statement parameter, its text written once.
    let originParameter: EncodedUUID
    /// How the change log is kept and followed.
    public let changeLogOptions: ChangeLogOptions
    let listener: ChangeListener
    /// Sends the notifications of this coordinator's saves after they committed.
    package let notifier: ChangeNotifier
    /// Where saves, retries and merges are counted (swift-metrics; see
    /// `PGDataKitMetrics`).
    let metrics: StoreMetrics
    /// Where saves, fetches, merges, refreshes and import batches make spans
    /// (swift-distributed-tracing; see `PGDataKitTracing`).
    let tracing: StoreTracing
    /// `tracing.isEnabled`, stored here: the hot paths (each statement, each save) test
    /// it with one load.
    let isTracing: Bool

    /// Told when the coordinator is closed (object controllers stop then).
    let closeObservers = CloseObservers()
    /// Closed by `beginShutdown()`: no new transactions from then on.
    let shutdownGate = ShutdownGate()
    /// Where async `perform` blocks that leased a connection run: a thread per pooled
    /// connection at most.
    let leasedWork: LeasedWorkThreads
    private let commitOutcomeTimeoutStorage = Mutex<Duration>(.seconds(10))
    /// Which entities' saves met contention lately (see `contentionWindow`).
    let saveContention = SaveContention()

    /// How long a save whose `COMMIT` went unanswered (the connection broke) keeps
    /// trying to find out on a new connection whether it committed, before it gives up
    /// with `SaveOutcomeUnknownError`: 10 seconds by default. It covers reconnecting
    /// while the server restarts or fails over, and waiting for a transaction still in
    /// progress.
    ///
    /// For example:
    ///
    /// ```swift
    /// manager.coordinator.commitOutcomeTimeout = .seconds(30)  // ride out a failover
    /// ```
    public var commitOutcomeTimeout: Duration {
        get { commitOutcomeTimeoutStorage.withLock { $0 } }
        set { commitOutcomeTimeoutStorage.withLock { $0 = newValue } }
    }

    /// Opens a pool to the database and, unless told not to, checks the schema.
    ///
    /// - Parameters:
    ///   - model: the entities.
    ///   - configuration: where the database is: the pool's connections. Through
    ///     PgBouncer in transaction mode, give the listener a direct connection with
    ///     `listenerConfiguration`.
    ///   - listenerConfiguration: where the change listener's own session goes (`nil`:
    ///     `configuration`). It keeps a `LISTEN` for as long as it runs, so it must be a
    ///     session of its own — a direct connection, or one through a session-mode
    ///     pooler — not one through a transaction pooler; when it is, the listener says
    ///     so once (`listenerError`).
    ///   - maximumConnections: the pool size; each private context with an open
    ///     transaction holds one connection.
    ///   - validatesSchema: compare the model with the live schema now.
    ///   - createsSchema: on a database holding none of the model's tables, create them
    ///     (`Model.schemaSQL()`) and the library's own first, as Core Data creates a
    ///     store; on one holding any of them, create nothing (the schema check lists what
    ///     differs). For development and tests: production schemas come from reviewed
    ///     migrations. Off by default.
    ///   - changeLog: retention and reconnection of the change log (see
    ///     `observeRemoteChanges(_:)`). Its table, `pgdatakit_changes`, is installed by
    ///     the migrator (`pgdatakit migrate`); here it is only checked, with the grants
    ///     the role needs.
    ///   - logger: where the coordinator, its pool and its change listener log (label
    ///     `pgdatakit` by default).
    /// - Throws: `ChangeLogError` (change log missing, or a grant missing), what creating
    ///   the schema throws (`createsSchema`: `MigrationError`, `ModelError`),
    ///   `SchemaMismatchError` listing every mismatch (missing grants included), or
    ///   `PostgresError`.
    public init(
        model: Model, configuration: ConnectionConfiguration, listenerConfiguration: ConnectionConfiguration? = nil,
        maximumConnections: Int = 10,
        validatesSchema: Bool = true, createsSchema: Bool = false, changeLog: ChangeLogOptions = ChangeLogOptions(),
        logger: Logger = Logger(label: "pgdatakit")
    ) throws {
        self.model = model
        let origin = UUID()
        self.origin = origin
        self.originParameter = EncodedUUID(origin)
        let newPool = ConnectionPool(configuration: configuration, maximumConnections: maximumConnections, logger: logger)
        self.pool = newPool
        self.leasedWork = LeasedWorkThreads(maximum: newPool.maximumConnections)
        if createsSchema { _ = try Self.createSchemaIfEmpty(model: model, pool: newPool, logger: logger) }
        self.logger = logger
        self.changeLogOptions = changeLog
        let metrics = StoreMetrics()
        self.metrics = metrics
        self.tracing = StoreTracing(configuration: configuration)
        self.isTracing = tracing.isEnabled
        let lackingForPruning = try pool.withConnection { try ChangeLog.check(on: $0) }
        let mayPrune = lackingForPruning.isEmpty
        if lackingForPruning == ["DELETE on \(ChangeLog.table)"] {
            logger.notice(
                "no DELETE privilege on \(ChangeLog.table): this process does not prune old change records; grant DELETE to one process's role or prune from a job")
        } else if !mayPrune {
            logger.notice(
                "this process does not prune old change records: pruning needs \(lackingForPruning.joined(separator: ", ")) besides DELETE on \(ChangeLog.table) (the history's horizon and readers)")
        }
        let pool = self.pool
        self.notifier = ChangeNotifier(configuration: configuration, logger: logger)
        self.listener = ChangeListener(
            configuration: listenerConfiguration ?? configuration, origin: origin, options: changeLog, prunes: mayPrune,
            metrics: metrics, logger: logger, notifier: notifier,
            sessionCheck: ListenerSessionCheck(origin: origin, logger: logger) { channel, payload in
                try pool.withConnection { try $0.notify(channel, payload: payload) }
            })
        if validatesSchema { try validateSchema() }
    }

    deinit {
        // The listener first: a relay this process hosts stops handing it the host's
        // other processes' payloads, then the notifier sends what it holds.
        listener.stop()
        notifier.close()
    }

    /// How many statements contexts of this coordinator have sent (for tests and
    /// statistics: a save of 1,000 new objects sends a handful, not 1,000).
    public var statementCount: Int { statementCounter.load(ordering: .relaxed) }

    /// Counts statements sent for contexts: in `statementCount`, and, while a tracer is
    /// bootstrapped, in the spans around them.
    @inline(__always)
    func countStatements(_ count: Int) {
        statementCounter.add(count, ordering: .relaxed)
        if isTracing, let tally = StatementTally.current { tally.add(count) }
    }
}
