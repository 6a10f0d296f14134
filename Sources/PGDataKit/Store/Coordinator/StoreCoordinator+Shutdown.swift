import Synchronization

/// Whether a coordinator still begins new work: open until a shutdown begins, closed for
/// good afterwards.
final class ShutdownGate: Sendable {
    private let closed = Atomic<Bool>(false)

    /// Whether a shutdown began.
    var isClosed: Bool { closed.load(ordering: .acquiring) }

    /// Throws `ShutdownError.shuttingDown` once a shutdown began.
    func admit() throws {
        if closed.load(ordering: .acquiring) { throw ShutdownError.shuttingDown }
    }

    /// Refuses all new work from now on; returns whether it was open until now.
    func close() -> Bool {
        !closed.exchange(true, ordering: .acquiringAndReleasing)
    }
}

extension StoreCoordinator {
    /// Refuses new work from now on: every transaction a context would begin and every
    /// connection the main context would borrow throws `ShutdownError.shuttingDown`.
    /// Transactions already open (a private context that has read or is saving, a save
    /// redoing its conflicts) go on and can commit. Closing comes after, with `close()`;
    /// `ContextManager/shutdown(gracePeriod:)` does both, waiting for the work in flight
    /// in between.
    ///
    /// Returns `true` the first time, `false` when a shutdown had begun already.
    ///
    /// For example:
    ///
    /// ```swift
    /// let coordinator = manager.coordinator
    /// coordinator.beginShutdown()  // new transactions now throw ShutdownError
    /// while coordinator.connectionsInUse > 0 { try await Task.sleep(for: .milliseconds(10)) }
    /// manager.close()
    /// ```
    ///
    /// (`ContextManager/shutdown(gracePeriod:)` is this, with a bound on the wait.)
    @discardableResult
    public func beginShutdown() -> Bool {
        let first = shutdownGate.close()
        if first { logger.info("shutting down: no new transactions; \(connectionsInUse) connection(s) in use") }
        return first
    }

    /// Whether `beginShutdown()` was called: new work is refused.
    public var isShuttingDown: Bool { shutdownGate.isClosed }

    /// How many of the pool's connections are lent out now (open minus idle): the
    /// transactions and borrowed reads in flight.
    public var connectionsInUse: Int {
        let statistics = pool.statistics
        return max(0, statistics.open - statistics.idle)
    }

    /// Throws `ShutdownError.shuttingDown` once a shutdown began (checked where a
    /// transaction begins and where the main context borrows a connection).
    func admitNewWork() throws {
        try shutdownGate.admit()
    }
}
