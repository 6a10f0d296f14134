import Foundation
import Logging
import Synchronization

/// A bounded set of connections to one database, shared by threads and tasks.
///
/// `withConnection(_:)` borrows a connection for the length of a closure. When all are
/// busy the caller waits, up to `acquireTimeout`, then gets a `ConnectionPoolError`
/// rather than hanging. Borrowers are served first come, first served: a thread waits
/// blocked (`acquire(timeout:)`), a task waits suspended (`acquire(timeout:) async`,
/// which holds no thread while it waits and stops waiting when the task is cancelled).
/// Broken connections (server restarted, backend terminated) are dropped and replaced;
/// a connection returned inside a transaction is rolled back first, so nobody ever
/// receives one mid-transaction.
///
/// For example:
///
/// ```swift
/// let pool = ConnectionPool(
///     configuration: ConnectionConfiguration(url), maximumConnections: 8)
/// let names = try pool.withConnection { connection in
///     try connection.query("SELECT name FROM users").map { try $0.decode(String.self, at: 0) }
/// }
/// ```
///
/// The bookkeeping (idle connections, places, the queue of waiters) is a
/// `PoolStateMachine`; this class holds it under a lock and does what it answers.
public final class ConnectionPool: Sendable {
    /// The machine and the waiters it names, under one lock.
    struct State: ~Copyable {
        var machine: PoolStateMachine<Connection>
        /// Threads waiting in `acquire(timeout:)`, by waiter id.
        var threads: [UInt64: ThreadWaiter] = [:]
        /// Tasks waiting in `lease(timeout:)`, by waiter id.
        var tasks: [UInt64: CheckedContinuation<PoolStateMachine<Connection>.Lease, any Error>] = [:]
        var lastWaiter: UInt64 = 0

        /// A new waiter id.
        mutating func newWaiter() -> UInt64 {
            lastWaiter &+= 1
            return lastWaiter
        }
    }

    /// A thread waiting for a connection: woken by its semaphore once `lease` is set
    /// (`nil`: the pool closed).
    final class ThreadWaiter: @unchecked Sendable {
        // Safe to share: `lease` is written once, before `ready` is signalled, and read
        // only after the wait on `ready` returned.
        let ready = DispatchSemaphore(value: 0)
        var lease: PoolStateMachine<Connection>.Lease?
    }

    let state: Mutex<State>
    /// Where the pool's connections go.
    public let configuration: ConnectionConfiguration
    /// The most connections the pool opens at once.
    public let maximumConnections: Int
    /// How long `acquire` waits for a free connection by default.
    public let acquireTimeout: Duration
    let logger: Logger
    let metrics: PoolMetrics

    /// Creates a pool; connections open lazily, on first demand.
    ///
    /// - Parameters:
    ///   - configuration: where to connect.
    ///   - maximumConnections: the upper bound on open connections (at least 1).
    ///   - acquireTimeout: how long to wait when all connections are busy.
    ///   - logger: where the pool logs (label `pgdatakit.pool` by default).
    public init(
        configuration: ConnectionConfiguration, maximumConnections: Int = 10,
        acquireTimeout: Duration = .seconds(10),
        logger: Logger = Logger(label: "pgdatakit.pool")
    ) {
        self.configuration = configuration
        self.maximumConnections = max(1, maximumConnections)
        self.acquireTimeout = acquireTimeout
        self.logger = logger
        self.state = Mutex(State(machine: PoolStateMachine(maximum: maximumConnections)))
        self.metrics = PoolMetrics()
    }

    deinit { close() }

