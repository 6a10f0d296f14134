import Foundation

/// A context's bookkeeping: the registry of its objects by ID, the one-to-many members
/// indexes built from it, the objects a reset let go of, the pending changes
/// (`PendingObjects`, itself the owner of the objects' pending slots), the keyed-insert
/// flag and the IDs its saves gave objects a child may still know by their temporary
/// ID. The only owner of these: the context and its collaborators change them through
/// the methods below, every other layer through the context's narrow methods
/// (`registeredObject(for:)`, `hasPendingChanges(_:)`, …).
///
/// A class, held by the context for its lifetime: its fields are separate properties, so
/// a loop over one (the pending list) may read another (the registry), as Swift's
/// exclusivity checks require of overlapping accesses. Used on the context's queue only.
final class ContextBookkeeping {
    /// The objects by permanent ID. Any change drops the members indexes (as any change
    /// of `temporaries` does).
    ///
    /// Release builds leave out the runtime exclusivity check of this and `pending` (one
    /// or two accesses an object registered, changed or saved; callgrind: about 80
    /// instructions each): no access overlaps another, as debug builds, the tests among
    /// them, still check.
    #if DEBUG
    private var objects: [ObjectID: ManagedObject] = [:]
    #else
    // Unsafe: a lookup or a change of the dictionary, calling out to nothing.
    @exclusivity(unchecked) private var objects: [ObjectID: ManagedObject] = [:]
    #endif
    /// The objects by temporary ID (inserts not saved yet), apart from `objects`: a save
    /// moves its inserts to their permanent IDs in `objects` and, when they are all the
    /// temporaries there are (as they are unless a save failed half-way), empties this
    /// table at once instead of removing each one (about 260 instructions an insert).
    #if DEBUG
    private var temporaries: [ObjectID: ManagedObject] = [:]
    #else
    // Unsafe: a lookup or a change of the dictionary, calling out to nothing.
    @exclusivity(unchecked) private var temporaries: [ObjectID: ManagedObject] = [:]
    #endif
    /// Whether `withRegistry(_:)` holds the registry (`objects` is empty meanwhile).
    ///
    /// This and `membersIndexes` are read at each registration (release builds leave out
    /// their runtime exclusivity check too: a flag, and a dictionary read or changed by a
    /// statement that calls out to nothing, a member index's `build` running apart).
    #if DEBUG
    private var registryMovedOut = false
    #else
    // Unsafe: a flag read or set; no access overlaps another.
    @exclusivity(unchecked) private var registryMovedOut = false
    #endif
    /// One-to-many members by owner, per destination entity and inverse relationship,
    /// valid while the context reference's `membershipGeneration` stays what it was when
    /// built.
    #if DEBUG
    private var membersIndexes: [MembersIndex.Key: MembersIndex] = [:]
    #else
    // Unsafe: looked up, emptied or given one index at a time, calling out to nothing.
    @exclusivity(unchecked) private var membersIndexes: [MembersIndex.Key: MembersIndex] = [:]
    #endif
    /// How many members indexes were built (for tests: one per change, not per owner).
    private(set) var membersIndexBuilds = 0
    /// The objects a `reset` let go of, released while the context's next statement runs
    /// on the server (their deallocation then costs no wall time), or at the next reset.
    private var retired: [ObjectID: ManagedObject]?
    /// The committed values a save's updates replaced, released like `retired` (or at the
    /// next save that replaces some).
    private var retiredValues: [AttributeValues] = []
    /// The objects with unsaved changes, each with the kinds it has (one list; see
    /// `PendingObjects`, which owns its fields).
    #if DEBUG
    var pending = PendingObjects()
    #else
    // Unsafe: `PendingObjects`' methods change the list in place; the one that takes a
    // closure (`removeAll(_:where:)`) is given one that reads objects, not the list.
    @exclusivity(unchecked) var pending = PendingObjects()
    #endif
    /// Set when the unique key of an object an import inserted was changed afterwards:
    /// until the next save, two such objects may share a key, so the save checks.
    private(set) var keyedInsertKeysChanged = false
    /// The permanent IDs this context's saves gave objects whose temporary IDs a child may
    /// still hold, by temporary ID: kept while children live.
    private var savedTemporaryIDs: [ObjectID: ObjectID] = [:]

