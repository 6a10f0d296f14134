extension ManagedObjectContext {
    /// Deletes the rows of an entity that a query describes with one statement in the
    /// context's write transaction, records the change and commits (a private context's
    /// transaction ends). This context's objects of those rows are marked deleted, and
    /// did-save observers (the context manager among them) are told.
    ///
    /// - Returns: the IDs of the deleted rows.
    /// - Throws: `PostgresError`; the database is then untouched.
    func batchDelete(of entity: EntityDescription, _ query: StoreQuery) throws -> Set<ObjectID> {
        let changes = try writeAndCommit { connection in
            var changes = ContextChanges()
            changes.deleted = Set(
                try coordinator.deleteRows(of: entity, matching: query, on: connection).map {
                    ObjectID(entityName: entity.name, primaryKey: $0)
                })
            try coordinator.recordChanges(changes, on: connection)
            return changes
        }
        for id in changes.deleted {
            if let object = registered[id] { forgetDeletedObject(object) }
        }
        observers.postDidSave(changes)
        return changes.deleted
    }

    /// Runs `body` in the context's write transaction and commits; a private context's
    /// transaction ends.
    private func writeAndCommit<T>(_ body: (Connection) throws -> T) throws -> T {
        let connection = try beginWriteTransaction()
        do {
            let value = try body(connection)
            try commitWriteTransaction(connection)
            return value
        } catch {
            abortWriteTransaction(connection)
            throw error
        }
    }
}
