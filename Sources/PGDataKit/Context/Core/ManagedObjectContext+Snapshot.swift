import Foundation

/// Pinned snapshots (Core Data's query generations): a context reads one consistent state
/// of the store while others save, and catches up with one merge when it lets go.
extension ManagedObjectContext {
    /// Whether the context reads a pinned snapshot (from `pinSnapshot()` until
    /// `unpinSnapshot()` or `save()`; for a private context also `rollback()` or
    /// `reset()`), also one that was lost (its reads then throw `SnapshotError.lost`).
    public var isSnapshotPinned: Bool {
        assertOnQueue()
        return snapshotPin != nil
    }

    /// The pinned snapshot as PostgreSQL writes it, `xmin:xmax:xip,…`
    /// (`pg_current_snapshot()`: transactions from `xmin` on, and those listed, are not
    /// visible in it), for logs and comparisons; `nil` when not pinned. PGDataKit's
    /// `queryGenerationToken`.
    public var pinnedSnapshot: String? {
        assertOnQueue()
        return snapshotPin?.snapshot
    }

    /// Pins the context to the store's current state, as Core Data's
    /// `setQueryGenerationFrom(.current)`: until `unpinSnapshot()`, every read — fetches,
    /// counts, faults, relationships, `refresh(_:mergeChanges:)`, the fetches of its
    /// controllers — sees the store as it was now, whatever other contexts and processes
    /// save meanwhile, and merges wait: registered objects keep their values and
    /// controllers stay where they are, and `unpinSnapshot()` merges what came meanwhile
    /// as one change set.
    ///
    /// The main context begins a `REPEATABLE READ READ ONLY` transaction on a pooled
    /// connection and holds it until the unpin (its reads then borrow no connection; a
    /// save needs one more). A private context's transaction already reads one snapshot:
    /// pinning begins it now when none is open, and the pin ends with it. A child context
    /// reads through its parent: pin the parent.
    ///
    /// Pinning a pinned context does nothing (the first snapshot stays; unpin and pin
    /// again to move on).
    ///
    /// For example, a report that adds up what it lists:
    ///
    /// ```swift
    /// try context.pinSnapshot()
    /// let total = try User.count(in: context)
    /// let users = try context.fetchAll(User.self)     // as many as counted
    /// try context.unpinSnapshot()
    /// ```
    ///
    /// - Returns: whether it pinned now (`false`: it was pinned already).
    /// - Throws: `ChildContextError.unsupported` in a child context,
    ///   `SnapshotError.readCommitted` for a private context that reads at read committed,
    ///   `ShutdownError`, `ConnectionPoolError` or `PostgresError`.
    @discardableResult
    public func pinSnapshot() throws -> Bool {
        assertOnQueue()
        try refuseInChild("pinSnapshot()", advice: "a child reads through its parent: pin the parent context")
        guard snapshotPin == nil else { return false }
        switch concurrencyType {
        case .main:
            let connection = try coordinator.beginTransaction(
                isolation: .repeatableRead, readOnly: true, statementTimeout: statementTimeout)
            do {
                snapshotPin = SnapshotPin(connection: connection, snapshot: try coordinator.takeSnapshot(on: connection))
            } catch {
                coordinator.rollbackAndRelease(connection)
                throw error
            }
        case .private:
            let readsAtOneSnapshot = transaction.isOpen ? transaction.locationSerial != 0 : isolationLevel != .readCommitted
            guard readsAtOneSnapshot else { throw SnapshotError.readCommitted(context: name) }
            let snapshot: String
            do {
                snapshot = try coordinator.takeSnapshot(on: try transactionConnection())
            } catch let error as PostgresError {
                endTransaction()
                throw error
            }
            snapshotPin = SnapshotPin(transactionSerial: transaction.lastSerial, snapshot: snapshot)
        }
        return true
    }

    /// Lets go of the pinned snapshot (Core Data's `setQueryGenerationFrom(nil)`): the
    /// pinned transaction ends (a private context's too: its next read begins a new one;
    /// its unsaved changes stay), later reads see the store's current state, and the
    /// changes merges brought meanwhile are merged now, as one change set: updated
    /// objects are refreshed with one query per entity, deleted ones leave the context,
    /// and objects-did-change observers and controllers are told once.
    ///
    /// Unpinning a context that is not pinned does nothing. A lost snapshot is unpinned
    /// the same way.
    ///
    /// - Returns: whether the context was pinned.
    /// - Throws: what the merge throws (the main context tries again for up to 30 s on a
    ///   lost connection); the context is unpinned either way.
    @discardableResult
    public func unpinSnapshot() throws -> Bool {
        assertOnQueue()
        guard let pin = snapshotPin else { return false }
        snapshotPin = nil
        if let connection = pin.connection {
            coordinator.rollbackAndRelease(connection)
        } else if !pin.isLost, transaction.isOpen, transaction.lastSerial == pin.transactionSerial {
            endTransaction()
        }
        try mergeDeferred(pin.deferred)
        return true
    }

