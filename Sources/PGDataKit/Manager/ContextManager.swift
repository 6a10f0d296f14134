import Logging
import Synchronization

/// The entry point (SQKDataKit's context manager): one coordinator, one long-lived main
/// context, and private contexts for units of work, whose saves are merged into the main
/// context right after they commit.
///
/// For example:
///
/// ```swift
/// let manager = try ContextManager(
///     configuration: ConnectionConfiguration(databaseURL), entities: [User.self, Post.self])
///
/// let context = manager.newPrivateContext()
/// try context.performAndWait {
///     let user = User(context: context)
///     user.userID = "u1"
///     try context.save()
/// }
///
/// let names = try manager.mainContext.performAndWait {
///     try manager.mainContext.fetchAll(User.self).map(\.userID)
/// }
/// ```
///
/// Behind PgBouncer in transaction mode, the pool goes through PgBouncer and the
/// listener keeps a direct session:
///
/// ```swift
/// let manager = try ContextManager(
///     configuration: ConnectionConfiguration("postgres://app@pgbouncer:6432/app"),
///     listenerConfiguration: ConnectionConfiguration("postgres://app@db:5432/app"),
///     entities: [User.self, Post.self])
/// ```
///
/// From async code use `try await context.perform { … }`; from plain threads use
/// `performAndWait`. The main context has a serial queue of its own (a server has no UI
/// thread): every use of it goes through these two.
///
/// Saves of other processes reach the main context too: the coordinator's listener reads
/// them from the change log and the main context merges each batch (one refresh query
/// per entity), then posts objects-did-change with the object IDs and changed keys. Turn
/// it off with `automaticallyMergesRemoteChanges = false`.
///
/// Until `mainContext` is first read, nothing is merged into it (it holds nothing, and
/// nobody can observe it): a worker process that only uses private contexts spends no
/// thread hop and no work merging saves, its own or other processes'.
public final class ContextManager: Sendable {
    /// The coordinator all contexts share.
    public let coordinator: StoreCoordinator
    /// The long-lived context where private contexts' and other processes' saves are
    /// merged — from the first time it is read: before that, saves are not merged into it
    /// (nothing can be in it or observe it yet), and so the merges metric, the merge spans
    /// and objects-did-change count only merges after that. A save that commits before the
    /// first read is not merged later; a fetch after the read sees it anyway.
    public var mainContext: ManagedObjectContext {
        mainContextUse.noteHandedOut()
        return main
    }
    /// The main context, for the manager's own merges (which must not count as a use).
    private let main: ManagedObjectContext
    /// Whether `mainContext` was read.
    private let mainContextUse = MainContextUse()
    let logger: Logger
    private let remoteObservation = Mutex<ObserverToken?>(nil)

    /// Creates a manager over a coordinator.
    ///
    /// - Parameters:
    ///   - coordinator: the model and connection pool every context of this manager uses.
    ///   - automaticallyMergesRemoteChanges: merge other processes' saves into the main
    ///     context (starts the coordinator's listener now).
    ///   - logger: where the manager and its contexts log; the coordinator's logger by
    ///     default.
    public init(coordinator: StoreCoordinator, automaticallyMergesRemoteChanges: Bool = true, logger: Logger? = nil) {
        let logger = logger ?? coordinator.logger
        self.coordinator = coordinator
        self.logger = logger
        self.main = ManagedObjectContext(concurrencyType: .main, coordinator: coordinator, name: "main", logger: logger)
        self.automaticallyMergesRemoteChanges = automaticallyMergesRemoteChanges
    }

    /// Builds the model, opens the pool, checks the schema and starts listening for other
    /// processes' saves.
    ///
    /// - Parameters:
    ///   - configuration: where the database is (URL or libpq `key=value` string): the
    ///     pool's connections, which may go through PgBouncer in transaction mode.
    ///   - listenerConfiguration: where the change listener's own session goes (`nil`:
    ///     `configuration`); a direct connection when the pool goes through a transaction
    ///     pooler (see `StoreCoordinator/listenerError`).
    ///   - entities: the `ManagedObject` subclasses of the model.
    ///   - maximumConnections: the pool size; each private context with an open
    ///     transaction holds one connection.
    ///   - automaticallyMergesRemoteChanges: merge other processes' saves into the main
    ///     context.
    ///   - createsSchema: create the model's tables and the library's own on a database
    ///     holding none of the model's tables (for development and tests; see the
    ///     coordinator's initializer).
    ///     For example, a test's store with no SQL written:
    ///     `try ContextManager(configuration: url, entities: [User.self, Post.self], createsSchema: true)`.
    ///   - changeLog: retention and reconnect settings of the change log.
    ///   - logger: where the coordinator, its listener, the manager and its contexts log
    ///     (label `pgdatakit` by default).
    /// - Throws: `ModelError`, `SchemaMismatchError`, `MigrationError` (`createsSchema`)
    ///   or `PostgresError`.
    public convenience init(
        configuration: ConnectionConfiguration, listenerConfiguration: ConnectionConfiguration? = nil,
        entities: [ManagedObject.Type], maximumConnections: Int = 10,
        automaticallyMergesRemoteChanges: Bool = true, createsSchema: Bool = false,
        changeLog: ChangeLogOptions = ChangeLogOptions(), logger: Logger = Logger(label: "pgdatakit")
    ) throws {
        let model = try Model(entities: entities)
        self.init(
            coordinator: try StoreCoordinator(
                model: model, configuration: configuration, listenerConfiguration: listenerConfiguration,
                maximumConnections: maximumConnections, createsSchema: createsSchema,
                changeLog: changeLog, logger: logger),
            automaticallyMergesRemoteChanges: automaticallyMergesRemoteChanges, logger: logger)
    }

