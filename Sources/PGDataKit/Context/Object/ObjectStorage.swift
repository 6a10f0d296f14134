import Foundation

/// One object's state: attribute values, to-one targets, committed values and keys,
/// version, change hints, flags, the keyed-insert mark, the row location and the extras
/// only some objects need. The only owner of these fields: every other file reads them
/// through the read-only properties and changes them through the methods below, which
/// keep the change hints right (a write the hints did not see makes them `unknown`).
///
/// What a change means beyond the object (a to-one or deletion change moves the
/// context's membership generation, the first change of a saved object tells the
/// context) is the caller's: `ManagedObject` does it around the calls that return it.
/// No method calls out of the storage, so none can reach the object's storage again
/// while it is being changed (which Swift's exclusivity checks would stop); a write's
/// `arena` closure reads another field of the object (its context reference).
///
/// The fields are ordered to fill padding (`ObjectFootprintTests`).
@usableFromInline
struct ObjectStorage {
    /// The attribute values (empty until prepared for the entity). Named only in this
    /// file (`.ci/check-layers`): others read them through `value(at:)`, `valueCount` and
    /// `withUnsafeValues(_:)`, and take a copy with `sharedValues()`, which tells the storage
    /// that its run is no longer its alone.
    @usableFromInline private(set) var runValues = AttributeValues()
    /// The to-one references (empty until prepared).
    private(set) var toOne: [RelatedReference] = []
    /// Committed attribute values; `nil` while the object was never saved or fetched.
    private(set) var snapshot: AttributeValues?
    /// Committed foreign keys of the to-one relationships.
    private(set) var snapshotKeys: [Int64?] = []
    /// The row version the snapshot was read at.
    private(set) var version: Int64 = 0
    /// Where an import's fetch read the row in the context's transaction: a packed
    /// `RowLocation`, `0` for none.
    private(set) var rowLocation: UInt64 = 0
    /// What only some objects need; `nil` for most (see `ObjectExtras`).
    private var extras: ObjectExtras?
    /// Which attributes differ from the snapshot, as far as `write(_:at:)` has seen.
    private(set) var changeHints = ChangeHints.unknown
    /// The keyed-insert attribute (`upsertAttributeIndex`), `-1` for none.
    private var keyedInsertIndex: Int32 = -1
    /// For a keyed insert: a row that exists after all is kept as stored.
    private(set) var upsertKeepsExisting = false
    /// Property reads record which property they were (`lastAccess`).
    private(set) var recordsAccess = false
    /// Deleted in this context and not saved yet.
    private(set) var deletedFlag = false
    /// The row turned out to be gone from the database.
    private(set) var isMissingFromStore = false
    /// No other `AttributeValues` refers to the run of `runValues` (its block may hold
    /// other runs): a write sets the value in place. Set when a write copied the run (or
    /// found its block held alone), cleared by everything that shares the run — a
    /// commit (the snapshot), a checkpoint, `sharedValues()` — or replaces it.
    private var valuesExclusive = false

    /// Empty storage, prepared for its entity on first use (`prepare(for:)`).
    @usableFromInline init() {}

    // MARK: - Reads

    /// The number of attribute values (0 until prepared).
    @inlinable var valueCount: Int { runValues.count }

    /// The value of attribute `slot`.
    ///
    /// - Precondition: `slot` is in `0..<valueCount` (a misuse: slots come from the model).
    @inlinable func value(at slot: Int) -> StoredValue { runValues[slot] }

    // Unsafe: the buffer handed out covers the values, valid for the call only.
    /// Hands the values to `body` as a buffer, valid only inside it (many values read
    /// without a check each, nothing copied). `mutating` though it changes nothing, as
    /// the change facts below are: called on an object's storage, a non-mutating method
    /// is handed a copy of the whole storage (callgrind: ~250 instructions a call).
    @inlinable
    mutating func withUnsafeValues<R>(_ body: (UnsafeBufferPointer<StoredValue>) throws -> R) rethrows -> R {
        // Unsafe: `AttributeValues` hands out exactly its run, valid for the call.
        try runValues.withUnsafeBufferPointer(body)
    }

    /// A copy of the values to keep (a state handed to a child, a statement's values):
    /// from now on the storage copies its run before the next write, so the copy never
    /// sees one.
    mutating func sharedValues() -> AttributeValues {
        valuesExclusive = false
        return runValues
    }