    // MARK: - Registry

    /// The registered object with this ID, if any.
    @inline(__always)
    func object(for id: ObjectID) -> ManagedObject? { id.isTemporaryID ? temporaries[id] : objects[id] }

    /// How many objects are registered.
    var registeredCount: Int { objects.count + temporaries.count }

    /// How many registered objects have a temporary ID.
    var temporaryCount: Int { temporaries.count }

    /// The registered objects, in no particular order (a copy: changing the registry
    /// while walking it is safe).
    var registeredObjects: RegisteredObjects { [objects.values, temporaries.values].joined() }

    /// The registered objects as `registeredObjects` gives them.
    typealias RegisteredObjects = FlattenSequence<[Dictionary<ObjectID, ManagedObject>.Values]>

    /// Registers an object under an ID (replacing any other there).
    func register(_ object: ManagedObject, as id: ObjectID) {
        if id.isTemporaryID { temporaries[id] = object } else { objects[id] = object }
        dropMembersIndexes()
    }

    /// Removes the object registered under an ID.
    ///
    /// - Returns: the object that was there.
    @discardableResult
    func unregister(_ id: ObjectID) -> ManagedObject? {
        let removed = id.isTemporaryID ? temporaries.removeValue(forKey: id) : objects.removeValue(forKey: id)
        if removed != nil { dropMembersIndexes() }
        return removed
    }

    /// Moves an object from its temporary ID to its permanent one (a saved insert). With
    /// `keepingTemporary`, the temporary ID's entry stays until `dropTemporaries()`, which
    /// the caller calls once the last of them is moved (nothing may look them up in
    /// between).
    func rekey(_ object: ManagedObject, from old: ObjectID, to new: ObjectID, keepingTemporary: Bool) {
        if !keepingTemporary { temporaries.removeValue(forKey: old) }
        objects[new] = object
        dropMembersIndexes()
    }

    /// Forgets every object registered under a temporary ID at once: after a save moved
    /// them all to their permanent IDs (`rekey(_:from:to:keepingTemporary:)`).
    func dropTemporaries() {
        // (A small table keeps its room for the next inserts, as a removal one by one
        // would; a large one is let go.)
        temporaries.removeAll(keepingCapacity: temporaries.count <= 64)
        dropMembersIndexes()
    }

    /// Makes room for this many more objects with temporary IDs (inserts).
    func reserveTemporaries(adding count: Int) {
        guard count > 8 else { return }  // (as `reserveRegistry(adding:)`)
        temporaries.reserveCapacity(temporaries.count + count)
    }

    /// Makes room for this many more objects with permanent IDs.
    func reserveRegistry(adding count: Int) {
        // (Not for a few: `reserveCapacity` is not specialized for the key type, and costs
        // more than the inserts it would spare a rehash.)
        guard count > 8 else { return }
        objects.reserveCapacity(objects.count + count)
    }

    /// Runs `body` with the registry moved into a variable of its own, then moves it back.
    ///
    /// A loop that registers many objects works on the variable: every change of the
    /// stored property is an access the runtime checks (Swift's exclusivity check, which
    /// tracks an access held across the dictionary's call), and one access held over the
    /// whole loop would make any nested use of the property a trap. In the meantime the
    /// registry holds no object, so `body` must not use it (nor call this again).
    /// Registering only adds objects: the members indexes are dropped when the count
    /// changed, as any change of the registry drops them.
    func withRegistry<R>(_ body: (inout [ObjectID: ManagedObject]) throws -> R) rethrows -> R {
        assert(!registryMovedOut, "withRegistry is not reentrant")
        var registry: [ObjectID: ManagedObject] = [:]
        registryMovedOut = true
        swap(&registry, &objects)
        let count = registry.count
        defer {
            swap(&registry, &objects)
            registryMovedOut = false
            if objects.count != count { dropMembersIndexes() }
        }
        return try body(&registry)
    }

