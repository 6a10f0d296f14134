extension ManagedObjectContext {
    /// Sets attributes of the rows of an entity that a query describes with one statement
    /// in the context's write transaction, records the change (every updated object, with
    /// the attributes set) and commits (a private context's transaction ends). This
    /// context's objects of those rows are then re-read, keeping their unsaved changes
    /// on top, and did-save observers (the context manager among them) are told.
    ///
    /// - Returns: the IDs of the updated rows.
    /// - Throws: `ChildContextError.unsupported` in a child context, `PostgresError`; the
    ///   database is then untouched. `SaveOutcomeUnknownError` when the connection broke
    ///   at the `COMMIT` and whether it committed could not be found out.
    func batchUpdate(
        of entity: EntityDescription, setting values: [(attribute: AttributeDescription, value: StoredValue)],
        _ query: StoreQuery
    ) throws -> Set<ObjectID> {
        try refuseInChild(
            "updateAll(in:set:where:)",
            advice: "it updates rows and commits at once; fetch the objects and change them in the child "
                + "(its save pushes the changes), or call updateAll in the root context")
        let names = Set(values.map(\.attribute.name))
        let changes = try commitBatch { connection in
            var changes = ContextChanges()
            for (key, kind) in try coordinator.updateRows(of: entity, setting: values, matching: query, on: connection) {
                let id = ObjectID(entityName: entity.rootEntityName, primaryKey: key)
                changes.updated.insert(id)
                changes.changedKeys[id] = names
                if let kind, kind != entity.rootEntityName { changes.entityNames[id] = kind }
            }
            return changes
        }
        var registered: [Int64: ManagedObject] = [:]
        for id in changes.updated {
            if let object = bookkeeping.object(for: id), let key = id.primaryKey { registered[key] = object }
        }
        if !registered.isEmpty { try refreshObjects(registered, entity: entity, localEdits: .keep) }
        observers.postDidSave(changes)
        return changes.updated
    }
}