    /// Runs `body` with the context pinned to the store's current state and unpins
    /// afterwards (merging what came meanwhile), also when `body` throws. In a context
    /// that is pinned already, it runs `body` and leaves the pin as it is.
    ///
    /// For example, a long report in the main context while workers save:
    ///
    /// ```swift
    /// let main = manager.mainContext
    /// let report = try main.performAndWait {
    ///     try main.withPinnedSnapshot {
    ///         let open = try Post.count(in: main, where: "title != nil")
    ///         let users = try main.fetchAll(User.self)
    ///         return "\(users.count) users, \(open) titled posts"
    ///     }
    /// }
    /// ```
    ///
    /// - Throws: what `pinSnapshot()`, `body` or `unpinSnapshot()` throws (`body`'s error
    ///   first).
    public func withPinnedSnapshot<T>(_ body: () throws -> T) throws -> T {
        guard try pinSnapshot() else { return try body() }
        let value: T
        do {
            value = try body()
        } catch {
            do {
                try unpinSnapshot()
            } catch let unpinError {
                logger.error("unpinning the snapshot after an error failed: \(unpinError)")
            }
            throw error
        }
        try unpinSnapshot()
        return value
    }

    // MARK: - Reads and merges while pinned

    /// Runs a main context's read on its pinned transaction.
    ///
    /// - Throws: `SnapshotError.lost` once the transaction ended (wrapping the
    ///   `PostgresError` that ended it, for the read that met it), or what `body` throws.
    func withPinnedConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        guard let connection = snapshotPin?.connection else { throw SnapshotError.lost(context: name) }
        do {
            return try body(connection)
        } catch let error as PostgresError where connection.transactionStatus != .inTransaction {
            throw losePinnedSnapshot(error)
        }
    }

    /// Refuses a private context's read when its pinned transaction ended (a failed
    /// statement, a lost connection, a failed save): it would begin a new one, with a new
    /// snapshot.
    ///
    /// - Throws: `SnapshotError.lost`.
    func checkPinnedTransaction() throws {
        guard let pin = snapshotPin else { return }
        if pin.isLost || !transaction.isOpen || transaction.lastSerial != pin.transactionSerial {
            if !pin.isLost { _ = snapshotPin?.lose() }
            throw SnapshotError.lost(context: name)
        }
    }

    /// Marks the pin lost after `error` ended its transaction (giving back the main
    /// context's connection) and returns the error to throw.
    func losePinnedSnapshot(_ error: PostgresError) -> SnapshotError {
        if let connection = snapshotPin?.lose() { coordinator.rollbackAndRelease(connection) }
        logger.warning("context \(name): the pinned snapshot is lost: \(error)")
        return .lost(context: name, underlying: error)
    }

    /// Keeps a merge's changes for the unpin (`mergeChanges(_:)` while pinned).
    func deferMerge(_ changes: ContextChanges) {
        snapshotPin?.deferMerge(changes)
    }

    /// Whether reads go to a pinned snapshot (for the layers above: a main context's
    /// cursor then runs in the pinned transaction instead of one of its own).
    var readsPinnedSnapshot: Bool { snapshotPin != nil }

    /// The changes merges brought while pinned, not merged yet (`nil` when not pinned or
    /// none came).
    var deferredChanges: ContextChanges? { snapshotPin?.deferred }

    // MARK: - Ends of a pin

    /// Ends the pin before a save writes (the main context gives its pinned transaction
    /// back; a private context's save writes in it) and returns the changes to merge
    /// after the save.
    func endPinForSave() -> ContextChanges? {
        guard let pin = snapshotPin else { return nil }
        snapshotPin = nil
        if let connection = pin.connection { coordinator.rollbackAndRelease(connection) }
        return pin.deferred
    }

    /// Merges the changes deferred while pinned after a save, whatever its outcome; a
    /// failure is logged (the save's own outcome is what `save()` reports).
    func mergeDeferredAfterSave(_ changes: ContextChanges) {
        mergeDeferredLoggingFailure(changes, after: "save()")
    }

    /// Ends a private context's pin with its transaction (`rollback()`, `reset()`) and
    /// merges the changes deferred meanwhile; a failure is logged.
    func endPinWithTransaction(call: String) {
        guard let pin = snapshotPin else { return }
        snapshotPin = nil
        if let changes = pin.deferred { mergeDeferredLoggingFailure(changes, after: call) }
    }

    /// `mergeDeferred(_:)` where the caller cannot throw: a failure is logged, naming the
    /// call that ended the pin.
    private func mergeDeferredLoggingFailure(_ changes: ContextChanges, after call: String) {
        do {
            try mergeDeferred(changes)
        } catch {
            logger.error("context \(name): \(call): merging the changes that came while the snapshot was pinned failed: \(error)")
        }
    }

    /// Merges what came while pinned as one change set (again for up to 30 s on a lost
    /// connection, in the main context, as the manager's merges).
    private func mergeDeferred(_ changes: ContextChanges?) throws {
        guard let changes, !changes.isEmpty else { return }
        try retryingLostConnections("merging the changes that came while the snapshot was pinned") {
            try mergeChanges(changes)
        }
    }
}