    /// An index changes with the registry: it holds objects, and must not keep those that
    /// left alive. (Moving the registry out and back is no change.)
    private func dropMembersIndexes() {
        if !registryMovedOut, !membersIndexes.isEmpty { membersIndexes.removeAll() }
    }

    /// The members index for a key, built by `build` when there is none of the current
    /// `generation` (read again after building: preparing objects' storage may move it).
    func membersIndex(
        _ key: MembersIndex.Key, generation: () -> Int, build: (RegisteredObjects) -> MembersIndex
    ) -> MembersIndex {
        if let index = membersIndexes[key], index.generation == generation() { return index }
        membersIndexBuilds += 1
        var index = build(registeredObjects)
        index.generation = generation()
        membersIndexes[key] = index
        return index
    }

    /// Forgets every registered object and pending change (a context's reset). The
    /// objects are kept as retired, to be released while the next statement runs, when
    /// `retiring` (and there are at most `keepBound` of them, whose room is then kept).
    func reset(retiring: Bool, keepBound: Int) {
        let keeps = objects.count <= keepBound
        retired = nil
        if retiring && keeps && !objects.isEmpty { retired = objects }
        objects.removeAll(keepingCapacity: keeps)
        if !temporaries.isEmpty { temporaries.removeAll() }
        pending.removeAll(keepingCapacity: keeps && pending.count <= keepBound)
        keyedInsertKeysChanged = false
    }

    /// Whether objects a reset let go of, or values a save replaced, are still held.
    var holdsRetired: Bool { retired != nil || !retiredValues.isEmpty }

    /// Releases the objects a reset let go of and the values a save replaced.
    func releaseRetired() {
        retired = nil
        if !retiredValues.isEmpty { retiredValues = [] }
    }

    /// Keeps the committed values a save replaced, to be released while the context's
    /// next statement runs (those kept before are released now).
    func retireValues(_ values: consuming [AttributeValues]) { retiredValues = values }

    // MARK: - Pending changes of one object (an undo)

    /// The kinds of pending change an object of this context has.
    func pendingMembership(of object: ManagedObject) -> PendingMembership {
        var membership = PendingMembership()
        for kind in [PendingMembership.inserted, .changed, .deleted] where PendingObjects.has(object, kind) {
            membership.insert(kind)
        }
        return membership
    }

    /// Gives an object of this context exactly these kinds of pending change.
    func setPendingMembership(of object: ManagedObject, to membership: PendingMembership) {
        for kind in [PendingMembership.inserted, .changed, .deleted] {
            if membership.contains(kind) {
                pending.insert(object, into: kind)
            } else {
                pending.remove(object, from: kind)
            }
        }
    }

    /// Registers an object that joins the context again (an undone delete of an insert,
    /// a redone insert): what another context's list left on it is cleared first.
    func reregister(_ object: ManagedObject, as id: ObjectID) {
        PendingObjects.clearStaleSlot(of: object)
        register(object, as: id)
    }

    /// Takes an object out of the registry and the pending list (an undone insert).
    func unregisterWithChanges(_ object: ManagedObject) {
        pending.remove(object)
        unregister(object.objectID)
    }

    // MARK: - Keyed inserts and saved IDs

    /// Notes that an imported object's unique key changed (the next save checks for
    /// twins).
    func noteKeyedInsertKeyChanged() { keyedInsertKeysChanged = true }

    /// Clears the note of changed keyed-insert keys.
    func clearKeyedInsertKeysChanged() { keyedInsertKeysChanged = false }

    /// The permanent ID a save gave the object of a temporary ID, if it noted one.
    func permanentID(forTemporary id: ObjectID) -> ObjectID? {
        savedTemporaryIDs.isEmpty ? nil : savedTemporaryIDs[id]
    }

    /// Notes the permanent ID a save gave an object of temporary ID.
    func noteSavedID(_ permanent: ObjectID, forTemporary temporary: ObjectID) {
        savedTemporaryIDs[temporary] = permanent
    }

    /// Forgets the noted IDs (no child can hold a temporary ID any more).
    func forgetSavedIDs() {
        if !savedTemporaryIDs.isEmpty { savedTemporaryIDs = [:] }
    }
}
