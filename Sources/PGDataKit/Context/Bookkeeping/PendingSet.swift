import Foundation

/// Which kinds of unsaved change an object has in its context, kept on the object.
struct PendingMembership: OptionSet {
    let rawValue: UInt8

    /// Inserted and not saved yet.
    static let inserted = PendingMembership(rawValue: 1 << 0)
    /// Changed since the last save (may have reverted since).
    static let changed = PendingMembership(rawValue: 1 << 1)
    /// Deleted and not saved yet.
    static let deleted = PendingMembership(rawValue: 1 << 2)
}

/// An object's kinds of unsaved change and its place in its context's pending list, kept
/// on the object (`ManagedObject.pendingSlot`) and written only by `PendingObjects`
/// (its fields are `fileprivate(set)` to this file).
struct PendingSlot {
    /// Where the object is in the list while it has unsaved changes.
    fileprivate(set) var position: Int32 = 0
    /// Which kinds of unsaved change the object has in its context.
    fileprivate(set) var membership = PendingMembership()
}

/// The context's objects with unsaved changes, in one list: each object is listed once
/// whatever kinds of change it has, and carries its kinds and its place in the list
/// itself (`PendingSlot`).
///
/// So asking whether an object is inserted reads one byte, and adding or removing one is
/// an append or a swap with the last element — no hashing, no second retain, one
/// allocation for the whole list. The context reads each kind through a `PendingSet`
/// view (`insertedSet`, `changedSet`, `deletedSet`).
///
/// An object belongs to one context: its membership describes that context's list.
/// Every way an object leaves a living context takes it out of the list (`remove`,
/// `removeAll`); an object left in a deallocated context's list keeps its membership,
/// which inserting it into another context clears (`clearStaleSlot(of:)`).
struct PendingObjects {
    private(set) var list: [ManagedObject] = []
    private var counts = (inserted: 0, changed: 0, deleted: 0)

    /// How many objects have any unsaved change.
    var count: Int { list.count }

    /// Whether an object has this kind of change in its context (one byte read on the
    /// object; static, so no copy of a context's list is made to ask).
    @inline(__always)
    static func has(_ object: ManagedObject, _ kind: PendingMembership) -> Bool {
        object.pendingSlot.membership.contains(kind)
    }

    /// Clears what the list of a context that went away left on an object now joining
    /// another context.
    static func clearStaleSlot(of object: ManagedObject) {
        object.pendingSlot.membership = []
    }

    /// How many objects have this kind of change.
    func count(of kind: PendingMembership) -> Int {
        switch kind {
        case .inserted: counts.inserted
        case .changed: counts.changed
        default: counts.deleted
        }
    }

    private mutating func adjustCount(of kind: PendingMembership, by delta: Int) {
        switch kind {
        case .inserted: counts.inserted += delta
        case .changed: counts.changed += delta
        default: counts.deleted += delta
        }
    }

    /// Gives an object this kind of change.
    ///
    /// - Returns: whether it did not have it before.
    @discardableResult
    mutating func insert(_ object: ManagedObject, into kind: PendingMembership) -> Bool {
        if object.pendingSlot.membership.contains(kind) { return false }
        if object.pendingSlot.membership.isEmpty {
            object.pendingSlot.position = Int32(truncatingIfNeeded: list.count)
            list.append(object)
        }
        object.pendingSlot.membership.insert(kind)
        adjustCount(of: kind, by: 1)
        return true
    }

    /// Takes this kind of change from an object; an object left with none leaves the list.
    ///
    /// - Returns: the object when it had that kind of change, else `nil`.
    @discardableResult
    mutating func remove(_ object: ManagedObject, from kind: PendingMembership) -> ManagedObject? {
        guard object.pendingSlot.membership.contains(kind) else { return nil }
        object.pendingSlot.membership.remove(kind)
        adjustCount(of: kind, by: -1)
        if object.pendingSlot.membership.isEmpty { unlist(object) }
        return object
    }

    /// Takes `object` out of the list: the last object moves to its place. (Positions are
    /// 32-bit: two billion pending objects would need hundreds of gigabytes first. An
    /// object not where its position says is a bug of this type, not a caller's misuse —
    /// only objects of this context reach here, and inserting clears what another left:
    /// it stops the process rather than corrupt the list.)
    private mutating func unlist(_ object: ManagedObject) {
        let position = Int(object.pendingSlot.position)
        guard list.indices.contains(position), list[position] === object else {
            preconditionFailure("a pending object is not where it says it is in its context's list")
        }
        let last = list.removeLast()
        if position < list.count {
            list[position] = last
            last.pendingSlot.position = Int32(truncatingIfNeeded: position)
        }
    }

