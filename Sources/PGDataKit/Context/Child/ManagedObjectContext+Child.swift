import Foundation

/// An object as a context holds it now, as values: what a child context reads from its
/// parent (on the parent's queue) to build an instance of its own (on its own queue).
struct ObjectState {
    let entity: EntityDescription
    let objectID: ObjectID
    let version: Int64
    let values: AttributeValues
    /// Where each to-one relationship with a foreign key points, by relationship index
    /// (`nil`: nowhere); empty for an entity without to-one relationships.
    let toOne: [ObjectID?]
}

/// Objects a parent hands a child: those asked for, in order, and the unsaved objects
/// they point at through to-one relationships (transitively), which only the parent can
/// give.
struct ParentObjects {
    var states: [ObjectState] = []
    var related: [ObjectState] = []
}

extension ManagedObjectContext {
    // MARK: - Making a child

    /// A new child context of this one (Core Data's private-queue context whose
    /// `parent` is this one; Vokoder's `temporaryContext`): a scratch pad over this
    /// context's objects, unsaved changes included, whose `save()` pushes into this
    /// context instead of the database.
    ///
    /// - **Reads** ask the parent, on its queue, for its objects' current values and build
    ///   the child's own instances from them, with the same `ObjectID`s (the temporary IDs
    ///   of the parent's unsaved inserts too): `fetch(_:)`, `count(for:)`,
    ///   `fetchObjectIDs(_:)`, `fetchAll(_:)`, `object(with:)`, `existingObject(with:)`,
    ///   to-one, to-many and many-to-many relationships, `refresh(_:mergeChanges:)`. The
    ///   child's own unsaved changes apply on top, as in any context, and a later read does
    ///   not overwrite an object the child has changed. `fetchDictionaries(_:)`,
    ///   `distinctValues` and `aggregate`, which read saved rows only in any context, read
    ///   them through the root context (a private root's transaction).
    /// - **`save()`** pushes the child's inserts, attribute and relationship changes and
    ///   deletes into the parent, on its queue, all or nothing: every object the changes
    ///   name is looked up in the parent first, and when one is gone there (deleted, say)
    ///   the save throws `ChildContextError.objectGoneFromParent` and changes nothing. The
    ///   parent then holds the changes as unsaved changes of its own (`hasChanges`,
    ///   `insertedObjects`, …; new objects keep their temporary IDs) until its own `save()`
    ///   writes them. What the child changed replaces the parent's values, also ones the
    ///   parent changed since the child read them; the rest keeps the parent's. Delete
    ///   rules run again in the parent. Nothing reaches the database or other processes,
    ///   and the context manager merges nothing into the main context, until the parent
    ///   itself saves. The child's did-save observers are told (IDs as in the parent).
    /// - `rollback()` and `reset()` discard the child's changes only; dropping the child
    ///   leaves the parent as it is.
    /// - Imports (`insertOrUpdate`, `importRecords(_:mapper:in:)`) work in a child: their
    ///   one lookup of keys per batch asks the parent (its unsaved objects, then the
    ///   stored rows), and new keys are still written as upserts when the parent saves.
    /// - Calls that need the database directly throw `ChildContextError.unsupported`
    ///   rather than go around the parent: `deleteAll` (a committed batch delete),
    ///   `fetch(_:inBatches:)` (a server-side cursor), object controllers (they follow the
    ///   store's saves), `ImportOperation` and `importRecords(_:mapper:options:progress:)`
    ///   (they save and retry batches against the database).
    ///
    /// Any context can be a parent: the main context, a private one, another child (each
    /// save moves changes one level up). Use the child on its own queue, as any context;
    /// its reads and saves wait for the parent's queue. A thread running a block of the
    /// parent may call the child's `performAndWait` (the child then runs on that thread),
    /// but a parent's block must not wait for a child's block that runs elsewhere and
    /// needs the parent: each would wait for the other, as in Core Data.
    ///
    /// For example, an edit that is kept or dropped:
    ///
    /// ```swift
    /// let editor = manager.mainContext.newChildContext(name: "edit")
    /// try editor.performAndWait {
    ///     guard let user = try editor.existingObject(with: userID) as? User else { return }
    ///     user.name = "Ada Lovelace"
    ///     if isValid(user) { try editor.save() }   // into the main context, not the database
    /// }
    /// try manager.mainContext.performAndWait { try manager.mainContext.save() }
    /// ```
    ///
    /// The child can be made on any thread; it starts empty and reads on demand.
    ///
    /// - Parameter name: a label for logs and the queue; `"<parent's name>.child"` by
    ///   default.
    public func newChildContext(name: String? = nil) -> ManagedObjectContext {
        liveChildren.add(1, ordering: .relaxed)
        return ManagedObjectContext(concurrencyType: .private, coordinator: coordinator, parent: self, name: name, logger: logger)
    }

    // MARK: - What a parent hands a child (on the parent's queue)

