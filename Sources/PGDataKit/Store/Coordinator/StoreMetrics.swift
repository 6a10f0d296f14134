import CoreMetrics
import Foundation
import Synchronization

/// The names of the metrics PGDataKit reports through swift-metrics
/// (`apple/swift-metrics`), for dashboards and alerts.
///
/// Bootstrap a backend once at start-up (swift-prometheus, swift-otel, …) and every
/// `StoreCoordinator` made afterwards reports through it; with none bootstrapped nothing
/// is counted or allocated. Dimensions carry entity names, kinds and causes, never
/// values.
///
/// For example, with swift-prometheus:
///
/// ```swift
/// import Metrics
/// import Prometheus
///
/// let registry = PrometheusCollectorRegistry()
/// MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
/// let manager = try ContextManager(configuration: configuration, entities: [User.self])
/// ```
public enum PGDataKitMetrics {
    /// Counter: saves that committed changes. Dimension `context`: `main` or `private`.
    public static let saves = "pgdatakit_saves_total"
    /// Counter: objects written by committed saves. Dimensions `entity` and `kind`
    /// (`inserted`, `updated`, `deleted`).
    public static let savedObjects = "pgdatakit_saved_objects_total"
    /// Counter: transactions of saves and imports that failed on a cause a retry can
    /// overcome, whether the library redid the work or threw. Dimension `cause`:
    /// `conflict` (a row changed since it was read), `serialization` (`40001`),
    /// `deadlock` (`40P01`), `lock_timeout` (`55P03`, see
    /// `ConnectionConfiguration.lockTimeout`), `statement_lost` (`26000`),
    /// `connection_lost` (the connection broke before the commit: nothing was written),
    /// `row_held` (an import's keyed insert met a row committed since it looked, held by
    /// another transaction: the save is redone locking it in order, see
    /// `ManagedObjectContext.save()`).
    public static let transientFailures = "pgdatakit_transient_failures_total"
    /// Counter: units of work the library redid. Dimensions `cause` (as for
    /// `transientFailures`) and `unit`: `save` (a save redone in a read-committed
    /// transaction that resolves conflicts), `import` (an import batch). A save that
    /// started in that mode because its entities were contended
    /// (`StoreCoordinator.contentionWindow`) is not counted.
    public static let retries = "pgdatakit_retries_total"
    /// Counter: other processes' change records read by this process's listener.
    public static let remoteChanges = "pgdatakit_remote_changes_total"
    /// Timer: from the start of another process's saving transaction (the server's
    /// clock) to this process's listener reading its change record.
    public static let listenerLag = "pgdatakit_listener_lag_seconds"
    /// Counter: other processes' change records merged into a main context.
    public static let merges = "pgdatakit_merges_total"
    /// Timer: from the start of another process's saving transaction (the server's
    /// clock) to its changes being merged into this process's main context.
    public static let mergeLatency = "pgdatakit_merge_latency_seconds"
    /// Counter: records imported (`insertOrUpdate` batches of import operations).
    /// Dimension `entity`.
    public static let importedRecords = "pgdatakit_imported_records_total"
    /// Gauge: the pool's connections, by dimension `state`: `in_use` and `idle`
    /// (`ConnectionPoolMetrics.connections`).
    public static let poolConnections = ConnectionPoolMetrics.connections
    /// Gauge: threads and tasks waiting for a pooled connection
    /// (`ConnectionPoolMetrics.waiters`).
    public static let poolWaiters = ConnectionPoolMetrics.waiters
    /// Timer: how long each borrowing waited for its pooled connection
    /// (`ConnectionPoolMetrics.waitTime`).
    public static let poolWaitTime = ConnectionPoolMetrics.waitTime
    /// Timer: each round trip to the server, by dimension `kind` (`statement`,
    /// `pipeline`, `copy`) (`ConnectionPoolMetrics.statementTime`).
    public static let statementTime = ConnectionPoolMetrics.statementTime
}