    /// Borrows a connection for `body` and returns it afterwards, even when `body`
    /// throws.
    ///
    /// - Throws: `ConnectionPoolError` when none frees up in time, `PostgresError` when
    ///   a new connection cannot be opened, or whatever `body` throws.
    public func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        let connection = try acquire()
        defer { release(connection) }
        return try body(connection)
    }

    /// What a thread asking for a connection does, as the machine answered.
    private enum ThreadDecision {
        /// Use this connection, or open one in this place.
        case ready(PoolStateMachine<Connection>.Lease)
        /// Wait on this waiter's semaphore.
        case wait(ThreadWaiter)
        /// The pool is closed.
        case refused
    }

    /// Takes a connection out of the pool, blocking the thread while it waits; give it
    /// back with `release(_:)`.
    ///
    /// - Parameter timeout: how long to wait for a free one (`acquireTimeout` if `nil`).
    /// - Throws: `ConnectionPoolError` or `PostgresError`.
    public func acquire(timeout: Duration? = nil) throws -> Connection {
        if let held = PoolHold.take(from: self) { return try connection(from: held) }
        let waited = timeout ?? acquireTimeout
        let start = metrics.isEnabled ? ContinuousClock.now : nil
        let (decision, id) = state.withLock { state -> (ThreadDecision, UInt64) in
            let id = state.newWaiter()
            switch state.machine.acquire(waiter: id) {
            case .use(let connection): return (.ready(.connection(connection)), id)
            case .open: return (.ready(.place), id)
            case .refuse: return (.refused, id)
            case .wait:
                // (Made only for a wait: most borrowings find a connection at once, and a
                // semaphore per borrowing showed in the instructions of a one-object save.)
                let waiter = ThreadWaiter()
                state.threads[id] = waiter
                return (.wait(waiter), id)
            }
        }
        let lease: PoolStateMachine<Connection>.Lease
        switch decision {
        case .ready(let ready): lease = ready
        case .refused: throw ConnectionPoolError.closed
        case .wait(let waiter):
            metrics.update(self)
            if waiter.ready.wait(timeout: .now() + Self.dispatchInterval(waited)) == .timedOut {
                let gaveUp = state.withLock { state in
                    guard state.machine.stoppedWaiting(id) else { return false }
                    state.threads[id] = nil
                    return true
                }
                if gaveUp {
                    metrics.update(self)
                    throw ConnectionPoolError.timedOut(waited: waited, maximumConnections: maximumConnections)
                }
                waiter.ready.wait()  // served just now: what it was handed is on its way
            }
            guard let handed = waiter.lease else { throw ConnectionPoolError.closed }
            lease = handed
        }
        metrics.waited(since: start, pool: self)
        return try connection(from: lease)
    }

    /// The connection a lease stands for: the idle one it names when that one is still
    /// good, otherwise a new one opened in its place.
    ///
    /// - Throws: `PostgresError` when a new connection cannot be opened (its place is
    ///   then handed on or freed).
    func connection(from lease: PoolStateMachine<Connection>.Lease) throws -> Connection {
        if case .connection(let connection) = lease {
            if connection.isUsable, connection.transactionStatus == .idle { return connection }
            logger.debug("dropping a broken pooled connection", metadata: ["server": "\(configuration)"])
            connection.close()
        }
        do {
            return try Connection(configuration, logger: logger)
        } catch {
            handOver(.place)
            throw error
        }
    }

    /// Gives a connection back. One still inside a transaction is rolled back; one that
    /// is broken is closed and its place freed for a new one.
    public func release(_ connection: Connection) {
        var healthy = !connection.isClosed
        if healthy, connection.transactionStatus != .idle {
            do {
                try connection.rollback()
            } catch {
                healthy = false
            }
            healthy = healthy && connection.transactionStatus == .idle
        }
        guard healthy, connection.isUsable else {
            connection.close()
            handOver(.place)
            return
        }
        if PoolHold.keep(connection, for: self) { return }
        handOver(.connection(connection))
    }

    /// Tells the machine that a healthy connection (`.connection`) or a free place
    /// (`.place`) came back and does what it answers: wakes the waiter it names (taken out
    /// of the state under the same lock), or closes the connection.
    func handOver(_ returned: PoolStateMachine<Connection>.Lease) {
        let (handover, waiter) = state.withLock { state -> (PoolStateMachine<Connection>.Handover, Waiter?) in
            let handover: PoolStateMachine<Connection>.Handover
            switch returned {
            case .connection(let connection): handover = state.machine.released(connection)
            case .place: handover = state.machine.placeFreed()
            }
            guard case .serve(let id, _) = handover else { return (handover, nil) }
            if let thread = state.threads.removeValue(forKey: id) { return (handover, .thread(thread)) }
            return (handover, state.tasks.removeValue(forKey: id).map { .task($0) })
        }
        switch handover {
        case .serve(_, let lease):
            switch waiter {
            case .thread(let waiter)?:
                waiter.lease = lease
                waiter.ready.signal()
            case .task(let continuation)?:
                continuation.resume(returning: lease)
            case nil:
                logger.error("the pool served a waiter it does not know")
            }
        case .keep:
            break
        case .close(let connection):
            connection.close()
        }
        metrics.update(self)
    }

    /// A waiter the machine named, taken out of the state with its answer.
    enum Waiter {
        case thread(ThreadWaiter)
        case task(CheckedContinuation<PoolStateMachine<Connection>.Lease, any Error>)
    }

    /// Closes idle connections and refuses new borrowing, failing every borrower that
    /// waits; borrowed connections are closed when they come back.
    public func close() {
        let (waiters, idle, threads, tasks) = state.withLock { state in
            let (waiters, idle) = state.machine.close()
            let threads = state.threads
            let tasks = state.tasks
            state.threads.removeAll()
            state.tasks.removeAll()
            return (waiters, idle, threads, tasks)
        }
        for id in waiters {
            if let waiter = threads[id] { waiter.ready.signal() }  // with no lease: closed
            tasks[id]?.resume(throwing: ConnectionPoolError.closed)
        }
        idle.forEach { $0.close() }
        metrics.update(self)
    }

    /// How many connections are open, and how many of those are idle.
    public var statistics: (open: Int, idle: Int) {
        state.withLock { ($0.machine.open, $0.machine.idle.count) }
    }

    /// How many borrowers (threads and tasks) wait for a connection.
    ///
    /// For example, a load balancer's health check might report `pool.waiting > 0` as
    /// saturation.
    public var waiting: Int {
        state.withLock { $0.machine.waiterCount }
    }

    /// `duration` as Dispatch's interval, capped at a day.
    static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        guard seconds < 86_400 else { return .seconds(86_400) }
        return .nanoseconds(Int(max(0, seconds)) * 1_000_000_000 + Int(max(0, attoseconds) / 1_000_000_000))
    }
}
