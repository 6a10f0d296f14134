import Foundation

/// What only some objects need, kept out of line: a fetched or imported object of an
/// entity without to-many relationships never allocates it, so it stays small (one
/// word here instead of six fields) and is quick to free.
///
/// `ManagedObject` reads these through properties of the same names; a read of an object
/// without extras sees the defaults, the first write allocates them.
final class ObjectExtras {
    /// See `ManagedObject.snapshotTemporaryTargets`.
    var snapshotTemporaryTargets: [Int: ObjectID]?
    /// See `ManagedObject.loadedToMany`.
    var loadedToMany: Set<Int> = []
    /// See `ManagedObject.joinMembers`.
    var joinMembers: [Int: JoinMembers] = [:]
    /// See `ManagedObject.jsonKeeper`.
    var jsonKeeper: JSONValue.Keeper?
    /// See `ManagedObject.lastAccess`.
    var lastAccess: (isAttribute: Bool, index: Int)?
}

extension ManagedObject {
    /// The object's extras, allocated on first use.
    var extrasForWriting: ObjectExtras {
        if let extras { return extras }
        let made = ObjectExtras()
        extras = made
        return made
    }

    /// In a child context: the to-one references, by relationship index, that pointed at
    /// objects of temporary ID (unsaved inserts of the parent) when the child read the
    /// object — committed references `snapshotKeys` cannot hold. `nil` elsewhere.
    var snapshotTemporaryTargets: [Int: ObjectID]? {
        get { extras?.snapshotTemporaryTargets }
        set {
            if newValue == nil && extras == nil { return }
            extrasForWriting.snapshotTemporaryTargets = newValue
        }
    }

    /// The to-many relationships (by index) whose members were read from the store.
    var loadedToMany: Set<Int> {
        get { extras?.loadedToMany ?? [] }
        _modify {
            let extras = extrasForWriting
            yield &extras.loadedToMany
        }
    }

    /// Many-to-many members by relationship index (see `JoinMembers`).
    var joinMembers: [Int: JoinMembers] {
        get { extras?.joinMembers ?? [:] }
        _modify {
            let extras = extrasForWriting
            yield &extras.joinMembers
        }
    }

    /// The last JSON value too deep to keep that a typed property was set to (see
    /// `setStoredJSONValue(_:at:)`), held so that it is taken apart, not released
    /// recursively.
    var jsonKeeper: JSONValue.Keeper? {
        get { extras?.jsonKeeper }
        set { extrasForWriting.jsonKeeper = newValue }
    }

    /// When property reads record which property they were (`recordsAccess`), the last
    /// one read: an attribute or relationship, by index.
    var lastAccess: (isAttribute: Bool, index: Int)? {
        get { extras?.lastAccess }
        set { extrasForWriting.lastAccess = newValue }
    }
}