    /// For an object inserted by an import: the index of the unique attribute its insert
    /// is keyed on (`INSERT … ON CONFLICT (that attribute)`).
    var upsertAttributeIndex: Int? { keyedInsertIndex < 0 ? nil : Int(keyedInsertIndex) }

    /// Whether the extras were ever allocated (a footprint check).
    var hasExtras: Bool { extras != nil }

    /// The primary key a to-one reference points at, if the destination is saved.
    @inline(__always)
    func referencedKey(at index: Int) -> Int64? {
        switch toOne[index] {
        case .none: return nil
        case .key(let key): return key
        case .object(let object): return object.objectID.primaryKey
        }
    }

    /// Whether the storage holds a value per attribute and a reference per relationship.
    @inline(__always)
    func isPrepared(for entity: EntityDescription) -> Bool {
        runValues.count == entity.defaultValues.count && toOne.count == entity.relationships.count
    }

    // MARK: - Writes

    /// What `write(_:at:)` did.
    enum WriteEffect {
        /// Nothing: the storage is not prepared (no value at the slot); prepare it and
        /// write again.
        case unprepared
        /// The value was already there: nothing changed.
        case unchanged
        /// The first change since the snapshot: the context has to hear of it.
        case firstChange
        /// A change after one the context already heard of.
        case changedAgain
        /// Written without tracking: the object was never saved nor fetched.
        case untracked
    }

    /// Makes the storage hold a value per attribute (the entity's defaults) and a
    /// reference per relationship (none), keeping what is there when it already does.
    /// Returns whether the to-one references were made.
    @discardableResult
    mutating func prepare(for entity: EntityDescription) -> Bool {
        if runValues.count != entity.defaultValues.count {
            setValues(entity.defaultValueRun)
            changeHints = .unknown
        }
        guard toOne.count != entity.relationships.count else { return false }
        toOne = Array(repeating: .none, count: entity.relationships.count)
        return true
    }

    /// Sets attribute `slot`, keeping the change hints (in one access to the storage,
    /// the setters' path: what the object does next is in the result). The first write
    /// after the run was shared copies it into `arena` (an allocation of its own without
    /// one); `arena` is asked for only then (the setter's object reads it from its context
    /// reference, a field other than the storage, not retained at every write).
    @inline(__always)
    mutating func write(_ value: consuming StoredValue, at slot: Int, arena: @autoclosure () -> ValueArena? = nil) -> WriteResult {
        WriteResult(
            effect: slot < runValues.count ? writePrepared(consume value, at: slot, arena: arena) : .unprepared,
            isKey: slot == keyedInsertIndex, isMissingFromStore: isMissingFromStore)
    }

    /// What a setter's write did, and what it needs to know of the object.
    struct WriteResult {
        let effect: WriteEffect
        /// The slot is the keyed insert's key (`upsertAttributeIndex`).
        let isKey: Bool
        /// The object's row is gone (the write is not saved).
        let isMissingFromStore: Bool
    }

    @inline(__always)
    private mutating func writePrepared(_ value: consuming StoredValue, at slot: Int, arena: () -> ValueArena?) -> WriteEffect {
        guard snapshot != nil else {
            writeValue(consume value, at: slot, arena: arena)
            changeHints = .unknown
            return .untracked
        }
        // Unsafe: the buffer is read only inside the closure, and only at a `slot` checked
        // against its indices (a bad slot then stops at the bounds-checked write below).
        let unchanged = runValues.withUnsafeBufferPointer { current in
            current.indices.contains(slot) && current[slot] == value
        }
        if unchanged { return .unchanged }
        // An attribute set earlier since the snapshot (and still known to be) means the
        // context was told then.
        let reported = changeHints.isKnown && changeHints.maybe != 0
        let hints = changeHints.changing(slot)
        writeValue(consume value, at: slot, arena: arena)
        changeHints = hints
        return reported ? .changedAgain : .firstChange
    }

    /// Sets attribute `slot` of a prepared storage: in place when the run is the
    /// storage's alone, after copying it (into `arena`, or a block of its own) otherwise.
    @inline(__always)
    private mutating func writeValue(_ value: consuming StoredValue, at slot: Int, arena: () -> ValueArena?) {
        if !valuesExclusive {
            if !runValues.holdsBlockAlone() { runValues = arena()?.copy(runValues) ?? runValues.copiedAlone() }
            valuesExclusive = true
        }
        runValues.setHeldAlone(consume value, at: slot)
    }

