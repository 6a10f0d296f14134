import Foundation

/// Many-to-many relationships in a context: the join rows a save writes (one delete and
/// one insert statement per join table), and keeping loaded sets right after inserts,
/// deletes, saves and merges. Loading members (one query per relationship load, for any
/// number of owners) is `ObjectLoader`'s (`ObjectLoader+Relationships.swift`); the
/// context forwards to it. The in-memory bookkeeping of each object's set is `JoinMembers`.
extension ManagedObjectContext {
    // MARK: - Reading

    /// The members of a many-to-many relationship
    /// (`ObjectLoader.joinedMembers(of:relationship:)`).
    func joinedMembers(of object: ManagedObject, relationship: RelationshipDescription) -> [ManagedObject] {
        ObjectLoader(context: self).joinedMembers(of: object, relationship: relationship)
    }

    /// Loads the stored members of a many-to-many relationship for saved owners
    /// (`ObjectLoader.loadJoinMembers(of:relationship:)`).
    func loadJoinMembers(of owners: [ManagedObject], relationship: RelationshipDescription) throws {
        try ObjectLoader(context: self).loadJoinMembers(of: owners, relationship: relationship)
    }

    // MARK: - Inserting and deleting

    /// Relationships set while the object was in no context come along: many-to-many
    /// members join the context, and a one-to-one partner set on the side without the
    /// foreign key (which a class-only description could not tell) is stored on the
    /// partner's side.
    func adoptRelationshipsSetBeforeInsertion(_ object: ManagedObject) {
        for relationship in object.entity.relationships {
            let index = relationship.index
            if relationship.joinTable != nil {
                for member in object.storage.joinMembers(at: index)?.added.values.map({ $0 }) ?? []
                where member.managedObjectContext == nil {
                    insert(member)
                }
            } else if !relationship.isToMany, relationship.columnName == nil, case .object(let partner) = object.storage.toOne[index] {
                object.setReference(.none, at: index)
                if partner.managedObjectContext == nil { insert(partner) }
                if let inverse = object.inverse(of: relationship, on: partner), inverse.columnName != nil {
                    partner.setRelatedObjects([object], at: inverse.index)
                }
            }
        }
    }

    /// A deleted object leaves the sets of the objects related to it through a
    /// many-to-many relationship (delete rule `.nullify`).
    func leaveJoinedObjects(_ object: ManagedObject, relationship: RelationshipDescription) {
        for related in object.relatedObjects(at: relationship.index) {
            if let inverse = object.inverse(of: relationship, on: related) {
                related.removeJoinMember(object, at: inverse.index)
            }
        }
    }

    // MARK: - Saving

    /// A pair of keys in a join table's own column order.
    private struct KeyPair: Hashable {
        let source: Int64
        let destination: Int64
    }