    /// Takes every kind of change from an object (it leaves the list).
    mutating func remove(_ object: ManagedObject) {
        for kind in [PendingMembership.inserted, .changed, .deleted] where object.pendingSlot.membership.contains(kind) {
            adjustCount(of: kind, by: -1)
        }
        if object.pendingSlot.membership.isEmpty { return }
        object.pendingSlot.membership = []
        unlist(object)
    }

    /// Takes this kind of change from every object that has it and for which `leaves`
    /// is true (every one when `leaves` is `nil`), in one pass.
    mutating func removeAll(_ kind: PendingMembership, where leaves: ((ManagedObject) -> Bool)? = nil) {
        guard count(of: kind) > 0 else { return }
        var kept = 0
        var removed = 0
        for position in list.indices {
            let object = list[position]
            if object.pendingSlot.membership.contains(kind), leaves?(object) ?? true {
                object.pendingSlot.membership.remove(kind)
                removed += 1
            }
            if object.pendingSlot.membership.isEmpty { continue }
            object.pendingSlot.position = Int32(truncatingIfNeeded: kept)
            if kept != position { list[kept] = object }
            kept += 1
        }
        list.removeSubrange(kept...)
        if kept == 0 { list = [] }
        adjustCount(of: kind, by: -removed)
    }

    /// Forgets every object's unsaved changes.
    mutating func removeAll(keepingCapacity: Bool) {
        for object in list { object.pendingSlot.membership = [] }
        list.removeAll(keepingCapacity: keepingCapacity)
        counts = (0, 0, 0)
    }

    /// Makes room for this many more objects.
    mutating func reserveCapacity(adding count: Int) {
        list.reserveCapacity(list.count + count)
    }

    /// One kind of change, as a set of objects.
    func view(_ kind: PendingMembership) -> PendingSet {
        PendingSet(list: list, kind: kind, count: count(of: kind))
    }

    /// Every pending object with its kinds of change, in one walk of the list (as it was
    /// when taken: a loop over it may change the pending changes).
    var entries: PendingEntries { PendingEntries(list: list) }
}

/// The pending objects with their kinds of change (`PendingObjects.entries`), in list
/// order; an object with no change left when reached is skipped.
struct PendingEntries: Sequence {
    fileprivate let list: [ManagedObject]

    /// Walks the objects in list order.
    struct Iterator: IteratorProtocol {
        fileprivate let list: [ManagedObject]
        fileprivate var position = 0

        mutating func next() -> (object: ManagedObject, membership: PendingMembership)? {
            while position < list.count {
                let object = list[position]
                position += 1
                let membership = object.pendingSlot.membership
                if !membership.isEmpty { return (object, membership) }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(list: list) }
}

/// The objects with one kind of unsaved change (a context's `insertedSet`, `changedSet`
/// or `deletedSet`): a read-only view of `PendingObjects`.
///
/// `contains` reads the object's own membership (it answers for the object's context).
/// Iteration walks the list as it was when the view was taken, in the order objects
/// joined it (a removal moves the last object into the gap), and skips objects that no
/// longer have the kind of change when reached: a loop that takes other objects out
/// does not visit them.
struct PendingSet: ObjectMembership {
    fileprivate let list: [ManagedObject]
    /// Which kind of change (`.inserted`, `.changed` or `.deleted`).
    let kind: PendingMembership
    /// How many objects have it (when the view was taken).
    let count: Int

    /// Whether no object has this kind of change.
    var isEmpty: Bool { count == 0 }

    /// Whether `object` has this kind of change.
    @inline(__always)
    func contains(_ object: ManagedObject) -> Bool { object.pendingSlot.membership.contains(kind) }

    /// The first member in list order, if any.
    var first: ManagedObject? { first { _ in true } }

    /// The members of both sets.
    func union(_ other: PendingSet) -> Set<ManagedObject> {
        var union = Set(self)
        union.formUnion(other)
        return union
    }

    /// Walks the members in list order.
    struct Iterator: IteratorProtocol {
        fileprivate let list: [ManagedObject]
        fileprivate let kind: PendingMembership
        fileprivate var position = 0

        mutating func next() -> ManagedObject? {
            while position < list.count {
                let object = list[position]
                position += 1
                if object.pendingSlot.membership.contains(kind) { return object }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(list: list, kind: kind) }

    // (0: members that leave after the view was taken are skipped, so `count` may be
    // more than an iteration yields.)
    var underestimatedCount: Int { 0 }
}

/// One kind of pending change as the save reads it: a context's `PendingSet`, or a plain
/// set (as tests build them).
protocol ObjectMembership: Sequence<ManagedObject> {
    /// Whether `object` is a member.
    func contains(_ object: ManagedObject) -> Bool
    /// Whether there are no members.
    var isEmpty: Bool { get }
    /// How many members there are (for reserving room; a `PendingSet` counts them when
    /// the view is taken).
    var count: Int { get }
}

extension Set<ManagedObject>: ObjectMembership {}
