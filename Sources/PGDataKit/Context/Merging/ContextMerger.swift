extension ManagedObjectContext {
    /// Merges another context's (or another process's) saved changes into this one (Core
    /// Data's `mergeChanges(fromContextDidSave:)`).
    ///
    /// Registered objects that were updated are re-read with one query per entity. Their
    /// unsaved local changes follow the context's `mergePolicy`: `.rollback` drops them,
    /// `.mergeByPropertyStoreTrump` drops those of the keys the other save changed and
    /// keeps the rest, the other policies keep them all on top (a later save settles any
    /// conflict). Deleted objects are marked deleted and leave the context: `isDeleted` is
    /// true, `managedObjectContext` is `nil`, and `value(forKey:)` / `setValue(_:forKey:)`
    /// on them throw `ManagedObjectError.objectDeleted` (typed properties still read the
    /// last values; setting one logs a warning and is saved nowhere). Inserted objects
    /// need nothing:
    /// fetches find them. Afterwards the context tells its objects-did-change observers.
    ///
    /// - Throws: `PostgresError` when re-reading fails.
    public func mergeChanges(_ changes: ContextChanges) throws {
        assertOnQueue()
        for id in changes.deleted {
            if let object = bookkeeping.object(for: id) { forgetDeletedObject(object) }
        }
        forgetJoinMembers(deleted: changes.deleted)
        let localEdits: LocalEdits
        switch mergePolicy {
        case .rollback: localEdits = .discard
        case .mergeByPropertyStoreTrump: localEdits = .keepUnlessChanged(changes.changedKeys)
        case .error, .mergeByPropertyObjectTrump, .overwrite: localEdits = .keep
        }
        var byEntity: [String: [Int64: ManagedObject]] = [:]
        for id in changes.updated {
            guard let object = bookkeeping.object(for: id), let key = id.primaryKey else { continue }
            byEntity[id.entityName, default: [:]][key] = object
        }
        for (entityName, objects) in byEntity.sorted(by: { $0.key < $1.key }) {
            guard let entity = coordinator.model.entity(named: entityName) else { continue }
            try refreshObjects(objects, entity: entity, localEdits: localEdits)
        }
        // New or moved objects may belong to loaded to-many relationships: reload those.
        var touched: [String] = []  // (a few names; a save can hold thousands of IDs)
        for id in changes.inserted where touched.last != id.entityName && !touched.contains(id.entityName) {
            touched.append(id.entityName)
        }
        for id in changes.updated where touched.last != id.entityName && !touched.contains(id.entityName) {
            touched.append(id.entityName)
        }
        for entityName in touched {
            guard let entity = coordinator.model.entity(named: entityName) else { continue }
            for relationship in entity.toOneRelationships {
                guard let inverseName = relationship.inverseName,
                    let destination = coordinator.model.entity(named: relationship.destinationEntityName),
                    let inverse = destination.relationship(named: inverseName)
                else { continue }
                for object in bookkeeping.registeredObjects where object.entity.name == destination.name {
                    object.storage.setLoaded(inverse.index, false)
                }
            }
        }
        observers.postDidChange(changes)
    }
}