    /// Writes the join rows a save changes, between the updates and the deletes of
    /// entity rows: per join table one statement deleting the removed pairs and every
    /// row of deleted objects, and one inserting the added pairs. Objects whose sets
    /// changed (and that are neither inserted nor deleted) join the save's updated objects
    /// with the relationships' names as changed keys, so other contexts and processes
    /// reload those sets. Versions are not bumped: adding and removing pairs are set
    /// operations that do not conflict.
    func writeJoinTableChanges(
        on connection: Connection, reservedKeys: [ObjectIdentifier: Int64], outcome: inout SavePipeline.WriteOutcome
    ) throws {
        let model = coordinator.model
        guard !model.joinTables.isEmpty else { return }
        let orientation = Dictionary(model.joinTables.map { ($0.table.tableName, $0.table) }, uniquingKeysWith: { a, _ in a })
        func key(_ object: ManagedObject) -> Int64? {
            object.objectID.primaryKey ?? reservedKeys[ObjectIdentifier(object)]
        }
        var inserted: [String: Set<KeyPair>] = [:]
        var deleted: [String: Set<KeyPair>] = [:]
        var deletedSources: [String: Set<Int64>] = [:]
        var deletedDestinations: [String: Set<Int64>] = [:]
        var changedNames: [ObjectIdentifier: Set<String>] = [:]

        for object in insertedSet.union(changedSet) where !object.deletedFlag && object.hasJoinChanges {
            guard let owner = key(object) else { continue }
            for (index, state) in object.storage.joinMembers where state.hasChanges {
                let relationship = object.entity.relationships[index]
                guard let table = relationship.joinTable, let canonical = orientation[table.tableName] else { continue }
                let flipped = canonical.sourceColumn != table.sourceColumn
                func pair(_ member: ManagedObject) -> KeyPair? {
                    guard let other = key(member) else { return nil }
                    return flipped ? KeyPair(source: other, destination: owner) : KeyPair(source: owner, destination: other)
                }
                for member in state.added.values where !member.deletedFlag {
                    if let pair = pair(member) { inserted[table.tableName, default: []].insert(pair) }
                }
                for member in state.removed.values {
                    if let pair = pair(member) { deleted[table.tableName, default: []].insert(pair) }
                }
                if !insertedSet.contains(object) { changedNames[ObjectIdentifier(object), default: []].insert(relationship.name) }
            }
        }
        for object in deletedSet {
            guard let owner = object.objectID.primaryKey else { continue }
            for relationship in object.entity.relationships {
                guard let table = relationship.joinTable, let canonical = orientation[table.tableName] else { continue }
                if canonical.sourceColumn == table.sourceColumn {
                    deletedSources[table.tableName, default: []].insert(owner)
                } else {
                    deletedDestinations[table.tableName, default: []].insert(owner)
                }
            }
        }

        for joinTable in model.joinTables {
            let name = joinTable.table.tableName
            let removedPairs = (deleted[name] ?? []).sorted { ($0.source, $0.destination) < ($1.source, $1.destination) }
            let addedPairs = (inserted[name] ?? []).sorted { ($0.source, $0.destination) < ($1.source, $1.destination) }
            let batch = JoinRowBatch(
                table: joinTable.table,
                inserted: (addedPairs.map(\.source), addedPairs.map(\.destination)),
                deleted: (removedPairs.map(\.source), removedPairs.map(\.destination)),
                deletedSources: (deletedSources[name] ?? []).sorted(),
                deletedDestinations: (deletedDestinations[name] ?? []).sorted())
            try coordinator.writeJoinRows(batch, on: connection)
        }

        // Report the changed sets as updates of their owners (merged into an update the
        // save already reports for the same object).
        for (position, entry) in outcome.updated.enumerated() {
            if let names = changedNames.removeValue(forKey: ObjectIdentifier(entry.object)) {
                outcome.updated[position].keys.formUnion(names)
                outcome.updatedKeysWidened = true
            }
        }
        for object in changedSet where !object.deletedFlag {
            if let names = changedNames.removeValue(forKey: ObjectIdentifier(object)) {
                outcome.updated.append((object, names, object.storage.version))  // (not bumped)
            }
        }
    }

    /// After a commit: each saved set becomes the stored one. A new object's set is
    /// known in full (it had no pairs before), so it counts as loaded.
    func commitJoinChanges() {
        guard !coordinator.model.joinTables.isEmpty else { return }  // (no many-to-many sets to commit)
        // (Visiting the two sets in turn: their union would hash every object of a save.)
        for object in insertedSet where object.hasJoinChanges { commitJoinChanges(of: object, wasInserted: true) }
        for object in changedSet where object.hasJoinChanges && !insertedSet.contains(object) {
            commitJoinChanges(of: object, wasInserted: false)
        }
    }

    private func commitJoinChanges(of object: ManagedObject, wasInserted: Bool) {
        for (index, state) in object.storage.joinMembers where state.hasChanges {
            var stored = state.stored
            if object.storage.loadedToMany.contains(index) || wasInserted {
                for member in state.removed.values { if let key = member.objectID.primaryKey { stored.remove(key) } }
                for member in state.added.values where !member.deletedFlag {
                    if let key = member.objectID.primaryKey { stored.insert(key) }
                }
                object.storage.setLoaded(index, true)
            }
            object.storage.setJoinMembers(JoinMembers(stored: stored), at: index)
        }
    }

    // MARK: - Merging

    /// Takes objects deleted elsewhere out of the loaded many-to-many sets of registered
    /// objects, so reading those sets needs no query to find them gone.
    func forgetJoinMembers(deleted: Set<ObjectID>) {
        guard !deleted.isEmpty, !coordinator.model.joinTables.isEmpty else { return }
        var keysByEntity: [String: Set<Int64>] = [:]
        for id in deleted {
            if let key = id.primaryKey { keysByEntity[id.entityName, default: []].insert(key) }
        }
        for object in bookkeeping.registeredObjects where !object.storage.joinMembers.isEmpty {
            for index in Array(object.storage.joinMembers.keys) {
                let destination = object.entity.relationships[index].destinationRootName
                if let keys = keysByEntity[destination] { object.storage.updateJoinMember(at: index) { $0.stored.subtract(keys) } }
            }
        }
    }
}
