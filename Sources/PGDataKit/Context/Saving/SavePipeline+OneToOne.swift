extension SavePipeline {
    /// Before a save's inserts and updates: the one-to-one foreign keys that the save
    /// moves or drops (in changed and deleted rows) are set to `NULL` first, one
    /// statement per column, so a partner handed from one row to another (or two rows
    /// swapping partners) never holds one key twice in between.
    ///
    /// - Returns: the entities whose rows it cleared keys of (those rows moved: they are
    ///   no longer where an import read them, see `RowLocation`).
    @discardableResult
    func releaseOneToOneKeys(on connection: Connection) throws -> Set<String> {
        var cleared: Set<String> = []
        for entity in context.coordinator.model.insertOrder {
            let relationships = entity.toOneRelationships.filter(\.isOneToOne)
            guard !relationships.isEmpty else { continue }
            let candidates = context.changedSet.union(context.deletedSet).filter {
                $0.entity.name == entity.name && !context.insertedSet.contains($0) && $0.objectID.primaryKey != nil
            }
            guard !candidates.isEmpty else { continue }
            for relationship in relationships {
                guard let column = relationship.columnName else { continue }
                let index = relationship.index
                let keys = candidates.filter { object in
                    let committed = object.storage.snapshotKeys.count > index ? object.storage.snapshotKeys[index] : nil
                    return committed != nil && (object.deletedFlag || object.changedToOneIndexes.contains(index))
                }.compactMap(\.objectID.primaryKey)
                try context.coordinator.clearForeignKey(column, of: entity, keys: keys.sorted(), on: connection)
                if !keys.isEmpty { cleared.insert(entity.rootEntityName) }
            }
        }
        return cleared
    }
}
