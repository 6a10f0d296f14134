import Foundation

/// Reading relationships' members: a to-many relationship's from the registered objects'
/// to-one references, a many-to-many relationship's from its stored pairs, each loaded
/// once with one query.
extension ObjectLoader {
    /// The members of a to-many relationship: loaded once with one query (in a child
    /// context, from the parent), then read from the registered objects so unsaved
    /// changes count.
    func members(of object: ManagedObject, relationship: RelationshipDescription) -> [ManagedObject] {
        guard let inverseName = relationship.inverseName,
            let destination = context.coordinator.model.entity(named: relationship.destinationEntityName),
            let inverse = destination.relationship(named: inverseName),
            inverse.columnName != nil
        else { return [] }
        if !object.storage.loadedToMany.contains(relationship.index) {
            do {
                try context.loadRelationship(relationship, of: [object])
            } catch {
                context.logger.warning("could not load \(object.objectID).\(relationship.name): \(error)")
            }
        }
        let index = membersIndex(of: destination, inverse: inverse)
        // (Each candidate is in one of the two lists: its to-one holds an object or a key.)
        var found = index.byObject[ObjectIdentifier(object)] ?? []
        if let key = object.objectID.primaryKey, let byKey = index.byKey[key] { found += byKey }
        return found.sorted { $0.objectID.description < $1.objectID.description }
    }

    /// The registered objects of `destination` by the owner their `inverse` to-one
    /// relationship points at: built with one pass over the registry, and kept until a
    /// registration, a to-one reference or a deletion mark changes, so reading the
    /// members of many owners costs one pass plus their members, not one pass each.
    private func membersIndex(of destination: EntityDescription, inverse: RelationshipDescription) -> MembersIndex {
        let key = MembersIndex.Key(entity: destination.name, relationship: inverse.index)
        // (`reset()` replaces the reference and empties the registry, which drops the
        // indexes: a generation is only ever compared with its own reference's.)
        return context.bookkeeping.membersIndex(key, generation: { context.reference.membershipGeneration }) { registered in
            var index = MembersIndex()
            for candidate in registered where context.coordinator.model.isEntity(candidate.entity, kindOf: destination.name) && !candidate.deletedFlag {
                candidate.prepareStorage()
                switch candidate.storage.toOne[inverse.index] {
                case .none: continue
                case .key(let owner): index.byKey[owner, default: []].append(candidate)
                case .object(let owner): index.byObject[ObjectIdentifier(owner), default: []].append(candidate)
                }
            }
            return index
        }
    }

    /// The members of a many-to-many relationship: the stored pairs (loaded once with one
    /// query; in a child context, the parent's set), minus the objects removed and plus
    /// the objects added since the last save; deleted objects left out.
    func joinedMembers(of object: ManagedObject, relationship: RelationshipDescription) -> [ManagedObject] {
        let index = relationship.index
        if !object.storage.loadedToMany.contains(index) {
            do {
                try context.loadRelationship(relationship, of: [object])
            } catch {
                context.logger.warning("could not load \(object.objectID).\(relationship.name): \(error)")
            }
        }
        let state = object.storage.joinMembers(at: index) ?? JoinMembers()
        var members: [ManagedObject] = []
        var seen: Set<ObjectIdentifier> = []
        if object.storage.loadedToMany.contains(index), !state.stored.isEmpty || !state.storedTemporary.isEmpty {
            let destinationName = relationship.destinationRootName
            var missing: [ObjectID] = []
            for key in state.stored where context.bookkeeping.object(for: ObjectID(entityName: destinationName, primaryKey: key)) == nil {
                missing.append(ObjectID(entityName: destinationName, primaryKey: key))
            }
            for id in state.storedTemporary where context.bookkeeping.object(for: id) == nil { missing.append(id) }
            if !missing.isEmpty {
                // Members that left the context (a batch fetch lets go of its pages): one query.
                do {
                    _ = try context.fetchObjects(withIDs: missing)
                } catch {
                    context.logger.warning("could not load members of \(object.objectID).\(relationship.name): \(error)")
                }
                let gone = missing.filter { context.bookkeeping.object(for: $0) == nil }
                if !gone.isEmpty {
                    object.storage.updateJoinMember(at: index) { $0.stored.subtract(gone.compactMap(\.primaryKey)) }
                    object.storage.updateJoinMember(at: index) { $0.storedTemporary.subtract(gone) }
                }
            }
            func add(_ id: ObjectID) {
                guard let member = context.bookkeeping.object(for: id), !member.deletedFlag, state.removed[ObjectIdentifier(member)] == nil
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
            let destination = context.coordinator.model.entity(named: relationship.destinationEntityName)
        else { return }
        let keys = owners.compactMap(\.objectID.primaryKey)
        guard !keys.isEmpty else { return }
        let result = try context.withDatabase {
            try context.coordinator.selectJoinedObjects(of: destination, through: table, ownerKeys: keys, on: $0)
        }
        let ownerColumn = destination.selectColumns.count
        var byOwner: [Int64: Set<Int64>] = [:]
        // A hierarchy's members are read again with their own entities' columns.
        var unregistered: [Int64] = []
        for row in result {
            let memberKey: Int64
            if destination.hasSubentities {
                memberKey = try ManagedObjectContext.decodeInteger(row, column: 0)
                if context.bookkeeping.object(for: ObjectID(entityName: destination.rootEntityName, primaryKey: memberKey)) == nil {
                    unregistered.append(memberKey)
                }
            } else {
                guard let key = try register(row: row, entity: destination).objectID.primaryKey else { continue }
                memberKey = key
            }
            byOwner[try ManagedObjectContext.decodeInteger(row, column: ownerColumn), default: []].insert(memberKey)
        }
        if !unregistered.isEmpty { _ = try fetchObjects(entity: destination, .keys(unregistered, of: destination)) }
        for owner in owners {
            guard let key = owner.objectID.primaryKey else { continue }
            owner.storage.updateJoinMembers(at: relationship.index) { $0.stored = byOwner[key] ?? [] }
            owner.storage.setLoaded(relationship.index, true)
        }
    }
}
