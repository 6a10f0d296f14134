import Foundation

/// A child context's link to its parent, made for one read through the parent or one save
/// into it (`ManagedObjectContext.newChildContext(name:)` says what a child does). It holds
/// the two contexts, nothing else, and lives for that call.
///
/// Its methods are of two sides. **The child's side** runs on the child's queue: it asks
/// the parent (`parent.performAndWait`) and builds or updates the child's objects from the
/// values it answers (`ManagedObjectContext.register(_:)`), or pushes the child's changes
/// and makes them the child's committed state. **The parent's side** runs inside that
/// `performAndWait`, on the parent's queue, and touches the parent only: it looks up the
/// objects the child names (also by the temporary IDs they had before the parent saved
/// them) and applies what the child pushes. What passes between the queues is values
/// (`ObjectState`, `ParentObjects`, `PushedChanges`), never the other context's objects.
///
/// The context makes one in its child-only paths; `objectFromParent`, `refreshFromParent`
/// and `pushChanges(into:)` stay on it as forwards for Loading and Saving. What Loading
/// and Fetching call on one side without a link stays on the context (the parent's side
/// has no child to make one with): `statesForChild(_:)` and
/// `uniqueObjectsForChild(of:whereUnique:isIn:)`, asked of a parent, and `register(_:)`,
/// with which a child takes the answers.
struct ParentLink {
    /// The child context, on whose queue the link is used.
    let child: ManagedObjectContext
    /// The child's parent, asked on its own queue.
    let parent: ManagedObjectContext

    // MARK: - Reading through the parent (the child's side)

    /// The object with an ID, from the parent.
    ///
    /// - Throws: what the parent's `object(with:)` throws.
    func objectFromParent(_ id: ObjectID) throws -> ManagedObject {
        let answer = try parent.performAndWait { parent.statesForChild([try objectForChild(id)]) }
        guard let object = child.register(answer).first else { throw ManagedObjectError.objectNotFound(id) }
        return object
    }

    /// Loads a relationship of owners from the parent: the members the parent's objects
    /// have now. A many-to-many set read so becomes the owner's committed set here.
    func loadFromParent(_ relationship: RelationshipDescription, of owners: [ManagedObject]) throws {
        let ids = owners.map(\.objectID)
        let (answer, counts) = try parent.performAndWait { () throws -> (ParentObjects, [Int]) in
            let lists = try membersForChild(of: ids, relationship: relationship)
            return (parent.statesForChild(lists.flatMap { $0 }), lists.map(\.count))
        }
        let members = child.register(answer)
        let index = relationship.index
        var start = 0
        for (owner, count) in zip(owners, counts) {
            let list = members[start..<(start + count)]
            start += count
            if relationship.joinTable != nil {
                var state = owner.storage.joinMembers(at: index) ?? JoinMembers()
                state.stored = Set(list.compactMap(\.objectID.primaryKey))
                state.storedTemporary = Set(list.lazy.map(\.objectID).filter(\.isTemporaryID))
                owner.storage.setJoinMembers(state, at: index)
            }
            owner.storage.setLoaded(index, true)
        }
    }

    /// Re-reads objects from the parent (a child's refresh and merge): the parent's
    /// current values, with the child's unsaved changes kept as `localEdits` says.
    /// Objects the parent no longer has are marked deleted and leave the context.
    func refreshFromParent(_ objects: [ManagedObject], localEdits: ManagedObjectContext.LocalEdits) throws {
        let ids = objects.map(\.objectID)
        let (answer, asked) = try parent.performAndWait { () throws -> (ParentObjects, [ObjectID]) in
            let found = try objectsForChild(ids)
            return (parent.statesForChild(found.map(\.object)), found.map(\.asked))
        }
        _ = child.register(ParentObjects(related: answer.related))
        var states: [ObjectID: ObjectState] = [:]
        for (id, state) in zip(asked, answer.states) { states[id] = state }
        for object in objects {
            guard let state = states[object.objectID] else {
                child.forgetDeletedObject(object)
                continue
            }
            child.refresh(object, localEdits: localEdits) {
                child.applyValues(state, to: object)
                child.link(object, to: state)
            }
        }
    }

    // MARK: - What the parent looks up for the child (the parent's side)

    /// The object the child names by `id`: also by the temporary ID an object had before
    /// the parent saved it.
    ///
    /// - Throws: `ManagedObjectError.objectNotFound` or `.objectDeleted`, `PostgresError`.
    func objectForChild(_ id: ObjectID) throws -> ManagedObject {
        try parent.object(with: parent.bookkeeping.permanentID(forTemporary: id) ?? id)
    }

    /// The objects the child names, those the parent still has (not deleted), each with
    /// the ID the child asked by: registered ones, then the others with one query per
    /// entity (one call to its own parent for a parent that is a child).
    func objectsForChild(_ ids: [ObjectID]) throws -> [(asked: ObjectID, object: ManagedObject)] {
        var found: [(asked: ObjectID, object: ManagedObject)] = []
        var missing: [ObjectID] = []
        for asked in ids {
            let id = parent.bookkeeping.permanentID(forTemporary: asked) ?? asked
            if let object = parent.bookkeeping.object(for: id) {
                if !object.deletedFlag { found.append((asked, object)) }
            } else {
                missing.append(asked)
            }
        }
        guard !missing.isEmpty else { return found }
        _ = try parent.fetchObjects(withIDs: missing.map { parent.bookkeeping.permanentID(forTemporary: $0) ?? $0 })
        for asked in missing {
            if let object = parent.bookkeeping.object(for: parent.bookkeeping.permanentID(forTemporary: asked) ?? asked), !object.deletedFlag { found.append((asked, object)) }
        }
        return found
    }

    /// The members of a relationship of owners the child names (owners the parent no
    /// longer has have none).
    func membersForChild(of ownerIDs: [ObjectID], relationship: RelationshipDescription) throws -> [[ManagedObject]] {
        let owners = Dictionary(try objectsForChild(ownerIDs).map { ($0.asked, $0.object) }, uniquingKeysWith: { a, _ in a })
        return ownerIDs.map { owners[$0]?.relatedObjects(at: relationship.index) ?? [] }
    }

    /// `uniqueObjectIDs(of:where:isIn:)` as the parent sees them, for the child: its
    /// unsaved objects (not deleted) first, then the stored rows.
    func uniqueObjectIDsForChild(
        of entity: EntityDescription, where attribute: AttributeDescription, isIn values: [StoredValue]
    ) throws -> [(objectID: ObjectID, value: StoredValue)] {
        var wanted: [UniqueValue: StoredValue] = [:]
        for value in values { if let hash = UniqueValue(value) { wanted[hash] = value } }
        var pairs: [(objectID: ObjectID, value: StoredValue)] = []
        let index = attribute.index
        for object in parent.insertedSet.union(parent.changedSet)
        where object.entity.name == entity.name && !object.deletedFlag && object.storage.valueCount > index {
            if let hash = UniqueValue(object.storage.value(at: index)), let value = wanted.removeValue(forKey: hash) {
                pairs.append((object.objectID, value))
            }
        }
        if !wanted.isEmpty { pairs += try parent.uniqueObjectIDs(of: entity, where: attribute, isIn: Array(wanted.values)) }
        return pairs
    }
}