    /// The states of objects for a child, with the unsaved objects they point at.
    func statesForChild(_ objects: [ManagedObject]) -> ParentObjects {
        var answer = ParentObjects()
        answer.states.reserveCapacity(objects.count)
        var following: [ManagedObject] = []
        var included = Set(objects.map(\.objectID))
        for object in objects { answer.states.append(state(of: object, following: &following)) }
        while let next = following.popLast() {
            guard included.insert(next.objectID).inserted else { continue }
            answer.related.append(state(of: next, following: &following))
        }
        return answer
    }

    /// An object's current values and references; unsaved objects it points at are added
    /// to `following`.
    private func state(of object: ManagedObject, following: inout [ManagedObject]) -> ObjectState {
        object.prepareStorage()
        let entity = object.entity
        var toOne = [ObjectID?](repeating: nil, count: entity.toOneRelationships.isEmpty ? 0 : entity.relationships.count)
        for relationship in entity.toOneRelationships {
            switch object.storage.toOne[relationship.index] {
            case .none:
                continue
            case .key(let key):
                toOne[relationship.index] = ObjectID(entityName: relationship.destinationRootName, primaryKey: key)
            case .object(let target):
                if target.objectID.isTemporaryID {
                    // (A deleted unsaved object is no reference, as a save writes it.)
                    guard !target.deletedFlag, target.contextReference === reference else { continue }
                    following.append(target)
                }
                toOne[relationship.index] = target.objectID
            }
        }
        return ObjectState(entity: entity, objectID: object.objectID, version: object.storage.version, values: object.storage.sharedValues(), toOne: toOne)
    }

    /// The objects of `entity` whose unique `attribute` is one of `values`, as this
    /// context sees them, for a child's import: its unsaved objects first (deleted ones
    /// last, so an object inserted for a deleted one's key wins), then the stored rows.
    func uniqueObjectsForChild(
        of entity: EntityDescription, whereUnique attribute: AttributeDescription, isIn values: [StoredValue]
    ) throws -> [ManagedObject] {
        var wanted: [UniqueValue: StoredValue] = [:]
        for value in values { if let hash = UniqueValue(value) { wanted[hash] = value } }
        var found: [ManagedObject] = []
        let index = attribute.index
        for object in Array(insertedSet.union(changedSet)) + Array(deletedSet)
        where object.entity.name == entity.name && object.storage.valueCount > index {
            if let hash = UniqueValue(object.storage.value(at: index)), wanted.removeValue(forKey: hash) != nil { found.append(object) }
        }
        if !wanted.isEmpty { found += try fetchObjects(entity: entity, whereUnique: attribute, isIn: Array(wanted.values)) }
        return found
    }

    // MARK: - Reading through the parent (on the child's queue)

    /// Builds or updates the child's objects from what the parent handed over and returns
    /// those asked for, in order. An object the child has changed, inserted or deleted is
    /// left as it is; the others take the parent's values, which become their committed
    /// values here (so the child's changes are tracked against the parent's).
    func register(_ answer: ParentObjects) -> [ManagedObject] {
        var linking: [(object: ManagedObject, state: ObjectState)] = []
        func take(_ state: ObjectState) -> ManagedObject {
            if let existing = bookkeeping.object(for: state.objectID) {
                if !changedSet.contains(existing) && !existing.deletedFlag && !insertedSet.contains(existing) {
                    applyValues(state, to: existing)
                    linking.append((existing, state))
                }
                return existing
            }
            let object = state.entity.makeObject()
            object.entityStorage = state.entity
            object.objectID = state.objectID
            object.contextReference = reference  // (not via `managedObjectContext`: no retain of the context)
            applyValues(state, to: object)
            bookkeeping.register(object, as: state.objectID)
            linking.append((object, state))
            return object
        }
        bookkeeping.reserveRegistry(adding: answer.states.count + answer.related.count)
        for state in answer.related { _ = take(state) }
        let objects = answer.states.map(take)
        // After every object is registered: references to unsaved ones need their instance.
        for (object, state) in linking { link(object, to: state) }
        return objects
    }

    /// Makes a state's values an object's current and committed values.
    func applyValues(_ state: ObjectState, to object: ManagedObject) {
        object.storage.applyFetched(version: state.version, values: state.values)
    }

    /// Points an object's to-one relationships where the state says, as committed
    /// references: keys for saved objects, the child's instances for unsaved ones.
    func link(_ object: ManagedObject, to state: ObjectState) {
        let entity = state.entity
        guard !state.toOne.isEmpty else { return }
        if object.storage.toOne.count != entity.relationships.count {
            object.replaceReferences(Array(repeating: .none, count: entity.relationships.count))
        }
        var keys = [Int64?](repeating: nil, count: entity.relationships.count)
        var temporary: [Int: ObjectID] = [:]
        for relationship in entity.toOneRelationships {
            let index = relationship.index
            guard let target = state.toOne[index] else {
                object.setReference(.none, at: index)
                continue
            }
            if let key = target.primaryKey {
                keys[index] = key
                if case .object(let current) = object.storage.toOne[index], current.objectID == target { continue }
                object.setReference(.key(key), at: index)
            } else {
                temporary[index] = target
                object.setReference(bookkeeping.object(for: target).map { .object($0) } ?? .none, at: index)
            }
        }
        object.storage.replaceCommittedKeys(keys)
        object.storage.setSnapshotTemporaryTargets(temporary.isEmpty ? nil : temporary)
    }

