import ServiceLifecycle

/// A `ContextManager` as a swift-service-lifecycle `Service`: run it in a `ServiceGroup`
/// beside your server, and a graceful shutdown (SIGTERM, or the group's
/// `triggerGracefulShutdown()`) lets the saves in flight finish before the listener and
/// the pool close.
///
/// `run()` holds while the manager works — its listener merges other processes' saves
/// into the main context and feeds the `remoteChanges()` streams — until the group
/// shuts down gracefully or the task is cancelled. Then it calls
/// `ContextManager/shutdown(gracePeriod:)`: new work is refused with
/// `ShutdownError.shuttingDown`, transactions in flight get up to `gracePeriod` to end,
/// and the manager closes. It returns then (it never throws).
///
/// For example, a worker process:
///
/// ```swift
/// let service = ContextManagerService(manager, gracePeriod: .seconds(10))
/// let group = ServiceGroup(
///     services: [service], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// In a server, list the manager's service before the HTTP server's: a service group
/// shuts its services down in reverse order, so the server stops taking requests and
/// finishes those it has before the manager stops lending connections.
public struct ContextManagerService: Service {
    /// The manager this service runs and shuts down.
    public let manager: ContextManager
    /// How long a graceful shutdown waits for the transactions in flight.
    public let gracePeriod: Duration

    /// A service for `manager`.
    ///
    /// - Parameters:
    ///   - manager: the manager to keep open until shutdown, then close.
    ///   - gracePeriod: how long transactions and saves in flight get to end at shutdown
    ///     (10 seconds by default); keep it below the service group's
    ///     `maximumGracefulShutdownDuration` and your orchestrator's kill timeout.
    public init(_ manager: ContextManager, gracePeriod: Duration = .seconds(10)) {
        self.manager = manager
        self.gracePeriod = gracePeriod
    }

    /// Holds until graceful shutdown (or cancellation), then refuses new work, waits up
    /// to `gracePeriod` for the work in flight and closes the manager.
    public func run() async throws {
        if !manager.coordinator.isClosed, !manager.isShuttingDown {
            // Returns at graceful shutdown; throws at cancellation, which ends the wait too.
            try? await gracefulShutdown()
        }
        await manager.shutdown(gracePeriod: gracePeriod)
    }
}
