import Dispatch
import Foundation
import Synchronization

extension ConnectionPool {
    /// Takes a connection out of the pool from async code; give it back with
    /// `release(_:)`. While every connection is busy the task waits suspended, holding no
    /// thread, in line with the threads and tasks that asked before it.
    ///
    /// For example:
    ///
    /// ```swift
    /// let connection = try await pool.acquire()
    /// defer { pool.release(connection) }
    /// ```
    ///
    /// - Parameter timeout: how long to wait for a free one (`acquireTimeout` if `nil`).
    /// - Throws: `CancellationError` when the task is cancelled while it waits,
    ///   `ConnectionPoolError` (timed out, closed) or `PostgresError` (a new connection
    ///   could not be opened; it is opened on a thread of Dispatch's pool, not the task's).
    public func acquire(timeout: Duration? = nil) async throws -> Connection {
        let lease = try await waitForLease(timeout: timeout)
        if case .connection(let connection) = lease, connection.isUsable, connection.transactionStatus == .idle {
            return connection
        }
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try self.connection(from: lease) })
            }
        }
    }

    /// Waits, suspended, for a connection or a place to open one in, and hands it over
    /// unopened and unchecked: whoever uses it does that on its own thread
    /// (`holding(_:_:)`).
    ///
    /// - Throws: `CancellationError`, or `ConnectionPoolError` (timed out, closed).
    package func lease(timeout: Duration? = nil) async throws -> ConnectionLease {
        ConnectionLease(pool: self, lease: try await waitForLease(timeout: timeout))
    }

    /// Runs `body` holding `lease` on the current thread: the first connection `body`
    /// borrows from this pool (`acquire`, `withConnection`) is the lease's, and a
    /// connection `body` gives back while the thread holds none is kept for its next
    /// borrowing instead of going back to the pool. What the thread holds when `body`
    /// ends goes back to the pool. So a piece of work that waited for its lease without
    /// a thread never waits for a connection again while it runs; a connection `body`
    /// keeps (an open transaction) leaves the hold with it.
    package static func holding<T>(_ lease: ConnectionLease?, _ body: () throws -> T) rethrows -> T {
        guard let lease, let held = lease.take() else { return try body() }
        return try PoolHold.run(PoolHold(pool: lease.pool, slot: held), body)
    }

    /// What `lease` and `acquire() async` wait for.
    private func waitForLease(timeout: Duration?) async throws -> PoolStateMachine<Connection>.Lease {
        let waited = timeout ?? acquireTimeout
        let start = metrics.isEnabled ? ContinuousClock.now : nil
        let id = state.withLock { $0.newWaiter() }
        let lease = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<PoolStateMachine<Connection>.Lease, any Error>) in
                let action = state.withLock { state -> PoolStateMachine<Connection>.Action? in
                    // (Checked under the lock: a cancellation after it finds the waiter.)
                    if Task.isCancelled { return nil }
                    let action = state.machine.acquire(waiter: id)
                    if case .wait = action { state.tasks[id] = continuation }
                    return action
                }
                switch action {
                case nil: continuation.resume(throwing: CancellationError())
                case .use(let connection)?: continuation.resume(returning: .connection(connection))
                case .open?: continuation.resume(returning: .place)
                case .refuse?: continuation.resume(throwing: ConnectionPoolError.closed)
                case .wait?:
                    metrics.update(self)
                    let maximum = maximumConnections
                    DispatchQueue.global().asyncAfter(deadline: .now() + Self.dispatchInterval(waited)) {
                        [weak self] in
                        self?.stopWaiting(id, throwing: ConnectionPoolError.timedOut(waited: waited, maximumConnections: maximum))
                    }
                }
            }
        } onCancel: {
            stopWaiting(id, throwing: CancellationError())
        }
        metrics.waited(since: start, pool: self)
        return lease
    }

    /// A waiting task gives up: it is woken with `error` unless it was served already.
    private func stopWaiting(_ id: UInt64, throwing error: any Error) {
        let continuation = state.withLock { state in
            state.machine.stoppedWaiting(id) ? state.tasks.removeValue(forKey: id) : nil
        }
        guard let continuation else { return }
        continuation.resume(throwing: error)
        metrics.update(self)
    }
}

/// A connection (or a place to open one in) handed to a task that waited for it without a
/// thread; the task's work takes it on the thread it runs on (`ConnectionPool.holding`).
/// Given back to the pool when not taken, at the latest when the lease goes away.
package final class ConnectionLease: Sendable {
    /// The pool it came from.
    let pool: ConnectionPool
    private let lease: Mutex<PoolStateMachine<Connection>.Lease?>

    init(pool: ConnectionPool, lease: PoolStateMachine<Connection>.Lease) {
        self.pool = pool
        self.lease = Mutex(lease)
    }

    deinit { giveBack() }

    /// What the lease holds, once; `nil` when it was taken or given back.
    func take() -> PoolStateMachine<Connection>.Lease? {
        lease.withLock { lease in
            defer { lease = nil }
            return lease
        }
    }

    /// Gives what the lease holds back to the pool, if it was not taken.
    package func giveBack() {
        guard let held = take() else { return }
        pool.handOver(held)
    }
}

/// What a thread holds of one pool while it runs a piece of work that leased it
/// (`ConnectionPool.holding`): one connection or place, or nothing while the work uses
/// it. Only its own thread touches it.
final class PoolHold {
    let pool: ConnectionPool
    var slot: PoolStateMachine<Connection>.Lease?

    init(pool: ConnectionPool, slot: PoolStateMachine<Connection>.Lease) {
        self.pool = pool
        self.slot = slot
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The hold of the current thread, if any.
    private static var current: PoolHold? {
        // Unsafe: the slot holds an unretained hold only while `run` keeps it alive.
        pthread_getspecific(key).map { Unmanaged<PoolHold>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Runs `body` with `hold` as the current thread's, then gives back what it holds.
    static func run<T>(_ hold: PoolHold, _ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(key)
        // Unsafe: `hold` is kept alive until `body` returns (withExtendedLifetime), and the
        // slot is set back before that.
        pthread_setspecific(key, Unmanaged.passUnretained(hold).toOpaque())
        defer {
            pthread_setspecific(key, previous)
            if let held = hold.slot {
                hold.slot = nil
                hold.pool.handOver(held)
            }
        }
        return try withExtendedLifetime(hold) { try body() }
    }

    /// What the current thread holds of `pool`, taken; `nil` when it holds nothing.
    static func take(from pool: ConnectionPool) -> PoolStateMachine<Connection>.Lease? {
        guard let hold = current, hold.pool === pool, let held = hold.slot else { return nil }
        hold.slot = nil
        return held
    }

    /// Keeps a healthy connection given back to `pool` when the current thread's hold of
    /// it is empty.
    ///
    /// - Returns: whether it was kept (otherwise it goes back to the pool).
    static func keep(_ connection: Connection, for pool: ConnectionPool) -> Bool {
        guard let hold = current, hold.pool === pool, hold.slot == nil else { return false }
        hold.slot = .connection(connection)
        return true
    }
}
