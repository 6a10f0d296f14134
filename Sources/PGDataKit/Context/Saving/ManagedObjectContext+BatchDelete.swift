extension ManagedObjectContext {
    /// Deletes the rows of an entity that a query describes with one statement in the
    /// context's write transaction, records the change and commits (a private context's
    /// transaction ends). This context's objects of those rows are marked deleted, and
    /// did-save observers (the context manager among them) are told.
    ///
    /// - Returns: the IDs of the deleted rows.
    /// - Throws: `ChildContextError.unsupported` in a child context (it would commit behind
    ///   the parent's back), `PostgresError`; the database is then untouched (a lost connection is
    ///   marked `transactionDidNotCommit`, and transient). `SaveOutcomeUnknownError` when
    ///   the connection broke at the `COMMIT` and whether it committed could not be
    ///   found out.
    func batchDelete(of entity: EntityDescription, _ query: StoreQuery) throws -> Set<ObjectID> {
        try refuseInChild(
            "deleteAll(in:where:)",
            advice: "it deletes rows and commits at once; fetch the objects and delete() them in the child "
                + "(its save pushes the deletes), or call deleteAll in the root context")
        let changes = try commitBatch { connection in
            var changes = ContextChanges()
            for (key, kind) in try coordinator.deleteRows(of: entity, matching: query, on: connection) {
                let id = ObjectID(entityName: entity.rootEntityName, primaryKey: key)
                changes.deleted.insert(id)
                if let kind, kind != entity.rootEntityName { changes.entityNames[id] = kind }
            }
            return changes
        }
        for id in changes.deleted {
            if let object = bookkeeping.object(for: id) { forgetDeletedObject(object) }
        }
        observers.postDidSave(changes)
        return changes.deleted
    }

    /// Runs a batch statement (`write`) in the context's write transaction, writes the
    /// change record of the changes it returns and commits, in one round trip (a private
    /// context's transaction ends); rolls back when anything fails.
    ///
    /// A private context's repeatable-read transaction cannot write a row another
    /// transaction changed after its snapshot (40001): the batch is then rolled back and
    /// redone once in a read-committed transaction, whose statement waits for such rows
    /// and re-checks them against the query, as a save's redo does. The batch sets values
    /// or deletes rows by a query, not by what the context read, so no change is lost.
    /// A private context with no transaction open starts in read committed.
    ///
    /// - Throws: what `write` throws, `PostgresError`; `SaveOutcomeUnknownError` when the
    ///   connection broke at the `COMMIT` and whether it committed could not be found out.
    func commitBatch(_ write: (Connection) throws -> ContextChanges) throws -> ContextChanges {
        try settlingLostConnections {
            // A private context that has read nothing yet has no snapshot the batch could
            // be bound to: it starts where the redo would.
            let connection = concurrencyType == .private && !transaction.isOpen
                ? try coordinator.beginTransaction(isolation: .readCommitted, statementTimeout: statementTimeout)
                : try beginWriteTransaction()
            do {
                return try writeAndCommit(write, on: connection)
            } catch let error as PostgresError where error.sqlState == .serializationFailure && concurrencyType == .private {
                abortWriteTransaction(connection)
                coordinator.metrics.retry(.serialization, unit: "batch")
                logger.debug("batch redone in a read-committed transaction (a row changed since the context's snapshot)")
                let fresh = try coordinator.beginTransaction(
                    isolation: .readCommitted, statementTimeout: statementTimeout, continuesWork: true)
                do {
                    return try writeAndCommit(write, on: fresh)
                } catch {
                    abortWriteTransaction(fresh)
                    throw error
                }
            } catch {
                abortWriteTransaction(connection)
                throw error
            }
        }
    }

    /// `write`, then its change record and the `COMMIT` (see `commitBatch(_:)`).
    private func writeAndCommit(_ write: (Connection) throws -> ContextChanges, on connection: Connection) throws
        -> ContextChanges
    {
        let changes = try write(connection)
        try coordinator.recordChangesAndCommit(changes, on: connection)
        transaction.close(ifItIs: connection)
        return changes
    }
}
