extension StoreCoordinator {
    /// How long, after a save of an entity met another transaction's work, this
    /// coordinator's saves that write that entity start in the redo's mode: 1 second by
    /// default; `.zero` turns it off.
    ///
    /// A private context's save first writes in its own repeatable-read transaction,
    /// which fails when a row it writes was changed since its snapshot (or a key it
    /// inserts was committed since it looked); the save is then redone in a read-committed
    /// transaction that locks its rows in the global order, reads them, settles conflicts
    /// by the merge policy and commits (see `ManagedObjectContext.save()`). Under
    /// contention most first attempts fail so, and each failure is a transaction thrown
    /// away. So once a save of an entity had to be redone that way — a serialization
    /// failure, a conflict, a deadlock, a row held elsewhere — or, started in the redo's
    /// mode, found rows that had moved since it read them or keys committed since it
    /// looked, the coordinator's next saves that write that entity skip the first attempt
    /// and start in the redo's mode, until this long has passed without either. A save
    /// that changes attributes of one object and nothing else keeps its one round trip
    /// (it is not started in the redo's mode). Nothing else changes: the same locks in the
    /// same order, the same merge policies, the same outcome; the metrics count no retry
    /// for a save that started in the redo's mode (`PGDataKitMetrics.retries`).
    ///
    /// For example, to have every save try its own transaction first:
    ///
    /// ```swift
    /// manager.coordinator.contentionWindow = .zero
    /// ```
    public var contentionWindow: Duration {
        get { saveContention.window }
        set { saveContention.window = newValue }
    }
}