    /// Makes `newValues` the values: a run others may share.
    private mutating func setValues(_ newValues: consuming AttributeValues) {
        runValues = consume newValues
        valuesExclusive = false
    }

    /// Sets attribute `slot` without change tracking or comparison (a new object's
    /// key, a value restored by an undo). The caller prepared the storage.
    mutating func initialize(_ value: StoredValue, at slot: Int, arena: @autoclosure () -> ValueArena? = nil) {
        writeValue(value, at: slot, arena: arena)
        changeHints = .unknown
    }

    /// Replaces every attribute value (the hints forget what they knew).
    mutating func replaceValues(_ newValues: AttributeValues) {
        setValues(newValues)
        changeHints = .unknown
    }

    /// Replaces every attribute value with an array's (in a block of their own).
    mutating func replaceValues(_ newValues: [StoredValue]) {
        replaceValues(AttributeValues(newValues))
    }

    /// Sets a to-one reference. The caller moves the membership generation.
    mutating func setReference(_ reference: RelatedReference, at index: Int) {
        toOne[index] = reference
    }

    /// Replaces every to-one reference. The caller moves the membership generation.
    mutating func replaceReferences(_ references: [RelatedReference]) {
        toOne = references
    }

    /// Marks the object deleted or not. The caller moves the membership generation.
    mutating func setDeleted(_ deleted: Bool) { deletedFlag = deleted }

    /// Marks the object's row as gone from the database (or found again).
    mutating func setMissingFromStore(_ missing: Bool) { isMissingFromStore = missing }

    /// Marks the object as a keyed insert of `attribute` (`nil`: a plain insert).
    mutating func markKeyedInsert(attribute: Int?, keepsExisting: Bool) {
        keyedInsertIndex = attribute.flatMap { Int32(exactly: $0) } ?? -1
        upsertKeepsExisting = attribute == nil ? false : keepsExisting
    }

    /// Turns access recording on or off.
    mutating func setRecordsAccess(_ records: Bool) { recordsAccess = records }

    /// Sets the row version read or written.
    mutating func setVersion(_ newVersion: Int64) { version = newVersion }

    /// Sets the packed row location (`0` for none).
    mutating func setRowLocation(_ location: UInt64) { rowLocation = location }

    // MARK: - Snapshots

    /// A fetched row: its values become both the current and the committed ones.
    mutating func applyFetched(version newVersion: Int64, values newValues: consuming AttributeValues) {
        version = newVersion
        snapshot = newValues
        setValues(consume newValues)
        changeHints = .clean
    }

    /// `commitSaved(_:version:)`, the replaced committed values appended to `replaced`
    /// rather than released here.
    mutating func commitSaved(_ entity: EntityDescription, version newVersion: Int64, replaced: inout [AttributeValues]) {
        if let snapshot { replaced.append(snapshot) }
        commitSaved(entity, version: newVersion)
    }

    /// After a save wrote the row at `version`: `commit(_:)`, and no keyed insert any
    /// more. The caller prepared the storage.
    mutating func commitSaved(_ entity: EntityDescription, version newVersion: Int64) {
        version = newVersion
        keyedInsertIndex = -1
        upsertKeepsExisting = false
        commit(entity)
    }

    /// Makes the current values the committed ones (after a save or a fetch). The caller
    /// prepared the storage.
    mutating func commit(_ entity: EntityDescription) {
        snapshot = sharedValues()
        changeHints = .clean
        if entity.relationships.isEmpty {
            if !snapshotKeys.isEmpty { snapshotKeys = [] }
        } else {
            snapshotKeys = entity.relationships.map { $0.columnName == nil ? nil : referencedKey(at: $0.index) }
        }
        extras?.snapshotTemporaryTargets = nil
    }

    /// Replaces the committed values (and, when given, the committed keys) without
    /// touching the current ones: a parent's state under a child's object, a conflict's
    /// stored row.
    mutating func replaceSnapshot(_ newSnapshot: AttributeValues?, keys: [Int64?]? = nil) {
        snapshot = newSnapshot
        changeHints = .unknown
        if let keys { snapshotKeys = keys }
    }

    /// Records that the values equal the committed ones (the caller made them so).
    mutating func markClean() { changeHints = .clean }

    /// Replaces the committed foreign keys.
    mutating func replaceCommittedKeys(_ keys: [Int64?]) { snapshotKeys = keys }

