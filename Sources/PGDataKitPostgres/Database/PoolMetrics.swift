import CoreMetrics

/// The names of the metrics a `ConnectionPool` reports through swift-metrics
/// (`apple/swift-metrics`), for dashboards and alerts. (PGDataKit's own are in
/// `PGDataKitMetrics`, which repeats these.)
///
/// Bootstrap a backend once at start-up, before the pool is made; with none bootstrapped
/// nothing is recorded. No dimension carries a value or a server address.
///
/// For example, alert when borrowers queue for long:
///
/// ```swift
/// print(ConnectionPoolMetrics.waitTime)   // pgdatakit_pool_wait_seconds
/// ```
public enum ConnectionPoolMetrics {
    /// Gauge: the pool's connections, by dimension `state`: `in_use` (borrowed, or being
    /// opened for a borrower) and `idle`.
    public static let connections = "pgdatakit_pool_connections"
    /// Gauge: borrowers (threads and tasks) waiting for a connection.
    public static let waiters = "pgdatakit_pool_waiters"
    /// Timer: how long each borrowing waited for its connection (from asking to being
    /// handed a connection or a place to open one; 0 when one was free).
    public static let waitTime = "pgdatakit_pool_wait_seconds"
    /// Timer: each round trip a connection makes to the server, pooled or not, by
    /// dimension `kind`: `statement` (one statement), `pipeline` (several in one round
    /// trip, as a save's `BEGIN` … `COMMIT`) or `copy`. Failed and cancelled ones count
    /// too. Recorded by connections opened after a backend was bootstrapped.
    public static let statementTime = "pgdatakit_statement_seconds"
}

/// A pool's metric handlers, made from the factory bootstrapped when the pool was made.
/// When that is swift-metrics' no-op factory, `isEnabled` is false and nothing is read
/// or recorded.
final class PoolMetrics: Sendable {
    let isEnabled: Bool
    private let inUse: (any RecorderHandler)?
    private let idle: (any RecorderHandler)?
    private let waiters: (any RecorderHandler)?
    private let waitTime: (any TimerHandler)?

    init(factory: any MetricsFactory = MetricsSystem.factory) {
        isEnabled = !(factory is NOOPMetricsHandler)
        guard isEnabled else {
            (inUse, idle, waiters, waitTime) = (nil, nil, nil, nil)
            return
        }
        let label = ConnectionPoolMetrics.connections
        inUse = factory.makeRecorder(label: label, dimensions: [("state", "in_use")], aggregate: false)
        idle = factory.makeRecorder(label: label, dimensions: [("state", "idle")], aggregate: false)
        waiters = factory.makeRecorder(label: ConnectionPoolMetrics.waiters, dimensions: [], aggregate: false)
        waitTime = factory.makeTimer(label: ConnectionPoolMetrics.waitTime, dimensions: [])
    }

    /// Records the pool's gauges as they are now.
    func update(_ pool: ConnectionPool) {
        guard isEnabled else { return }
        let (open, idleCount, waiting) = pool.state.withLock {
            ($0.machine.open, $0.machine.idle.count, $0.machine.waiterCount)
        }
        inUse?.record(Int64(open - idleCount))
        idle?.record(Int64(idleCount))
        waiters?.record(Int64(waiting))
    }

    /// A borrowing that asked at `start` was served now (nothing when `start` is `nil`:
    /// metrics were off when it asked).
    func waited(since start: ContinuousClock.Instant?, pool: ConnectionPool) {
        guard let start, let waitTime else { return }
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        waitTime.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        update(pool)
    }
}
