import Foundation

/// What changed in an object since its snapshot (the values last saved or fetched).
extension ManagedObject {
    /// Whether any attribute or to-one relationship differs from the committed values.
    var hasPersistentChangedValues: Bool { hasChangedAttributes || !changedToOneIndexes.isEmpty }

    /// Whether any attribute differs from its committed value (stops at the first).
    var hasChangedAttributes: Bool {
        prepareStorage()
        return storage.hasChangedAttributes(entity)
    }


    /// `changedAttributeIndexes` as a bit mask (bit `i` for attribute `i`), without an
    /// array; `nil` for an entity of more than 64 attributes.
    var changedAttributeMask: UInt64? {
        let entity = self.entity
        guard entity.attributes.count <= 64 else { return nil }
        if storage.valueCount != entity.attributes.count { prepareStorage() }
        return storage.changedAttributeMask(entity)
    }

    /// The attributes that differ from their committed values, by index.
    var changedAttributeIndexes: [Int] {
        prepareStorage()
        return storage.changedAttributeIndexes(entity)
    }

    var changedToOneIndexes: [Int] {
        let indexes = entity.toOneIndexes
        guard !indexes.isEmpty else { return [] }
        prepareStorage()
        let temporaryTargets = storage.snapshotTemporaryTargets
        return indexes.filter { index in
            // (A reference to an unsaved object is a change, unless a child context read
            // it so from its parent.)
            if case .object(let object) = storage.toOne[index], object.objectID.isTemporaryID {
                return temporaryTargets?[index] != object.objectID
            }
            if let temporaryTargets, temporaryTargets[index] != nil { return true }
            let committed = storage.snapshotKeys.count > index ? storage.snapshotKeys[index] : nil
            return storage.referencedKey(at: index) != committed
        }
    }

    /// The attributes, to-one and many-to-many relationships changed since the last save
    /// or fetch, with their new values (`nil` for `NULL`/none; a many-to-many
    /// relationship's objects as `[ManagedObject]`).
    public func changedValues() -> [String: Any?] {
        checkQueue()
        var changes: [String: Any?] = [:]
        for index in changedAttributeIndexes {
            changes[entity.attributes[index].name] = .some(storage.value(at: index).anyValue)
        }
        for index in changedToOneIndexes {
            changes[entity.relationships[index].name] = .some(relatedObjects(at: index).first)
        }
        for (index, state) in storage.joinMembers where state.hasChanges {
            changes[entity.relationships[index].name] = .some(relatedObjects(at: index))
        }
        return changes
    }

    /// The last saved or fetched values of the given keys (all attributes if `nil`);
    /// a to-one relationship's value is the related row's primary key.
    public func committedValues(forKeys keys: [String]?) -> [String: Any?] {
        checkQueue()
        prepareStorage()
        var result: [String: Any?] = [:]
        let wanted = keys.map(Set.init)
        for attribute in entity.attributes where wanted?.contains(attribute.name) ?? true {
            result[attribute.name] = .some(storage.snapshot?[attribute.index].anyValue)
        }
        for relationship in entity.toOneRelationships where wanted?.contains(relationship.name) ?? false {
            result[relationship.name] = .some(storage.snapshotKeys.count > relationship.index ? storage.snapshotKeys[relationship.index] : nil)
        }
        return result
    }

    /// After a save wrote the object at `version`: its values become the committed ones,
    /// and it is no keyed insert any more (one change of the storage).
    func commitSaved(version: Int64) {
        let entity = self.entity
        if !storage.isPrepared(for: entity) { prepareStorage() }
        storage.commitSaved(entity, version: version)
    }

    /// `commitSaved(version:)`, the replaced committed values appended to `replaced` (to
    /// be released later, `ContextBookkeeping.retireValues(_:)`).
    func commitSaved(version: Int64, replaced: inout [AttributeValues]) {
        let entity = self.entity
        if !storage.isPrepared(for: entity) { prepareStorage() }
        storage.commitSaved(entity, version: version, replaced: &replaced)
    }

    /// Makes the current values the committed ones (after a save or a fetch).
    func commitSnapshot() {
        prepareStorage()
        storage.commit(entity)
    }
}
