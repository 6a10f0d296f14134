extension ContextManager {
    /// Shuts the manager down gracefully: refuses new work at once
    /// (`ShutdownError.shuttingDown` where a transaction would begin or the main context
    /// would borrow a connection), waits up to `gracePeriod` for the transactions and
    /// saves in flight to end, then stops merging and closes the listener and the pool
    /// (`close()`). Returns whether everything in flight ended within the grace period.
    ///
    /// Work still running when the grace period ends is not waited for: it keeps its
    /// connection until it ends (a `COMMIT` it sends still commits), and the pool closes
    /// that connection when it comes back. A `ContextManagerService` calls this when its
    /// service group shuts down; call it yourself where no service group runs (after a Vapor
    /// application's `asyncShutdown()`, a worker's own signal handling).
    ///
    /// For example:
    ///
    /// ```swift
    /// if !(await manager.shutdown(gracePeriod: .seconds(5))) {
    ///     logger.warning("closed with transactions still running")
    /// }
    /// ```
    ///
    /// Waiting does not hold a thread: it polls the pool every 10 ms with `Task.sleep`,
    /// and it goes on when the calling task is cancelled (the grace period bounds it).
    @discardableResult
    public func shutdown(gracePeriod: Duration) async -> Bool {
        coordinator.beginShutdown()
        let coordinator = self.coordinator
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: gracePeriod)
        // Not a child task: a cancelled caller still gets its grace period.
        let drained = await Task {
            while coordinator.connectionsInUse > 0 {
                guard clock.now < deadline else { return false }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return true
        }.value
        if drained {
            logger.info("shut down: every transaction in flight ended")
        } else {
            logger.warning(
                "shutting down after the grace period of \(gracePeriod) with \(coordinator.connectionsInUse) connection(s) still in use")
        }
        close()
        return drained
    }

    /// Whether a shutdown began (`shutdown(gracePeriod:)`, or its service's graceful
    /// shutdown): new work is refused with `ShutdownError.shuttingDown`.
    public var isShuttingDown: Bool { coordinator.isShuttingDown }
}