    /// The state an undo puts back (see `restore(_:)`): an import's (values and
    /// references), or an undo manager's (those, the many-to-many changes and the
    /// deletion mark). Copying it copies no array: they are shared until written.
    struct Checkpoint {
        let values: AttributeValues
        let toOne: [RelatedReference]
        /// Per many-to-many relationship with changes, the members added and removed
        /// (not the stored sets: a load meanwhile stays); `nil` when not taken.
        let joinChanges: [Int: (added: [ObjectIdentifier: ManagedObject], removed: [ObjectIdentifier: ManagedObject])]?
        /// The deletion mark; `nil` when not taken.
        let deleted: Bool?
    }

    /// What `restore(_:)` needs to undo later writes of values and references (and,
    /// `complete`, of many-to-many sets and the deletion mark).
    mutating func checkpoint(complete: Bool = false) -> Checkpoint {
        let values = sharedValues()
        guard complete else { return Checkpoint(values: values, toOne: toOne, joinChanges: nil, deleted: nil) }
        var joins: [Int: (added: [ObjectIdentifier: ManagedObject], removed: [ObjectIdentifier: ManagedObject])] = [:]
        for (index, members) in extras?.joinMembers ?? [:] where members.hasChanges {
            joins[index] = (members.added, members.removed)
        }
        return Checkpoint(values: values, toOne: toOne, joinChanges: joins, deleted: deletedFlag)
    }

    /// Puts back what a checkpoint holds. The caller moves the membership generation.
    mutating func restore(_ checkpoint: Checkpoint) {
        setValues(checkpoint.values)
        toOne = checkpoint.toOne
        changeHints = .unknown
        if let deleted = checkpoint.deleted { deletedFlag = deleted }
        guard let joins = checkpoint.joinChanges else { return }
        if let extras {
            for index in Array(extras.joinMembers.keys) where joins[index] == nil {
                extras.joinMembers[index]?.added = [:]
                extras.joinMembers[index]?.removed = [:]
            }
        }
        guard !joins.isEmpty else { return }
        let extras = extrasForWriting()
        for (index, changes) in joins {
            extras.joinMembers[index, default: JoinMembers()].added = changes.added
            extras.joinMembers[index, default: JoinMembers()].removed = changes.removed
        }
    }

    /// Takes another storage's stored row: its values, references, committed state and
    /// version (a keyed insert merged into the object already registered for its row).
    /// The other storage shares its values from then on.
    mutating func adoptStoredRow(of other: inout ObjectStorage) {
        setValues(other.sharedValues())
        toOne = other.toOne
        snapshot = other.snapshot
        snapshotKeys = other.snapshotKeys
        version = other.version
        changeHints = .unknown
        keyedInsertIndex = -1
        upsertKeepsExisting = false
    }

    // MARK: - Change facts (the storage prepared for `entity`)
    //
    // (`mutating` though they change nothing: called on an object's storage, a mutating
    // method works on it in place, where a non-mutating one is handed a copy — every
    // array of the storage retained and released — as a class's stored struct is read
    // out before the call. Saves ask these of every changed object.)

    /// Whether any attribute differs from its committed value (stops at the first).
    @inline(__always)
    mutating func hasChangedAttributes(_ entity: EntityDescription) -> Bool {
        guard let snapshot else { return !runValues.isEmpty }
        let attributes = entity.attributes
        if let (certain, maybe) = changeHints.masks(count: attributes.count) {
            if certain != 0 { return true }
            for index in attributes.indices where maybe & (1 << index) != 0 {
                if snapshot[index] != runValues[index] { return true }
            }
            return false
        }
        for index in attributes.indices where snapshot[index] != runValues[index] { return true }
        return false
    }

    /// The changed attributes as a bit mask (bit `i` for attribute `i`), for an entity of
    /// at most 64 attributes.
    @inline(__always)
    mutating func changedAttributeMask(_ entity: EntityDescription) -> UInt64 {
        let attributes = entity.attributes
        guard let snapshot else { return attributes.count == 64 ? .max : (1 << UInt64(attributes.count)) - 1 }
        let hints = changeHints.masks(count: attributes.count)
        // Unsafe: both are read inside the closures only, and hold one value per attribute:
        // `values` as prepared, a snapshot as committed `values` or a decoded row.
        return snapshot.withUnsafeBufferPointer { old in
            runValues.withUnsafeBufferPointer { new -> UInt64 in
                guard let old = old.baseAddress, let new = new.baseAddress else { return 0 }
                var mask: UInt64 = 0
                // Only the attributes set since the snapshot can differ; those set once
                // from their committed value do.
                let (certain, candidates) = hints.map { ($0.certain, $0.maybe & ~$0.certain) } ?? (0, .max)
                for index in attributes.indices where candidates & (1 << UInt64(index)) != 0 {
                    if old[index] != new[index] { mask |= 1 << UInt64(index) }
                }
                return mask | certain
            }
        }
    }

