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
            changes.deleted = Set(
                try coordinator.deleteRows(of: entity, matching: query, on: connection).map {
                    ObjectID(entityName: entity.name, primaryKey: $0)
                })
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
    /// - Throws: what `write` throws, `PostgresError`; `SaveOutcomeUnknownError` when the
    ///   connection broke at the `COMMIT` and whether it committed could not be found out.
    func commitBatch(_ write: (Connection) throws -> ContextChanges) throws -> ContextChanges {
        try settlingLostConnections {
            let connection = try beginWriteTransaction()
            do {
                let changes = try write(connection)
                try coordinator.recordChangesAndCommit(changes, on: connection)
                transaction.close(ifItIs: connection)
                return changes
            } catch {
                abortWriteTransaction(connection)
                throw error
            }
        }
    }
}
