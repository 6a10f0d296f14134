import Foundation

/// One object's changes that a child context pushes into its parent, as values.
struct PushedObject {
    let entity: EntityDescription
    let objectID: ObjectID
    /// An inserted object's every attribute; an updated one's changed attributes.
    var attributes: [(index: Int, value: StoredValue)] = []
    /// To-one relationships with a foreign key: an inserted object's set ones, an updated
    /// one's changed ones (`nil`: none).
    var toOne: [(index: Int, target: ObjectID?)] = []
    /// Many-to-many relationships whose sets changed: the members added and removed.
    var joins: [(index: Int, added: [ObjectID], removed: [ObjectID])] = []
    /// The names of what changed (for the did-save notification).
    var changedKeys: Set<String> = []
    /// An import's keyed insert (see `ManagedObject.upsertAttributeIndex`).
    var upsertAttributeIndex: Int?
    var upsertKeepsExisting = false

    init(_ object: ManagedObject) {
        entity = object.entity
        objectID = object.objectID
    }

    var isEmpty: Bool { attributes.isEmpty && toOne.isEmpty && joins.isEmpty }
}

/// What a child context's save pushes into its parent.
struct PushedChanges {
    var inserted: [PushedObject] = []
    var updated: [PushedObject] = []
    var deleted: [ObjectID] = []
}

extension ParentLink {
    // MARK: - Saving into the parent (the child's side)

    /// A child context's `save()`: checks the delete rules, hands its changes to the
    /// parent as values (on the parent's queue: `applyChildChanges`), then makes them the
    /// child's committed state and tells did-save observers. Nothing changes in the child
    /// when the parent refuses them.
    ///
    /// - Throws: `ManagedObjectError.deleteDenied`, `ObjectValidationError` (the child's objects
    ///   break rules; nothing is pushed), `ChildContextError.objectGoneFromParent`, or
    ///   `PostgresError` (the parent had to read an object and could not).
    func pushChanges() throws {
        child.resolvedConflicts = []
        guard child.hasUnsavedChanges else {
            child.undoManager?.removeAllActions()
            return
        }
        try child.validateChanges()
        let changes = pushedChanges()
        // (The parent's undo manager did not record the pushed changes: it forgets what
        // it could undo, as a save does.)
        let saved = try parent.performAndWait {
            let saved = try applyChildChanges(changes)
            parent.undoManager?.removeAllActions()
            return saved
        }
        finishPush()
        child.undoManager?.removeAllActions()
        child.observers.postDidSave(saved)
    }

    /// The child's unsaved changes, as values.
    private func pushedChanges() -> PushedChanges {
        var changes = PushedChanges()
        /// Where a reference points, as the parent will know it: an object this child
        /// inserted and deleted again never reaches the parent, so it is no reference.
        func target(_ reference: RelatedReference, _ relationship: RelationshipDescription) -> ObjectID? {
            switch reference {
            case .none: return nil
            case .key(let key): return ObjectID(entityName: relationship.destinationRootName, primaryKey: key)
            case .object(let object): return isGone(object) ? nil : object.objectID
            }
        }
        func joins(of object: ManagedObject, into pushed: inout PushedObject) {
            for (index, state) in object.storage.joinMembers.sorted(by: { $0.key < $1.key }) where state.hasChanges {
                let added = state.added.values.filter { !$0.deletedFlag }.map(\.objectID)
                let removed = state.removed.values.filter { !isGone($0) }.map(\.objectID)
                pushed.joins.append((index, added, removed))
                pushed.changedKeys.insert(object.entity.relationships[index].name)
            }
        }
        changes.inserted.reserveCapacity(child.insertedSet.count)
        for object in child.insertedSet {
            object.prepareStorage()
            var pushed = PushedObject(object)
            // Unsafe: the buffer is only read, element by element, inside the closure.
            pushed.attributes = object.storage.withUnsafeValues { $0.enumerated().map { ($0.offset, $0.element) } }
            for relationship in object.entity.toOneRelationships {
                if let id = target(object.storage.toOne[relationship.index], relationship) { pushed.toOne.append((relationship.index, id)) }
            }
            joins(of: object, into: &pushed)
            pushed.upsertAttributeIndex = object.storage.upsertAttributeIndex
            pushed.upsertKeepsExisting = object.storage.upsertKeepsExisting
            changes.inserted.append(pushed)
        }
        for object in child.changedSet where !child.insertedSet.contains(object) && !object.deletedFlag {
            let entity = object.entity
            var pushed = PushedObject(object)
            for index in object.changedAttributeIndexes {
                pushed.attributes.append((index, object.storage.value(at: index)))
                pushed.changedKeys.insert(entity.attributes[index].name)
            }
            for index in object.changedToOneIndexes {
                pushed.toOne.append((index, target(object.storage.toOne[index], entity.relationships[index])))
                pushed.changedKeys.insert(entity.relationships[index].name)
            }
            joins(of: object, into: &pushed)
            if !pushed.isEmpty { changes.updated.append(pushed) }
        }
        changes.deleted = child.deletedSet.map(\.objectID)
        return changes
    }