    /// The attributes that differ from their committed values, by index.
    @inline(__always)
    mutating func changedAttributeIndexes(_ entity: EntityDescription) -> [Int] {
        guard let snapshot else { return Array(entity.attributes.indices) }
        let attributes = entity.attributes
        var changed: [Int] = []
        changed.reserveCapacity(attributes.count)
        let hints = changeHints.masks(count: attributes.count)
        // Unsafe: both are read inside the closures only, and hold one value per attribute:
        // `values` as prepared, a snapshot as committed `values` or a decoded row.
        snapshot.withUnsafeBufferPointer { old in
            runValues.withUnsafeBufferPointer { new in
                guard let old = old.baseAddress, let new = new.baseAddress else { return }
                if let (certain, maybe) = hints {
                    // Only the attributes set since the snapshot can differ; those set once
                    // from their committed value do.
                    for index in attributes.indices where maybe & (1 << index) != 0 {
                        if certain & (1 << index) != 0 || old[index] != new[index] {
                            changed.append(index)
                        }
                    }
                    return
                }
                for index in attributes.indices where old[index] != new[index] {
                    changed.append(index)
                }
            }
        }
        return changed
    }

    // MARK: - Extras

    /// The object's extras, allocated on first use.
    private mutating func extrasForWriting() -> ObjectExtras {
        if let extras { return extras }
        let made = ObjectExtras()
        extras = made
        return made
    }

    /// In a child context: the to-one references, by relationship index, that pointed at
    /// objects of temporary ID (unsaved inserts of the parent) when the child read the
    /// object — committed references `snapshotKeys` cannot hold. `nil` elsewhere.
    var snapshotTemporaryTargets: [Int: ObjectID]? { extras?.snapshotTemporaryTargets }

    /// Sets `snapshotTemporaryTargets` (clearing allocates nothing).
    mutating func setSnapshotTemporaryTargets(_ targets: [Int: ObjectID]?) {
        if targets == nil && extras == nil { return }
        extrasForWriting().snapshotTemporaryTargets = targets
    }

    /// The to-many relationships (by index) whose members were read from the store.
    var loadedToMany: Set<Int> { extras?.loadedToMany ?? [] }

    /// Whether relationship `index`'s members were read from the store.
    func isLoaded(_ index: Int) -> Bool { extras?.loadedToMany.contains(index) ?? false }

    /// Marks relationship `index`'s members as read from the store, or not.
    mutating func setLoaded(_ index: Int, _ loaded: Bool) {
        if loaded {
            extrasForWriting().loadedToMany.insert(index)
        } else if let extras {
            extras.loadedToMany.remove(index)
        }
    }

    /// Forgets which to-many relationships were read.
    mutating func forgetLoaded() {
        if let extras, !extras.loadedToMany.isEmpty { extras.loadedToMany = [] }
    }

    /// Forgets every many-to-many relationship's members.
    mutating func forgetJoinMembers() {
        if let extras, !extras.joinMembers.isEmpty { extras.joinMembers = [:] }
    }

    /// Many-to-many members by relationship index (see `JoinMembers`).
    var joinMembers: [Int: JoinMembers] { extras?.joinMembers ?? [:] }

    /// The members of many-to-many relationship `index`, if any were recorded.
    func joinMembers(at index: Int) -> JoinMembers? { extras?.joinMembers[index] }

    /// Sets (or with `nil` removes) the members of many-to-many relationship `index`.
    mutating func setJoinMembers(_ members: JoinMembers?, at index: Int) {
        if members == nil && extras == nil { return }
        extrasForWriting().joinMembers[index] = members
    }

    /// Changes the members of many-to-many relationship `index` in place (from empty
    /// members when none were recorded).
    @discardableResult
    mutating func updateJoinMembers<Result>(at index: Int, _ body: (inout JoinMembers) throws -> Result) rethrows -> Result {
        let extras = extrasForWriting()
        return try body(&extras.joinMembers[index, default: JoinMembers()])
    }