    /// Whether other processes' saves are merged into the main context (default `true`).
    /// Private contexts never merge them: each keeps its transaction's snapshot until it
    /// saves, rolls back or resets.
    public var automaticallyMergesRemoteChanges: Bool {
        get { remoteObservation.withLock { $0 != nil } }
        set {
            let main = self.main
            let use = mainContextUse
            let logger = self.logger
            let previous = remoteObservation.withLock { token -> ObserverToken? in
                guard newValue != (token != nil) else { return nil }
                let previous = token
                // Records that arrive while a merge is waiting for the main context's queue
                // join it: a burst of saves is one merge (one refresh per entity), however
                // many notifications it came in.
                let pending = Mutex<[ChangeRecord]?>(nil)
                token = newValue
                    ? coordinator.observeRemoteChangeBatches(wants: { use.handedOut }) { records in
                        guard use.handedOut else { return }
                        let schedule = pending.withLock { waiting -> Bool in
                            if waiting != nil {
                                waiting?.append(contentsOf: records)
                                return false
                            }
                            waiting = records
                            return true
                        }
                        guard schedule else { return }
                        let metrics = main.coordinator.metrics
                        main.perform {
                            let records = pending.withLock { waiting -> [ChangeRecord] in
                                defer { waiting = nil }
                                return waiting ?? []
                            }
                            var changes = ContextChanges()
                            for record in records { changes.formUnion(record.changes) }
                            if Self.merge(changes, into: main, logger: logger, what: "merging other processes' saves") {
                                metrics.received(records, label: PGDataKitMetrics.merges, latency: PGDataKitMetrics.mergeLatency)
                            }
                        }
                    } : nil
                return previous
            }
            previous?.cancel()
        }
    }

    deinit {
        // The observation holds the main context (and so the coordinator): end it, so
        // the coordinator and its listener can go when nothing else holds them.
        remoteObservation.withLock { $0 }?.cancel()
    }

    /// Stops merging other processes' saves and closes the coordinator (its listener and
    /// pool).
    public func close() {
        automaticallyMergesRemoteChanges = false
        coordinator.close()
    }

    /// A new private context: a transaction of its own, begun on first use.
    ///
    /// The manager observes its saves (and batch deletes) and merges each into the main
    /// context right after commit while the context's `shouldMergeOnSave` is `true`, as
    /// Core Data users do with the did-save notification. The context knows nothing of
    /// the manager.
    ///
    /// A request's logger (with its metadata: a request id, a route) makes the context's
    /// log lines — saves redone, conflicts settled, transactions rolled back — carry it:
    ///
    /// ```swift
    /// var requestLogger = logger
    /// requestLogger[metadataKey: "request"] = "\(requestID)"
    /// let context = manager.newPrivateContext(name: "POST /users", logger: requestLogger)
    /// ```
    ///
    /// - Parameters:
    ///   - name: a label for logs and the context's queue (`private` by default).
    ///   - logger: where the context logs; the manager's logger by default.
    public func newPrivateContext(name: String? = nil, logger: Logger? = nil) -> ManagedObjectContext {
        let context = ManagedObjectContext(
            concurrencyType: .private, coordinator: coordinator, name: name, logger: logger ?? self.logger)
        let main = self.main
        let use = mainContextUse
        let managerLogger = self.logger
        // Did-save observers run on the context's queue, so reading the flag is safe.
        context.observers.addForLifetime { [weak context] changes in
            guard use.handedOut, context?.shouldMergeOnSave ?? false else { return }
            main.perform {
                _ = Self.merge(changes, into: main, logger: managerLogger, what: "merging a save")
            }
        }
        return context
    }

    /// Merges `changes` into `main` (called on its queue) and says whether that worked.
    /// A merge that fails on a lost or refused connection (a server restarting) is tried
    /// again for up to 30 s (`retryingLostConnections`) rather than dropped: the main
    /// context would otherwise differ from the database until those objects change again.
    private static func merge(
        _ changes: ContextChanges, into main: ManagedObjectContext, logger: Logger, what: String
    ) -> Bool {
        do {
            try main.retryingLostConnections("\(what) into the main context") { try main.mergeChanges(changes) }
            return true
        } catch ShutdownError.Code.shuttingDown {
            logger.debug("\(what) into the main context skipped: shutting down")
            return false
        } catch {
            logger.error("\(what) into the main context failed: \(error)")
            return false
        }
    }
}

/// Whether a manager's `mainContext` was read. Merges into the main context are skipped
/// until then, and that is safe: the flag is set before the reader can do anything with
/// the context, so a merge skipped (the flag read as unset after the save committed)
/// comes before any fetch of the reader's, which sees the save. For the same reason the
/// listener does not even read a notification's changes while the flag is unset and no
/// other observer wants records (`ChangeListener.add(_:wants:)`). Sequentially consistent:
/// the setting and the reading are ordered with the commits and fetches around them.
private final class MainContextUse: Sendable {
    private let flag = Atomic<Bool>(false)

    /// Whether the main context was handed out.
    var handedOut: Bool { flag.load(ordering: .sequentiallyConsistent) }

    /// Notes that the main context was handed out (once; later reads are plain loads).
    func noteHandedOut() {
        if !flag.load(ordering: .sequentiallyConsistent) { flag.store(true, ordering: .sequentiallyConsistent) }
    }
}