    /// The object with an ID, from the parent (`ParentLink.objectFromParent(_:)`).
    ///
    /// - Throws: what the parent's `object(with:)` throws.
    func objectFromParent(_ id: ObjectID, parent: ManagedObjectContext) throws -> ManagedObject {
        try ParentLink(child: self, parent: parent).objectFromParent(id)
    }

    /// Registers the objects with these IDs that are not registered yet: one query per
    /// entity, or one call to the parent in a child context; IDs of objects that are gone
    /// (or temporary, outside a child) are left out.
    func fetchObjects(withIDs ids: [ObjectID]) throws -> [ManagedObject] {
        let missing = ids.filter { bookkeeping.object(for: $0) == nil }
        guard !missing.isEmpty else { return [] }
        if let parent {
            let link = ParentLink(child: self, parent: parent)
            let answer = try parent.performAndWait { parent.statesForChild(try link.objectsForChild(missing).map(\.object)) }
            return register(answer)
        }
        var keysByEntity: [String: [Int64]] = [:]
        for id in missing { if let key = id.primaryKey { keysByEntity[id.entityName, default: []].append(key) } }
        var objects: [ManagedObject] = []
        for (name, keys) in keysByEntity.sorted(by: { $0.key < $1.key }) {
            guard let entity = coordinator.model.entity(named: name) else { continue }
            objects += try fetchObjects(entity: entity, .keys(keys, of: entity))
        }
        return objects
    }

    /// Whether a to-many (or many-to-many, or key-less one-to-one) relationship of an
    /// object can be loaded: its rows are stored (saved), or, in a child context, the
    /// parent has it (the child did not insert it).
    func canLoadRelationships(of owner: ManagedObject) -> Bool {
        parent == nil ? owner.objectID.primaryKey != nil : !insertedSet.contains(owner)
    }

    /// Loads a to-many, many-to-many or key-less one-to-one relationship of the owners
    /// that have not loaded it: one query for all of them, or one call to the parent in a
    /// child context.
    func loadRelationship(_ relationship: RelationshipDescription, of owners: [ManagedObject]) throws {
        let index = relationship.index
        let owners = owners.filter { !$0.storage.loadedToMany.contains(index) && canLoadRelationships(of: $0) }
        guard !owners.isEmpty else { return }
        if let parent {
            try ParentLink(child: self, parent: parent).loadFromParent(relationship, of: owners)
            return
        }
        if relationship.joinTable != nil {
            try loadJoinMembers(of: owners, relationship: relationship)
            return
        }
        guard let inverseName = relationship.inverseName,
            let destination = coordinator.model.entity(named: relationship.destinationEntityName),
            let column = destination.relationship(named: inverseName)?.columnName
        else { return }
        _ = try fetchObjects(entity: destination, .rows(where: column, isIn: owners.compactMap(\.objectID.primaryKey)))
        for owner in owners { owner.storage.setLoaded(index, true) }
    }

    /// Re-reads objects from the parent (a child's refresh and merge:
    /// `ParentLink.refreshFromParent(_:localEdits:)`); nothing outside a child context.
    func refreshFromParent(_ objects: [ManagedObject], localEdits: LocalEdits) throws {
        guard let parent, !objects.isEmpty else { return }
        try ParentLink(child: self, parent: parent).refreshFromParent(objects, localEdits: localEdits)
    }

    /// The IDs of the objects of `entity` whose unique `attribute` is one of `values`
    /// (an import's links): the primary keys of stored rows, with one query; in a child
    /// context, as its parent sees them (its unsaved objects first, temporary IDs for its
    /// inserts).
    ///
    /// - Throws: `PostgresError`.
    func uniqueObjectIDs(
        of entity: EntityDescription, where attribute: AttributeDescription, isIn values: [StoredValue]
    ) throws -> [(objectID: ObjectID, value: StoredValue)] {
        if let parent {
            let link = ParentLink(child: self, parent: parent)
            return try parent.performAndWait { try link.uniqueObjectIDsForChild(of: entity, where: attribute, isIn: values) }
        }
        return try withDatabase { try coordinator.selectKeys(of: entity, where: attribute, isIn: values, on: $0) }.map {
            (ObjectID(entityName: entity.rootEntityName, primaryKey: $0.primaryKey), $0.value)
        }
    }

    /// A child context's `save()`: pushes its changes into the parent
    /// (`ParentLink.pushChanges()`).
    ///
    /// - Throws: `ManagedObjectError.deleteDenied`, `ChildContextError.objectGoneFromParent`,
    ///   or `PostgresError` (the parent had to read an object and could not).
    func pushChanges(into parent: ManagedObjectContext) throws {
        try ParentLink(child: self, parent: parent).pushChanges()
    }

    /// A call a child context refuses (see `newChildContext(name:)`).
    ///
    /// - Throws: `ChildContextError.unsupported` in a child context.
    func refuseInChild(_ call: String, advice: String) throws {
        if parent != nil { throw ChildContextError.unsupported(call: call, advice: advice) }
    }
}
