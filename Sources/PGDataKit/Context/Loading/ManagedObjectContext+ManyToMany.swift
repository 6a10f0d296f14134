import Foundation

/// Many-to-many relationships in a context: loading members (one query per relationship
/// load, for any number of owners), the join rows a save writes (one delete and one
/// insert statement per join table), and keeping loaded sets right after saves and
/// merges. The in-memory bookkeeping of each object's set is `JoinMembers`.
extension ManagedObjectContext {
    // MARK: - Reading

    /// The members of a many-to-many relationship: the stored pairs (loaded once with one
    /// query; in a child context, the parent's set), minus the objects removed and plus
    /// the objects added since the last save; deleted objects left out.
    func joinedMembers(of object: ManagedObject, relationship: RelationshipDescription) -> [ManagedObject] {
        let index = relationship.index
        if !object.storage.loadedToMany.contains(index) {
            do {
                try loadRelationship(relationship, of: [object])
            } catch {
                logger.warning("could not load \(object.objectID).\(relationship.name): \(error)")
            }
        }
        let state = object.storage.joinMembers(at: index) ?? JoinMembers()
        var members: [ManagedObject] = []
        var seen: Set<ObjectIdentifier> = []
        if object.storage.loadedToMany.contains(index), !state.stored.isEmpty || !state.storedTemporary.isEmpty {
            let destinationName = relationship.destinationEntityName
            var missing: [ObjectID] = []
            for key in state.stored where bookkeeping.object(for: ObjectID(entityName: destinationName, primaryKey: key)) == nil {
                missing.append(ObjectID(entityName: destinationName, primaryKey: key))
            }
            for id in state.storedTemporary where bookkeeping.object(for: id) == nil { missing.append(id) }
            if !missing.isEmpty {
                // Members that left the context (a batch fetch lets go of its pages): one query.
                do {
                    _ = try fetchObjects(withIDs: missing)
                } catch {
                    logger.warning("could not load members of \(object.objectID).\(relationship.name): \(error)")
                }
                let gone = missing.filter { bookkeeping.object(for: $0) == nil }
                if !gone.isEmpty {
                    object.storage.updateJoinMember(at: index) { $0.stored.subtract(gone.compactMap(\.primaryKey)) }
                    object.storage.updateJoinMember(at: index) { $0.storedTemporary.subtract(gone) }
                }
            }
            func add(_ id: ObjectID) {
                guard let member = bookkeeping.object(for: id), !member.deletedFlag, state.removed[ObjectIdentifier(member)] == nil
                else { return }
                if seen.insert(ObjectIdentifier(member)).inserted { members.append(member) }
            }
            for key in object.storage.joinMembers(at: index)?.stored ?? [] { add(ObjectID(entityName: destinationName, primaryKey: key)) }
            for id in object.storage.joinMembers(at: index)?.storedTemporary ?? [] { add(id) }
        }
        for member in state.added.values where !member.deletedFlag && seen.insert(ObjectIdentifier(member)).inserted {
            members.append(member)
        }
        return members.sorted { $0.objectID.description < $1.objectID.description }
    }

    /// Loads the stored members of a many-to-many relationship for saved owners (of one
    /// entity) with one query, registers them, and records each owner's stored set.
    func loadJoinMembers(of owners: [ManagedObject], relationship: RelationshipDescription) throws {
        guard let table = relationship.joinTable,
            let destination = coordinator.model.entity(named: relationship.destinationEntityName)
        else { return }
        let keys = owners.compactMap(\.objectID.primaryKey)
        guard !keys.isEmpty else { return }
        let result = try withDatabase {
            try coordinator.selectJoinedObjects(of: destination, through: table, ownerKeys: keys, on: $0)
        }
        let ownerColumn = destination.selectColumns.count
        var byOwner: [Int64: Set<Int64>] = [:]
        for row in result {
            let member = try register(row: row, entity: destination)
            guard let memberKey = member.objectID.primaryKey else { continue }
            byOwner[try Self.decodeInteger(row, column: ownerColumn), default: []].insert(memberKey)
        }
        for owner in owners {
            guard let key = owner.objectID.primaryKey else { continue }
            owner.storage.updateJoinMembers(at: relationship.index) { $0.stored = byOwner[key] ?? [] }
            owner.storage.setLoaded(relationship.index, true)
        }
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
                let destination = object.entity.relationships[index].destinationEntityName
                if let keys = keysByEntity[destination] { object.storage.updateJoinMember(at: index) { $0.stored.subtract(keys) } }
            }
        }
    }
}
