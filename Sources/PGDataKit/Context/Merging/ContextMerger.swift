/// One merge of another context's (or another process's) saved changes into a context:
/// deleted objects leave it, updated ones are re-read under its `mergePolicy`, loaded
/// to-many relationships that new or moved objects may belong to are reloaded, and the
/// objects-did-change observers are told. `ManagedObjectContext.mergeChanges(_:)` makes
/// one and runs it; it lives for that merge.
///
/// It reads and writes the context's registry (`bookkeeping`), re-reads rows through the
/// context (`refreshObjects`, which asks the parent in a child context) and tells the
/// context's `observers` (`ContextObservers`).
struct ContextMerger {
    /// The context the changes are merged into (held for the one merge).
    let context: ManagedObjectContext

    /// `mergeChanges(_:)`'s work, on the context's queue.
    ///
    /// - Throws: `PostgresError` when re-reading fails.
    func merge(_ changes: ContextChanges) throws {
        for id in changes.deleted {
            if let object = context.bookkeeping.object(for: id) { context.forgetDeletedObject(object) }
        }
        context.forgetJoinMembers(deleted: changes.deleted)
        let localEdits: ManagedObjectContext.LocalEdits
        switch context.mergePolicy {
        case .rollback: localEdits = .discard
        case .mergeByPropertyStoreTrump: localEdits = .keepUnlessChanged(changes.changedKeys)
        case .error, .mergeByPropertyObjectTrump, .overwrite: localEdits = .keep
        }
        var byEntity: [String: [Int64: ManagedObject]] = [:]
        for id in changes.updated {
            guard let object = context.bookkeeping.object(for: id), let key = id.primaryKey else { continue }
            byEntity[id.entityName, default: [:]][key] = object
        }
        for (entityName, objects) in byEntity.sorted(by: { $0.key < $1.key }) {
            guard let entity = context.coordinator.model.entity(named: entityName) else { continue }
            try context.refreshObjects(objects, entity: entity, localEdits: localEdits)
        }
        // New or moved objects may belong to loaded to-many relationships: reload those.
        var touched: [String] = []  // (a few names; a save can hold thousands of IDs)
        for id in changes.inserted where touched.last != id.entityName && !touched.contains(id.entityName) {
            touched.append(id.entityName)
        }
        for id in changes.updated where touched.last != id.entityName && !touched.contains(id.entityName) {
            touched.append(id.entityName)
        }
        let model = context.coordinator.model
        // (IDs name a hierarchy's root: the relationships of all its entities are visited.)
        for entity in model.entities where touched.contains(entity.rootEntityName) {
            for relationship in entity.toOneRelationships {
                guard let inverseName = relationship.inverseName,
                    let destination = model.entity(named: relationship.destinationEntityName),
                    let inverse = destination.relationship(named: inverseName)
                else { continue }
                for object in context.bookkeeping.registeredObjects where model.isEntity(object.entity, kindOf: destination.name) {
                    object.storage.setLoaded(inverse.index, false)
                }
            }
        }
        context.observers.postDidChange(changes)
    }
}
