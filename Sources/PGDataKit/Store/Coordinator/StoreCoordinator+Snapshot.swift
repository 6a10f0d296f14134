extension StoreCoordinator {
    /// Fixes the snapshot of a transaction that reads at one snapshot (repeatable read or
    /// serializable: its first statement takes it) and returns it as PostgreSQL writes
    /// it, `xmin:xmax:xip,…` (`pg_current_snapshot()`): a context's pinned snapshot.
    ///
    /// - Throws: `PostgresError`.
    func takeSnapshot(on connection: Connection) throws -> String {
        try execute("SELECT pg_current_snapshot()::text", on: connection)[0].decode(String.self, at: 0)
    }
}
