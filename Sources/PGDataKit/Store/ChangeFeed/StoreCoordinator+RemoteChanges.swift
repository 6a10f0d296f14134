import Foundation

extension StoreCoordinator {
    /// Calls `observer` with each save another process (or another coordinator) commits
    /// to this database, read from the change log — for programs that keep no main
    /// context. The first observer starts the coordinator's listener: a dedicated
    /// connection (not from the pool) that `LISTEN`s, reads new records on each
    /// notification, reconnects with backoff after a drop and catches up from where it
    /// was, so every record arrives exactly once and in commit order for rows they share.
    ///
    /// For example:
    ///
    /// ```swift
    /// let token = coordinator.observeRemoteChanges { record in
    ///     print(record)  // change 42 from process 1234: 1 inserted, 0 updated, 0 deleted
    /// }
    /// // later
    /// token.cancel()
    /// ```
    ///
    /// Records written by this coordinator are not delivered: its contexts merged them
    /// already. The observer runs on the listener's thread; keep it short and hand work
    /// to a context with `perform`. Changes that committed before the listener started
    /// are not replayed.
    public func observeRemoteChanges(_ observer: @escaping @Sendable (ChangeRecord) -> Void) -> ObserverToken {
        observeRemoteChangeBatches { records in records.forEach(observer) }
    }

    /// Every later save of another process, as an async sequence; see
    /// `observeRemoteChanges(_:)`. The stream ends when the coordinator is closed (at once
    /// when it is closed already).
    ///
    /// For example:
    ///
    /// ```swift
    /// for await record in coordinator.remoteChanges() {
    ///     print(record.changes.updated)
    /// }
    /// ```
    public func remoteChanges() -> AsyncStream<ChangeRecord> {
        let (stream, continuation) = AsyncStream.makeStream(of: ChangeRecord.self)
        guard !isClosed else {
            continuation.finish()
            return stream
        }
        let token = observeRemoteChangeBatches { records in
            for record in records { continuation.yield(record) }
        }
        // Ended by close(), or at once when close() ran since the check above.
        let closing = closeObservers.add { continuation.finish() }
        continuation.onTermination = { _ in
            token.cancel()
            closing.cancel()
        }
        return stream
    }

    /// Observes the records of each read of the change log together (the main context
    /// merges a batch with one query per entity). With `wants`, the observer takes records
    /// only while it holds, and notifications' changes go unread while no observer does
    /// (`ChangeListener.add(_:wants:)`).
    func observeRemoteChangeBatches(
        wants: (@Sendable () -> Bool)? = nil, _ observer: @escaping @Sendable ([ChangeRecord]) -> Void
    ) -> ObserverToken {
        let listener = self.listener
        let id = listener.add(observer, wants: wants)
        return ObserverToken { listener.remove(id) }
    }

    /// The backend process id of the listener's session while it is connected (`nil`
    /// before the first observer and while reconnecting); its session shows the
    /// application name `pgdatakit listener` in `pg_stat_activity`. It reads the change
    /// log, and `LISTEN`s too unless notifications come through the host's relay
    /// (`listenerUsesRelay`); terminating it makes the listener reconnect and catch up
    /// either way.
    public var listenerBackendPID: Int32? { listener.backendPID }

    /// Whether the listener's notifications come through its host's relay (one `LISTEN`
    /// session shared by the processes of a host, `ChangeLogOptions.relay`) rather than a
    /// `LISTEN` of its own; `false` while it is not connected.
    public var listenerUsesRelay: Bool { listener.isRelayed }

    /// Whether this coordinator's listener hosts its host's relay (the relay's session
    /// shows the application name `pgdatakit relay` in `pg_stat_activity`). When it
    /// closes, another process of the host takes over.
    public var hostsListenerRelay: Bool { listener.hostsRelay }

    /// Whether the relay this coordinator's listener follows (another process hosts it)
    /// passes notifications on once per `ListenerLoop.quietPace` rather than as they
    /// come: while no observer wants records and no history reader waits.
    var listenerIsPaced: Bool { listener.isPaced }

    /// How many times the listener reconnected after losing its session.
    public var listenerReconnectCount: Int { listener.reconnects }

    /// What is wrong with the change listener's session, if anything: `nil` while it
    /// receives notifications (or has not connected yet). Checked each time the listener
    /// connects; the first problem found is also logged once, at error level.
    ///
    /// For example, when the listener was given PgBouncer's address in transaction mode:
    ///
    /// ```swift
    /// if coordinator.listenerError?.code == .notificationsNotDelivered {
    ///     // point listenerConfiguration at the server itself
    /// }
    /// ```
    public var listenerError: ChangeListenerError? { listener.sessionCheck?.problem }

    /// Stops the listener, sends the notifications of saves that committed and are not
    /// announced yet (with those the host's other processes handed this one, when it
    /// hosted their relay), ends the `remoteChanges()` streams, closes the pool and stops
    /// the object controllers of its contexts. Contexts holding a connection keep it
    /// until they finish; nothing new can be borrowed afterwards.
    public func close() {
        listener.stop()
        notifier.close()
        pool.close()
        closeObservers.close()
    }
}