    /// Whether an object left the child for good: inserted here and deleted again.
    private func isGone(_ object: ManagedObject) -> Bool {
        object.deletedFlag && child.bookkeeping.object(for: object.objectID) !== object
    }

    /// After the parent took the changes: what was pushed becomes the child's committed
    /// state (its objects now stand on the parent's), deleted objects leave.
    private func finishPush() {
        for object in child.insertedSet {
            object.storage.markKeyedInsert(attribute: nil, keepsExisting: false)
            commitPushed(object, wasInserted: true)
        }
        for object in child.changedSet where !child.insertedSet.contains(object) && !object.deletedFlag {
            commitPushed(object, wasInserted: false)
        }
        for object in child.deletedSet { child.forgetDeletedObject(object) }
        child.bookkeeping.pending.removeAll(keepingCapacity: false)
        child.bookkeeping.clearKeyedInsertKeysChanged()
    }

    /// Makes an object's current values, references and many-to-many sets its committed
    /// ones, as the parent now holds them.
    private func commitPushed(_ object: ManagedObject, wasInserted: Bool) {
        let entity = object.entity
        var temporary: [Int: ObjectID] = [:]
        for relationship in entity.toOneRelationships {
            guard case .object(let target) = object.storage.toOne[relationship.index] else { continue }
            if isGone(target) {
                object.setReference(.none, at: relationship.index)
            } else if target.objectID.isTemporaryID {
                temporary[relationship.index] = target.objectID
            }
        }
        object.commitSnapshot()
        object.storage.setSnapshotTemporaryTargets(temporary.isEmpty ? nil : temporary)
        for (index, state) in object.storage.joinMembers where state.hasChanges {
            var committed = JoinMembers(stored: state.stored, storedTemporary: state.storedTemporary)
            if object.storage.loadedToMany.contains(index) || wasInserted {
                for member in state.removed.values {
                    if let key = member.objectID.primaryKey { committed.stored.remove(key) } else { committed.storedTemporary.remove(member.objectID) }
                }
                for member in state.added.values where !member.deletedFlag {
                    if let key = member.objectID.primaryKey { committed.stored.insert(key) } else { committed.storedTemporary.insert(member.objectID) }
                }
            }
            object.storage.setJoinMembers(committed, at: index)
        }
        if wasInserted {
            // Its members are all here: none can be in the parent that the child lacks.
            for relationship in entity.relationships where relationship.isToMany || relationship.columnName == nil {
                object.storage.setLoaded(relationship.index, true)
            }
        }
    }

    // MARK: - Taking the child's changes (the parent's side)