/// What made a transaction fail in a way a retry can overcome, as the `cause` dimension.
enum TransientCause: String, Sendable {
    case conflict
    case serialization
    case deadlock
    case lockTimeout = "lock_timeout"
    case statementLost = "statement_lost"
    /// The connection broke before the transaction committed (`PostgresError.transactionDidNotCommit`).
    case connectionLost = "connection_lost"
    /// Keyed inserts met a row another transaction holds (`KeyedInsertsMetUnlockedRows`).
    case rowHeld = "row_held"
    case other

    /// The cause of a database error, `nil` when a retry cannot help (callers above the
    /// Store map their own errors, such as merge conflicts, to `.conflict`).
    init?(_ error: any Error) {
        switch error {
        case let error as PostgresError:
            switch error.sqlState {
            case .serializationFailure?: self = .serialization
            case .deadlockDetected?: self = .deadlock
            case .lockNotAvailable?: self = .lockTimeout
            case .invalidSQLStatementName?: self = .statementLost
            default:
                guard error.transactionDidNotCommit else { return nil }
                self = .connectionLost
            }
        case is UpsertVanishedRowError: self = .conflict
        default: return nil
        }
    }
}

/// A coordinator's metric handlers, made from the factory bootstrapped when it was
/// created. When that is swift-metrics' no-op factory, `isEnabled` is false and the
/// callers skip even the counting.
final class StoreMetrics: Sendable {
    let isEnabled: Bool
    private let factory: any MetricsFactory
    /// Counters with dimensions, made on first use.
    private let counters = Mutex<[String: any CounterHandler]>([:])
    private let timers = Mutex<[String: any TimerHandler]>([:])

    init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        isEnabled = !(factory is NOOPMetricsHandler)
    }

    /// Adds to a counter.
    func count(_ label: String, _ dimensions: [(String, String)] = [], by amount: Int = 1) {
        guard isEnabled, amount > 0 else { return }
        let key = Self.key(label, dimensions)
        let handler = counters.withLock { handlers in
            if let handler = handlers[key] { return handler }
            let handler = factory.makeCounter(label: label, dimensions: dimensions)
            handlers[key] = handler
            return handler
        }
        handler.increment(by: Int64(amount))
    }

    /// Records a duration.
    func record(_ label: String, seconds: Double) {
        guard isEnabled, seconds.isFinite else { return }
        let handler = timers.withLock { handlers in
            if let handler = handlers[label] { return handler }
            let handler = factory.makeTimer(label: label, dimensions: [])
            handlers[label] = handler
            return handler
        }
        handler.recordNanoseconds(Int64(Swift.max(0, Swift.min(seconds, 1e9)) * 1e9))
    }

    /// A failure a retry can overcome (nothing for `nil`).
    func transientFailure(_ cause: TransientCause?) {
        guard isEnabled, let cause else { return }
        count(PGDataKitMetrics.transientFailures, [("cause", cause.rawValue)])
    }

    /// A unit of work redone.
    func retry(_ cause: TransientCause?, unit: String) {
        guard isEnabled else { return }
        count(PGDataKitMetrics.retries, [("cause", (cause ?? .other).rawValue), ("unit", unit)])
    }

    /// A committed save: one save, and its objects by entity and kind.
    func saved(_ changes: ContextChanges, context: String) {
        guard isEnabled else { return }
        count(PGDataKitMetrics.saves, [("context", context)])
        for (kind, ids) in [("inserted", changes.inserted), ("updated", changes.updated), ("deleted", changes.deleted)] {
            var byEntity: [String: Int] = [:]
            for id in ids { byEntity[id.entityName, default: 0] += 1 }
            for (entity, count) in byEntity {
                self.count(PGDataKitMetrics.savedObjects, [("entity", entity), ("kind", kind)], by: count)
            }
        }
    }

    /// Change records read or merged, with the delay since each saving transaction began.
    func received(_ records: [ChangeRecord], label: String, latency: String, now: Date = Date()) {
        guard isEnabled else { return }
        count(label, by: records.count)
        for changeRecord in records { record(latency, seconds: now.timeIntervalSince(changeRecord.time)) }
    }

    private static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        dimensions.reduce(label) { $0 + "\u{1}" + $1.0 + "=" + $1.1 }
    }
}
