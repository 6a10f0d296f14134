import Foundation
import PGDataKitPostgres

/// The ways into a context's queue: `perform` (async, or fire-and-forget) and
/// `performAndWait`, and the checks that the context is used on it.
extension ManagedObjectContext {
    /// Whether the caller runs on this context's queue: inside a block of it, also one
    /// further down the thread's stack (a parent's block that waits for a child's).
    public var isOnQueue: Bool {
        DispatchQueue.getSpecific(key: queueKey) == true || QueueFrames.contains(self)
    }

    /// Stops (in debug builds) when the context is used off its queue.
    func assertOnQueue() {
        #if DEBUG
            if !isOnQueue {
                preconditionFailure(
                    "context \"\(name)\" used off its queue: wrap the work in perform { } or performAndWait { }")
            }
        #endif
    }

    /// Runs `block` on the context's queue and returns at once. The context stays alive
    /// until the block has run. The block runs with the caller's `ServiceContext`, as
    /// the async `perform` does (see <doc:Tracing>).
    public func perform(_ block: @escaping @Sendable () -> Void) {
        let serviceContext = QueueFrames.callerServiceContext()
        queue.async { QueueFrames.run(in: self, carrying: serviceContext, block) }
    }

    /// Runs `block` on the context's queue and waits for its result. The calling task
    /// does not block (it is suspended); the block runs on the context's queue, on a
    /// thread that is not one of the cooperative pool's and blocks while libpq waits
    /// for the server. The
    /// block runs with the caller's `ServiceContext`, so the library's spans nest under
    /// the caller's (see <doc:Tracing>).
    ///
    /// A private context that holds no transaction first waits, suspended, for a pooled
    /// connection (in line with every other borrower, up to the pool's `acquireTimeout`),
    /// and its block then runs with it, on one of the coordinator's threads for such
    /// blocks (one per pooled connection at most, ended when idle): the first
    /// transaction the block begins uses the connection, and a connection the block
    /// gives back is kept for the block's next transaction (a save redone in a new
    /// transaction, a second save) until the block ends. So such blocks hold no more
    /// threads than the pool has connections, however many tasks wait (see
    /// `pgdatakit-bench requests`: 264 threads for 1,000 tasks on a pool of 10 before).
    /// The main context, child contexts and a context whose transaction is open do not
    /// wait first; their blocks run on Dispatch's pool.
    ///
    /// Cancelling the calling task reaches PostgreSQL: a block that has not started does
    /// not run; in a block that runs, the statement in progress is stopped with libpq's
    /// cancel request and later statements are not sent, so the block fails fast and
    /// `perform` throws `CancellationError`. As with any failed statement, a private
    /// context's transaction is rolled back and its connection returned to the pool; the
    /// context's unsaved changes stay. A block that completes before the cancellation
    /// takes effect returns its value: a save that committed reports success, one that
    /// did not throws — never the other way round.
    ///
    /// For example:
    ///
    /// ```swift
    /// let count = try await context.perform { try context.fetchAll(User.self).count }
    /// ```
    ///
    /// - Throws: `CancellationError` when the task was cancelled before the block ran
    ///   (also while it waited for a connection) or while it ran and the block failed;
    ///   `ConnectionPoolError` when no connection freed up in time, `ShutdownError` once
    ///   a shutdown began; otherwise what the block throws.
    public func perform<T: Sendable>(_ block: @escaping @Sendable () throws -> T) async throws -> T {
        let needsLease = parent == nil && concurrencyType == .private && !holdsTransaction.load(ordering: .relaxed)
        let lease = needsLease ? try await leaseConnection() : nil
        let scope = StatementCancellation()
        let serviceContext = QueueFrames.callerServiceContext()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // (The task resumes once the block's connection is back in the pool.)
                let run: @Sendable () -> Result<T, any Error> = {
                    ConnectionPool.holding(lease) {
                        QueueFrames.run(in: self, carrying: serviceContext) { () -> Result<T, any Error> in
                            guard !scope.isCancelled else { return .failure(CancellationError()) }
                            return Result {
                                do {
                                    return try StatementCancellation.run(scope) { try block() }
                                } catch where scope.isCancelled {
                                    throw CancellationError()
                                }
                            }
                        }
                    }
                }
                if lease != nil {
                    // On a thread of the coordinator's own (one per connection at most),
                    // still on the context's queue: `sync` runs it on this thread.
                    coordinator.leasedWork.run { [queue] in continuation.resume(with: queue.sync(execute: run)) }
                } else {
                    queue.async { continuation.resume(with: run()) }
                }
            }
        } onCancel: {
            scope.cancel()
        }
    }

    /// Waits, suspended, for the pooled connection an async `perform` block runs with.
    /// New work is refused once a shutdown began, also when the pool closes at its end
    /// while this waits.
    ///
    /// - Throws: `ShutdownError`, `CancellationError`, `ConnectionPoolError`.
    private func leaseConnection() async throws -> ConnectionLease {
        try coordinator.admitNewWork()
        do {
            return try await coordinator.pool.lease()
        } catch let error as ConnectionPoolError where error.code == .closed && coordinator.isShuttingDown {
            throw ShutdownError.shuttingDown
        }
    }

    /// Runs `block` on the context's queue and waits for it; runs it directly when
    /// already on the queue (reentrant), also when this thread runs the block of another
    /// context that waits for this one. Returns its value and rethrows its error.
    ///
    /// A child context's reads and saves wait for its parent's queue this way. A thread
    /// inside a block of the parent may wait for a child (`performAndWait` on the child
    /// runs on that thread, which already holds the parent's queue); but a parent's block
    /// must not wait for a child's block that runs elsewhere (`perform`, or another
    /// thread's `performAndWait`) while that block needs the parent: each would wait for
    /// the other, as in Core Data.
    @discardableResult
    public func performAndWait<T>(_ block: () throws -> T) rethrows -> T {
        if isOnQueue { return try block() }
        return try queue.sync { try QueueFrames.run(in: self, block) }
    }
}