    /// Changes the recorded members of many-to-many relationship `index` in place, if
    /// there are any (`nil` and no allocation otherwise).
    @discardableResult
    mutating func updateJoinMember<Result>(at index: Int, _ body: (inout JoinMembers) throws -> Result) rethrows -> Result? {
        guard let extras, extras.joinMembers[index] != nil else { return nil }
        // (The default is never used: the members are there.)
        return try body(&extras.joinMembers[index, default: JoinMembers()])
    }

    /// The last JSON value too deep to keep that a typed property was set to (see
    /// `ManagedObject.setStoredJSONValue(_:at:)`), held so that it is taken apart, not
    /// released recursively.
    var jsonKeeper: JSONValue.Keeper? { extras?.jsonKeeper }

    /// The keeper of too deep JSON values, made on first use.
    mutating func makeJSONKeeper() -> JSONValue.Keeper {
        let extras = extrasForWriting()
        if let keeper = extras.jsonKeeper { return keeper }
        let keeper = JSONValue.Keeper()
        extras.jsonKeeper = keeper
        return keeper
    }

    /// When property reads record which property they were (`recordsAccess`), the last
    /// one read: an attribute or relationship, by index.
    var lastAccess: (isAttribute: Bool, index: Int)? { extras?.lastAccess }

    /// Records (or clears) the last property read.
    mutating func setLastAccess(_ access: (isAttribute: Bool, index: Int)?) {
        if access == nil && extras == nil { return }
        extrasForWriting().lastAccess = access
    }
}

/// An object's state as an undo puts it back (`ObjectStorage.Checkpoint`): kept by an
/// undo manager, made and restored only through `ObjectStorage` and `ManagedObject`.
typealias ObjectCheckpoint = ObjectStorage.Checkpoint

/// What only some objects need, kept out of line: a fetched or imported object of an
/// entity without to-many relationships never allocates it, so it stays small (one
/// word instead of five fields) and is quick to free. Read and written only through
/// `ObjectStorage`.
private final class ObjectExtras {
    var snapshotTemporaryTargets: [Int: ObjectID]?
    var loadedToMany: Set<Int> = []
    var joinMembers: [Int: JoinMembers] = [:]
    var jsonKeeper: JSONValue.Keeper?
    var lastAccess: (isAttribute: Bool, index: Int)?
}

/// What an object knows about which of its attributes differ from its snapshot, so a
/// save need not compare every attribute of every changed object: set when the values
/// and the snapshot are made equal (fetch, save), kept up to date by
/// `setStoredValue(_:at:)`, and forgotten (`unknown`) by any other write. Attributes
/// past the 64th are always compared.
struct ChangeHints {
    /// Nothing known: compare every attribute.
    static let unknown = ChangeHints(isKnown: false, maybe: 0, certain: 0)
    /// The values are the snapshot.
    static let clean = ChangeHints(isKnown: true, maybe: 0, certain: 0)

    /// Attributes set since the snapshot (the others equal it).
    let maybe: UInt64
    /// Attributes set exactly once since the snapshot, to a value other than the
    /// committed one: they differ for sure.
    let certain: UInt64
    /// Whether the masks say anything. (Last: the storage's small fields fill the rest
    /// of its word.)
    let isKnown: Bool

    init(isKnown: Bool, maybe: UInt64, certain: UInt64) {
        self.maybe = maybe
        self.certain = certain
        self.isKnown = isKnown
    }

    /// The masks, when they describe every attribute of an entity with `count` of them.
    @inline(__always)
    func masks(count: Int) -> (certain: UInt64, maybe: UInt64)? {
        isKnown && count <= 64 ? (certain, maybe) : nil
    }

    /// The hints after attribute `slot` is set to a value other than its current one.
    @inline(__always)
    func changing(_ slot: Int) -> ChangeHints {
        guard isKnown, slot < 64 else { return .unknown }
        let bit: UInt64 = 1 << UInt64(slot)
        // Untouched until now: it held the committed value, so the new one differs. Set
        // again: it may be back at the committed value.
        let certain = maybe & bit == 0 ? self.certain | bit : self.certain & ~bit
        return ChangeHints(isKnown: true, maybe: maybe | bit, certain: certain)
    }
}
