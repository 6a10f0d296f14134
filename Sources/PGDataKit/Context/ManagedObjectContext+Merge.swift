extension ManagedObjectContext {
    /// Merges another context's saved changes into this one (Core Data's
    /// `mergeChanges(fromContextDidSave:)`).
    ///
    /// Registered objects that were updated are re-read with one query per entity; their
    /// unsaved local changes are kept on top. Deleted objects are marked deleted and leave
    /// the context. Inserted objects need nothing: fetches find them. Afterwards the
    /// context tells its objects-did-change observers.
    ///
    /// - Throws: `PostgresError` when re-reading fails.
    public func mergeChanges(_ changes: ContextChanges) throws {
        assertOnQueue()
        for id in changes.deleted {
            if let object = registered[id] { forgetDeletedObject(object) }
        }
        var byEntity: [String: [Int64: ManagedObject]] = [:]
        for id in changes.updated {
            guard let object = registered[id], let key = id.primaryKey else { continue }
            byEntity[id.entityName, default: [:]][key] = object
        }
        for (entityName, objects) in byEntity.sorted(by: { $0.key < $1.key }) {
            guard let entity = coordinator.model.entity(named: entityName) else { continue }
            try refreshObjects(objects, entity: entity, mergeChanges: true)
        }
        // New or moved objects may belong to loaded to-many relationships: reload those.
        let touched = Set((changes.inserted.union(changes.updated)).map(\.entityName))
        for entityName in touched {
            guard let entity = coordinator.model.entity(named: entityName) else { continue }
            for relationship in entity.toOneRelationships {
                guard let inverseName = relationship.inverseName,
                    let destination = coordinator.model.entity(named: relationship.destinationEntityName),
                    let inverse = destination.relationship(named: inverseName)
                else { continue }
                for object in registered.values where object.entity.name == destination.name {
                    object.loadedToMany.remove(inverse.index)
                }
            }
        }
        observers.postDidChange(changes)
    }
}
