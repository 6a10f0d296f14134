/// One object's members of one many-to-many relationship: the related keys as stored
/// (once loaded) and the objects added or removed since the last save.
///
/// Both sides of a pair record a change (adding a tag to `post.tags` adds the post to
/// `tag.posts`), so either side's set is right without loading the other; a save writes
/// each pair once.
struct JoinMembers {
    /// The related objects' primary keys as stored; meaningful while the owner's
    /// `loadedToMany` holds the relationship's index.
    var stored: Set<Int64> = []
    /// In a child context: the related objects of temporary ID (the parent's unsaved
    /// inserts) that the parent's set held when the child read it; meaningful, as
    /// `stored`, while the relationship is loaded.
    var storedTemporary: Set<ObjectID> = []
    /// Objects added since the last save, by identity.
    var added: [ObjectIdentifier: ManagedObject] = [:]
    /// Saved objects removed since the last save, by identity.
    var removed: [ObjectIdentifier: ManagedObject] = [:]

    /// Whether the set differs from the stored one.
    var hasChanges: Bool { !added.isEmpty || !removed.isEmpty }
}

extension ManagedObject {
    /// Whether a many-to-many relationship of this object has unsaved changes.
    var hasJoinChanges: Bool {
        storage.joinMembers.values.contains { $0.hasChanges }
    }

    /// Whether a relationship is many-to-many. The model's descriptions (those of objects
    /// in a context) say so; for an object in no context, whose description may be built
    /// from its class alone, the inverse's declaration says so.
    func isManyToMany(_ relationship: RelationshipDescription) -> Bool {
        if relationship.joinTable != nil { return true }
        guard relationship.isToMany, managedObjectContext == nil, let inverseName = relationship.inverseName
        else { return false }
        return EntityRegistry.description(for: relationship.destinationType).relationship(named: inverseName)?.isToMany
            ?? false
    }

    /// The inverse relationship as the related object's entity describes it.
    func inverse(of relationship: RelationshipDescription, on related: ManagedObject) -> RelationshipDescription? {
        relationship.inverseName.flatMap { related.entity.relationship(named: $0) }
    }

    /// The members of a many-to-many relationship: through the context (loaded once with
    /// one query), or the objects added so far when the object is in no context.
    func joinedObjects(at index: Int) -> [ManagedObject] {
        let relationship = entity.relationships[index]
        if let context = managedObjectContext { return context.joinedMembers(of: self, relationship: relationship) }
        return (storage.joinMembers(at: index)?.added.values).map { Array($0) } ?? []
    }

    /// Sets a many-to-many relationship: pairs that go are removed on both sides, new
    /// pairs are added on both sides.
    func setJoinedObjects(_ objects: [ManagedObject], at index: Int) {
        let relationship = entity.relationships[index]
        let current = joinedObjects(at: index)
        let wanted = Set(objects.map(ObjectIdentifier.init))
        let existing = Set(current.map(ObjectIdentifier.init))
        for member in current where !wanted.contains(ObjectIdentifier(member)) {
            removeJoinMember(member, at: index)
            if let inverse = inverse(of: relationship, on: member) { member.removeJoinMember(self, at: inverse.index) }
        }
        var seen: Set<ObjectIdentifier> = []
        for object in objects where !existing.contains(ObjectIdentifier(object)) && seen.insert(ObjectIdentifier(object)).inserted {
            addJoinMember(object, at: index)
            if let inverse = inverse(of: relationship, on: object) { object.addJoinMember(self, at: inverse.index) }
        }
        // An object of no context related to objects of one joins them.
        if managedObjectContext == nil, let context = objects.lazy.compactMap(\.managedObjectContext).first {
            context.insert(self)
        }
    }

    /// Records `member` as added to a many-to-many relationship (undoing a removal).
    func addJoinMember(_ member: ManagedObject, at index: Int) {
        var state = storage.joinMembers(at: index) ?? JoinMembers()
        let id = ObjectIdentifier(member)
        let wasRemoved = state.removed.removeValue(forKey: id) != nil
        let loaded = storage.isLoaded(index)
        let isStored = member.objectID.primaryKey.map { loaded && state.stored.contains($0) }
            ?? (loaded && state.storedTemporary.contains(member.objectID))
        if isStored {
            if !wasRemoved { return }
        } else {
            if state.added[id] != nil && !wasRemoved { return }
            state.added[id] = member
        }
        contextReference?.undoManager?.willChange(self)
        storage.setJoinMembers(state, at: index)
        managedObjectContext?.objectDidChange(self)
    }

    /// Records `member` as removed from a many-to-many relationship (undoing an addition).
    func removeJoinMember(_ member: ManagedObject, at index: Int) {
        var state = storage.joinMembers(at: index) ?? JoinMembers()
        let id = ObjectIdentifier(member)
        let wasAdded = state.added.removeValue(forKey: id) != nil
        let loaded = storage.isLoaded(index)
        // (An object of temporary ID is in no stored set, except a parent's set a child
        // context read, or has yet to read.)
        let isAbsent = member.objectID.primaryKey.map { loaded && !state.stored.contains($0) }
            ?? (loaded
                ? !state.storedTemporary.contains(member.objectID) : managedObjectContext?.parent == nil)
        if isAbsent {
            if !wasAdded { return }
        } else {
            if state.removed[id] != nil && !wasAdded { return }
            state.removed[id] = member
        }
        contextReference?.undoManager?.willChange(self)
        storage.setJoinMembers(state, at: index)
        managedObjectContext?.objectDidChange(self)
    }

    /// Drops this object's unsaved many-to-many changes and the matching changes of its
    /// partners, so both sides agree again.
    func discardJoinChanges() {
        for (index, state) in storage.joinMembers where state.hasChanges {
            let relationship = entity.relationships[index]
            for member in state.added.values {
                if let inverse = inverse(of: relationship, on: member) {
                    member.storage.updateJoinMember(at: inverse.index) { $0.added.removeValue(forKey: ObjectIdentifier(self)) }
                }
            }
            for member in state.removed.values {
                if let inverse = inverse(of: relationship, on: member) {
                    member.storage.updateJoinMember(at: inverse.index) { $0.removed.removeValue(forKey: ObjectIdentifier(self)) }
                }
            }
            storage.updateJoinMember(at: index) {
                $0.added.removeAll()
                $0.removed.removeAll()
            }
        }
    }

    /// The many-to-many relationships with unsaved changes, by name.
    var changedJoinRelationshipNames: Set<String> {
        Set(storage.joinMembers.compactMap { $0.value.hasChanges ? entity.relationships[$0.key].name : nil })
    }

    /// Before a one-to-one partner is assigned through the side holding the foreign key,
    /// the partner's previous partner lets go of it (its key becomes `nil`).
    func releaseOneToOnePartner(of target: ManagedObject, through relationship: RelationshipDescription) {
        guard target.managedObjectContext != nil, let inverse = inverse(of: relationship, on: target),
            !inverse.isToMany, inverse.columnName == nil
        else { return }
        for partner in target.relatedObjects(at: inverse.index) where partner !== self {
            partner.setRelatedObjects([], at: relationship.index)
        }
    }
}