    /// Applies the child's pushed changes to the parent (on its queue), all or nothing:
    /// every object they name is looked up first (registered, or read now) along with the
    /// many-to-many sets they change, and only then is anything changed. Inserted objects
    /// keep the child's temporary IDs; attributes and relationships the child changed
    /// replace the parent's values; deletes apply the delete rules here. A delete, or
    /// the removal of a set member, of an object the parent no longer has is moot and
    /// left out.
    ///
    /// - Returns: the changes, for the child's did-save observers.
    /// - Throws: `ChildContextError.objectGoneFromParent` naming an updated object, a
    ///   relationship's destination or an added member the parent no longer has
    ///   (deleted here, or forgotten), or `PostgresError` from reading; nothing changed.
    func applyChildChanges(_ changes: PushedChanges) throws -> ContextChanges {
        parent.assertOnQueue()
        let insertedIDs = Set(changes.inserted.map(\.objectID))
        // Objects that must be here, and objects that may be gone.
        var required: [ObjectID] = changes.updated.map(\.objectID)
        var optional: [ObjectID] = changes.deleted
        for pushed in changes.inserted + changes.updated {
            for (_, target) in pushed.toOne { if let target, !insertedIDs.contains(target) { required.append(target) } }
            for join in pushed.joins {
                required += join.added.filter { !insertedIDs.contains($0) }
                optional += join.removed.filter { !insertedIDs.contains($0) }
            }
        }
        var objects: [ObjectID: ManagedObject] = [:]
        for (asked, object) in try objectsForChild(Array(Set(required + optional))) { objects[asked] = object }
        if let missing = required.first(where: { objects[$0] == nil }) {
            throw ChildContextError.objectGoneFromParent(missing, call: "save()")
        }
        // The sets to change, loaded now: applying must not need to read.
        try loadChangedSets(of: changes.updated, objects: objects)

        // Nothing below throws.
        for pushed in changes.inserted {
            let object = pushed.entity.makeObject()
            object.entityStorage = pushed.entity
            object.prepareStorage()
            object.contextReference = parent.reference  // (not via `managedObjectContext`: no retain of the context)
            object.objectID = pushed.objectID
            object.storage.replaceValues(pushed.attributes.map(\.value))
            object.storage.markKeyedInsert(attribute: pushed.upsertAttributeIndex, keepsExisting: pushed.upsertKeepsExisting)
            if pushed.upsertAttributeIndex != nil { parent.bookkeeping.noteKeyedInsertKeyChanged() }  // (the save checks for twins)
            parent.bookkeeping.register(object, as: pushed.objectID)
            parent.bookkeeping.pending.insert(object, into: .inserted)
            objects[pushed.objectID] = object
        }
        for pushed in changes.updated {
            guard let object = objects[pushed.objectID] else { continue }
            for (index, value) in pushed.attributes { object.setStoredValue(value, at: index) }
        }
        for pushed in changes.inserted + changes.updated {
            guard let object = objects[pushed.objectID] else { continue }
            for (index, target) in pushed.toOne {
                object.setRelatedObjects(target.flatMap { objects[$0] }.map { [$0] } ?? [], at: index)
            }
        }
        for pushed in changes.inserted + changes.updated {
            guard let owner = objects[pushed.objectID] else { continue }
            for join in pushed.joins {
                let removed = Set(join.removed)
                var members = owner.relatedObjects(at: join.index).filter { !removed.contains($0.objectID) }
                var present = Set(members.map(ObjectIdentifier.init))
                for id in join.added {
                    if let member = objects[id], present.insert(ObjectIdentifier(member)).inserted { members.append(member) }
                }
                owner.setRelatedObjects(members, at: join.index)
            }
        }
        for id in changes.deleted {
            if let object = objects[id] { parent.delete(object) }
        }

        var saved = ContextChanges()
        saved.inserted = insertedIDs
        for pushed in changes.updated {
            saved.updated.insert(pushed.objectID)
            saved.changedKeys[pushed.objectID] = pushed.changedKeys
        }
        saved.deleted = Set(changes.deleted)
        for id in saved.inserted.union(saved.updated).union(saved.deleted) {
            if let object = objects[id], object.entity.superentityName != nil { saved.entityNames[id] = object.entity.name }
        }
        return saved
    }

    /// Loads the many-to-many sets that updated objects' pushed join changes edit, one
    /// relationship at a time in a fixed order.
    private func loadChangedSets(of updated: [PushedObject], objects: [ObjectID: ManagedObject]) throws {
        var owners: [String: (relationship: RelationshipDescription, owners: [ManagedObject])] = [:]
        for pushed in updated {
            guard let owner = objects[pushed.objectID] else { continue }
            for join in pushed.joins {
                let relationship = pushed.entity.relationships[join.index]
                owners["\(pushed.entity.name).\(relationship.name)", default: (relationship, [])].owners.append(owner)
            }
        }
        for (_, entry) in owners.sorted(by: { $0.key < $1.key }) {
            try parent.loadRelationship(entry.relationship, of: entry.owners)
        }
    }
}
