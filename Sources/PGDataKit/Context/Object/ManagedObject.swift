import Foundation
import Logging
import Synchronization

/// A reference from a to-one relationship to its destination.
enum RelatedReference {
    /// No related object.
    case none
    /// The destination's primary key, not loaded yet.
    case key(Int64)
    /// The destination object.
    case object(ManagedObject)
}

/// The base class of every entity: a row of a table, with change tracking.
///
/// Subclass it and declare properties with `@Attribute` and `@Relationship`; override
/// the class properties to change names. Objects belong to one context and are used on
/// its queue only (checked in debug builds); pass `objectID` to other contexts.
///
/// For example:
///
/// ```swift
/// final class User: ManagedObject {
///     override class var tableName: String { "users" }
///     @Attribute(unique: true) var userID: String = ""
///     @Attribute var name: String?
///     @Attribute var age: Int?
///     @Relationship(inverse: "user", deleteRule: .cascade) var posts: Set<Post>
/// }
///
/// try context.performAndWait {
///     let user = User(context: context)
///     user.userID = "u1"
///     try context.save()
/// }
/// ```
open class ManagedObject: EntityObject, Hashable, CustomStringConvertible {
    /// The entity name; the class name unless overridden.
    open class var entityName: String { String(describing: self) }
    /// The table; snake_case of the entity name unless overridden. A table (plain,
    /// partitioned or with inheritance children), not a view: saves find rows by their
    /// `ctid`, which views do not have.
    open class var tableName: String { Naming.snakeCase(entityName) }
    /// The primary-key column, a `bigint` with a sequence (identity or `bigserial`);
    /// `id` unless overridden.
    open class var primaryKeyColumn: String { "id" }
    /// The optimistic-locking version column, a `bigint`; `version` unless overridden.
    open class var versionColumn: String { "version" }
    /// Unique keys of several attributes, such as `[["firstName", "lastName"]]`;
    /// single-attribute keys are declared with `@Attribute(unique: true)`.
    open class var uniqueKeys: [[String]] { [] }
    /// Whether the entity is abstract; `false` unless overridden. An abstract entity's
    /// objects cannot be saved (`save()` throws `ManagedObjectError.abstractEntity`);
    /// fetches of it return objects of its sub-entities (subclasses given to the same
    /// `Model`). Subclasses inherit the override but are concrete: an entity is
    /// abstract when its class says so and its superclass does not, so an abstract
    /// entity under another abstract one cannot be declared.
    open class var isAbstract: Bool { false }
    /// The discriminator column of a hierarchy's table, which holds each row's concrete
    /// entity name; `entity` unless overridden. Read on the root entity only: its
    /// sub-entities share its table, primary key and version column.
    open class var entityColumn: String { "entity" }

    /// Checks a new object before a save writes it (after its attributes' rules); does
    /// nothing unless overridden. Throw a `ObjectValidationError` (or any error) to refuse the
    /// save: it throws one `ObjectValidationError` with every object's failures and sends
    /// nothing. Runs on the context's queue, at every save or import that writes the
    /// object; it must not change objects.
    open func validateForInsert() throws {}
    /// Checks a changed object before a save writes it (after its attributes' rules);
    /// does nothing unless overridden. See `validateForInsert()`.
    open func validateForUpdate() throws {}
    /// Checks an object before a save deletes its row; does nothing unless overridden.
    /// See `validateForInsert()`.
    open func validateForDelete() throws {}

    /// The object's ID: temporary until first saved, permanent afterwards.
    public internal(set) var objectID: ObjectID {
        get {
            if let objectIDStorage { return objectIDStorage }
            let temporary = ObjectID(temporaryFor: entity.rootEntityName)
            objectIDStorage = temporary
            return temporary
        }
        set { objectIDStorage = newValue }
    }
    /// What `objectID` reads and sets. (Unchecked in release builds, as `storageField`
    /// is: read or replaced whole, calling out to nothing meanwhile.)
    #if DEBUG
    final var objectIDStorage: ObjectID?
    #else
    // Unsafe: read or assigned whole; no access overlaps another.
    @exclusivity(unchecked) final var objectIDStorage: ObjectID?
    #endif
    /// The object's kinds of unsaved change and its place in its context's list of
    /// pending objects (written by `PendingObjects` only). (Declared here: it fills the
    /// ID's padding.)
    ///
    /// (Unchecked in release builds, as `storageField` is: `PendingObjects` reads and
    /// writes it in place and calls out to nothing meanwhile.)
    #if DEBUG
    final var pendingSlot = PendingSlot()
    #else
    // Unsafe: two integers changed in place; no access overlaps another.
    @exclusivity(unchecked) final var pendingSlot = PendingSlot()
    #endif

    /// The context the object belongs to; `nil` before insertion and after it was
    /// deleted and saved, or unregistered.
    public internal(set) var managedObjectContext: ManagedObjectContext? {
        get { contextReference?.context }
        set { contextReference = newValue?.reference }
    }
    /// A weak reference shared by all objects of a context (one weak reference per
    /// context, not one per object).
    final var contextReference: ContextReference?

    final var entityStorage: EntityDescription?
    /// The object's state (values, references, committed values, flags): read through
    /// its properties, changed through its methods only.
    ///
    /// Reads project the field they need out of the stored value. (This accessor does
    /// not keep a non-mutating method call on the storage from working on a copy, every
    /// array retained: callgrind showed the copies with it. The storage's change facts,
    /// asked of every changed object, are `mutating` for that reason; see there.)
    @inlinable final var storage: ObjectStorage {
        _read { yield storageField }
        _modify { yield &storageField }
    }
    /// What `storage` reads and changes (named only here: `.ci/check-layers`).
    ///
    /// Release builds leave out the runtime exclusivity check of each access (callgrind:
    /// about 80 instructions an access, several an object per save): every access is a
    /// read of a field or a call of one of the storage's own methods, which change the
    /// storage and call out to nothing, so no access can overlap another. Debug builds,
    /// the tests among them, keep the check.
    #if DEBUG
    @usableFromInline final var storageField = ObjectStorage()
    #else
    // Unsafe: no access overlaps another (the storage's methods call out to nothing;
    // debug builds check it).
    @exclusivity(unchecked) @usableFromInline final var storageField = ObjectStorage()
    #endif

    /// Creates an object that belongs to no context yet; `context.insert(_:)` adds it.
    public required init() {}

    /// Creates an object and inserts it into a context.
    public convenience init(context: ManagedObjectContext) {
        self.init()
        context.insert(self)
    }

    /// The entity description: the context's model's, or one built from the class.
    public var entity: EntityDescription {
        if let entityStorage { return entityStorage }
        let described = EntityRegistry.description(for: type(of: self))
        entityStorage = described
        return described
    }

    /// Makes the storage hold a value per attribute and a reference per relationship
    /// (objects made by `init()` have none until first used).
    func prepareStorage() {
        if storage.prepare(for: entity) { contextReference?.membershipGeneration &+= 1 }
    }

    /// Sets a to-one reference, telling the context that one-to-many members may have
    /// changed (`ManagedObjectContext.members(of:relationship:)`).
    func setReference(_ reference: RelatedReference, at index: Int) {
        storage.setReference(reference, at: index)
        contextReference?.membershipGeneration &+= 1
    }

    /// Replaces every to-one reference (see `setReference(_:at:)`).
    func replaceReferences(_ references: [RelatedReference]) {
        storage.replaceReferences(references)
        contextReference?.membershipGeneration &+= 1
    }

    /// Takes another object's stored row: values, references, committed state and version
    /// (a keyed insert merged into the row it met); it is no keyed insert any more. (Its
    /// own row is taken from a copy: two accesses to one storage cannot overlap.)
    func adoptStoredRow(of other: ManagedObject) {
        var own = other === self ? storage : ObjectStorage()
        if other === self { storage.adoptStoredRow(of: &own) } else { storage.adoptStoredRow(of: &other.storage) }
        contextReference?.membershipGeneration &+= 1
    }

    /// Puts back the values and references of a checkpoint (`ObjectStorage.checkpoint()`).
    func restore(_ checkpoint: ObjectStorage.Checkpoint) {
        storage.restore(checkpoint)
        contextReference?.membershipGeneration &+= 1
    }

    /// Marks the object deleted (not saved yet) or not, telling the context that
    /// one-to-many members may have changed.
    func setDeleted(_ deleted: Bool) {
        storage.setDeleted(deleted)
        contextReference?.membershipGeneration &+= 1
    }

    /// Whether the object was deleted in its context and not saved yet.
    var deletedFlag: Bool { storage.deletedFlag }
    /// Whether the object's row turned out to be gone from the database.
    var isMissingFromStore: Bool { storage.isMissingFromStore }

    // MARK: - State

    /// Whether the object was inserted and not saved yet.
    public var isInserted: Bool { managedObjectContext?.insertedSet.contains(self) ?? false }
    /// Whether the object has unsaved changes to a saved row or to its many-to-many
    /// relationships.
    public var isUpdated: Bool {
        guard let context = managedObjectContext, !isInserted, !isDeleted else { return false }
        return context.changedSet.contains(self) && (hasPersistentChangedValues || hasJoinChanges)
    }
    /// Whether the object was deleted (saved or not), or its row disappeared.
    public var isDeleted: Bool { deletedFlag }
    /// Whether the object has unsaved changes of any kind.
    public var hasChanges: Bool { isInserted || isDeleted || isUpdated }

    /// Deletes the object from its context (RHManagedObject's `delete`); the row goes at
    /// the next save.
    public func delete() {
        managedObjectContext?.delete(self)
    }

    // MARK: - Identity

    /// Objects are equal only to themselves.
    public static func == (lhs: ManagedObject, rhs: ManagedObject) -> Bool { lhs === rhs }

    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The hash sets and dictionaries use (Swift's `Hashable` hook for it): the object's
    /// address mixed with the table's seed in a few instructions (splitmix64) instead of
    /// a full SipHash round — a save puts every object it touches into several sets.
    public final func _rawHashValue(seed: Int) -> Int {
        FastHash.mix(UInt64(UInt(bitPattern: ObjectIdentifier(self))), seed: seed)
    }

    /// `User/42 {name: "Ada", …}`.
    public var description: String {
        prepareStorage()
        let fields = entity.attributes.map { attribute in
            "\(attribute.name): \(storage.value(at: attribute.index).anyValue.map { "\($0)" } ?? "nil")"
        }
        return "\(objectID) {\(fields.joined(separator: ", "))}"
    }

    // MARK: - Storage access (used by the property wrappers)

    func checkQueue() {
        #if DEBUG
            managedObjectContext?.assertOnQueue()
        #endif
    }

    /// `object as? T`, without the runtime's generic cast when the object's class is
    /// exactly `T` (as an entity's objects are when `T` is the entity's class): imports
    /// hand back thousands of objects per batch.
    @inline(__always)
    static func cast<T: ManagedObject>(_ object: ManagedObject, to type: T.Type) -> T? {
        // Unsafe: the object's dynamic class is `type` itself (compared by identity on the
        // same line), so the object is a `T`.
        if ObjectIdentifier(Swift.type(of: object)) == ObjectIdentifier(type) { return unsafeDowncast(object, to: type) }
        return object as? T
    }

    /// The objects that are `T`s, as `T`s (`cast(_:to:)` each), in order.
    static func cast<T: ManagedObject>(_ objects: [ManagedObject], to type: T.Type) -> [T] {
        var typed: [T] = []
        typed.reserveCapacity(objects.count)
        for object in objects {
            if let object = cast(object, to: type) { typed.append(object) }
        }
        return typed
    }

    /// The value at `slot` as its scalar type, read where it is stored (no copy of the
    /// stored box): what an attribute's getter reads. Inlinable, so that the read is
    /// specialized for the getter's type.
    @inlinable
    func storedScalar<Scalar>(at slot: Int, as scalar: Scalar.Type) -> Scalar? {
        prepareRead(at: slot)
        // Unsafe: the buffer is read only inside the closure, and only after `slot` is
        // checked against its indices (a bad slot stops with a precondition failure).
        return storage.withUnsafeValues { buffer in
            guard let base = buffer.baseAddress, buffer.indices.contains(slot) else {
                preconditionFailure("no attribute at position \(slot)")
            }
            return base[slot].scalar(as: Scalar.self)
        }
    }

    /// What every read of a stored value does first: the queue check (debug builds),
    /// storage for an object that has none yet, the access record.
    @usableFromInline
    func prepareRead(at slot: Int) {
        checkQueue()
        if storage.valueCount == 0 { prepareStorage() }
        if storage.recordsAccess { storage.setLastAccess((true, slot)) }
    }

    @usableFromInline
    func missingValue<Value>(_ type: Value.Type, slot: Int) -> Value {
        preconditionFailure(
            "\(entity.name).\(entity.attributes[slot].name) holds no value of type \(Value.self)")
    }

    @usableFromInline
    func setStoredValue(_ value: consuming StoredValue, at slot: Int) {
        checkQueue()
        // (Storage is prepared whole or not at all; the value moves into it, uncopied.)
        if slot >= storage.valueCount { prepareStorage() }
        if _slowPath(contextReference?.undoManager != nil) { willWriteForUndo(value, at: slot) }
        let result = storage.write(consume value, at: slot, arena: contextReference?.valueArena)
        if result.isMissingFromStore {
            (contextReference?.logger ?? Logger(label: "pgdatakit")).warning(
                "\(objectID).\(entity.attributes[slot].name) set after its row was deleted: not saved")
        }
        let (effect, isKey) = (result.effect, result.isKey)
        switch effect {
        case .unchanged, .unprepared: return
        case .untracked:
            // Never saved nor fetched (inserted, or in no context yet): nothing to track,
            // but an import's key (another imported object may hold it).
            guard isKey, let context = contextReference?.context else { return }
            context.bookkeeping.noteKeyedInsertKeyChanged()
            context.objectDidChange(self)
        case .firstChange, .changedAgain:
            // The context is told once per object (it keeps the object among its changed
            // ones until the values are committed or the hints forgotten), and of an
            // import's key; other sets need not load it.
            guard effect == .firstChange || isKey, let context = contextReference?.context else { return }
            if isKey { context.bookkeeping.noteKeyedInsertKeyChanged() }
            if effect == .firstChange { context.objectDidChange(self) }
        }
    }

    /// `setStoredValue(_:at:)` for a JSON attribute's typed property: a value nested
    /// deeper than `JSONValue.maximumDepth` is not stored; a stand-in one level deeper
    /// than the limit is, so the save is refused as it would have been, and an error is
    /// logged. The value itself goes to the object's `JSONValue.Keeper`, which takes it
    /// apart level by level when it is the last to hold it (Swift would release it
    /// recursively and exhaust the stack; the property's synthesized accessor releases
    /// its own reference only after this returns).
    @usableFromInline
    func setStoredJSONValue<Scalar: AttributeScalar>(_ scalar: inout Scalar?, at slot: Int) {
        guard let json = scalar as? JSONValue, json.nestsTooDeep else {
            setStoredValue(StoredValue(scalar), at: slot)
            return
        }
        let keeper = storage.makeJSONKeeper()
        keeper.keep(consume json)
        scalar = nil
        (contextReference?.logger ?? Logger(label: "pgdatakit")).error(
            "\(entity.name).\(entity.attributes[slot].name) set to a JSON value nested deeper than \(JSONValue.maximumDepth) levels (JSONValue.maximumDepth): not kept; saving the object throws until the attribute is set again")
        setStoredValue(.json(JSONValue.tooDeepStandIn), at: slot)
    }

    /// Sets an attribute of an object just inserted and never saved (an import writing
    /// the key of a new object): no change tracking, as `setStoredValue(_:at:)` does for
    /// such objects, without comparing with the value replaced.
    func initializeValue(_ value: StoredValue, at slot: Int) {
        if slot >= storage.valueCount { prepareStorage() }
        if _slowPath(contextReference?.undoManager != nil) { willChangeForUndo() }
        storage.initialize(value, at: slot, arena: contextReference?.valueArena)
    }

    /// The primary key a to-one reference points at, if the destination is saved.
    func referencedKey(at index: Int) -> Int64? {
        prepareStorage()
        return storage.referencedKey(at: index)
    }

    /// Whether a to-one reference points at `object`.
    func references(_ object: ManagedObject, at index: Int) -> Bool {
        prepareStorage()
        switch storage.toOne[index] {
        case .none: return false
        case .key(let key): return object.objectID.primaryKey == key
        case .object(let target): return target === object
        }
    }

    func relatedObjects(at index: Int) -> [ManagedObject] {
        checkQueue()
        prepareStorage()
        if storage.recordsAccess {
            storage.setLastAccess((false, index))
            return []
        }
        let relationship = entity.relationships[index]
        if isManyToMany(relationship) { return joinedObjects(at: index) }
        if relationship.isToMany || relationship.columnName == nil {
            // One-to-many, or the side of a one-to-one without the key: read through
            // the related objects' foreign keys.
            return managedObjectContext?.members(of: self, relationship: relationship) ?? []
        }
        switch storage.toOne[index] {
        case .none: return []
        case .object(let object): return [object]
        case .key(let key):
            guard let context = managedObjectContext,
                let object = context.resolve(key: key, entityName: relationship.destinationRootName)
            else { return [] }
            setReference(.object(object), at: index)
            return [object]
        }
    }

    func setRelatedObjects(_ objects: [ManagedObject], at index: Int) {
        checkQueue()
        prepareStorage()
        let undo = contextReference?.undoManager
        undo?.beginCall()
        defer { undo?.endCall() }
        let relationship = entity.relationships[index]
        if let context = managedObjectContext {
            for object in objects where object.managedObjectContext == nil { context.insert(object) }
            for object in objects {
                precondition(
                    object.managedObjectContext === context,
                    "\(entity.name).\(relationship.name): cannot relate objects of different contexts; "
                        + "fetch the object in this context with object(with: objectID)")
            }
        }
        if isManyToMany(relationship) {
            setJoinedObjects(objects, at: index)
            return
        }
        if relationship.isToMany || relationship.columnName == nil {
            guard let inverseName = relationship.inverseName else { return }
            let current = relatedObjects(at: index)
            let wanted = Set(objects.map(ObjectIdentifier.init))
            for member in current where !wanted.contains(ObjectIdentifier(member)) {
                if let inverse = member.entity.relationship(named: inverseName), member.references(self, at: inverse.index) {
                    member.setRelatedObjects([], at: inverse.index)
                }
            }
            let existing = Set(current.map(ObjectIdentifier.init))
            for object in objects where !existing.contains(ObjectIdentifier(object)) {
                if let inverse = object.entity.relationship(named: inverseName) {
                    object.setRelatedObjects([self], at: inverse.index)
                }
            }
            return
        }
        let newValue: RelatedReference = objects.first.map { .object($0) } ?? .none
        switch (storage.toOne[index], newValue) {
        case (.none, .none): return
        case (.object(let old), .object(let new)) where old === new: return
        default: break
        }
        // (A reference by key to the same object is no change to undo.)
        if let undo, !(objects.first.map { references($0, at: index) } ?? false) { undo.willChange(self) }
        if let target = objects.first { releaseOneToOnePartner(of: target, through: relationship) }
        setReference(newValue, at: index)
        managedObjectContext?.objectDidChange(self)
    }

    // MARK: - Dynamic access

    /// The value of an attribute or relationship by name: the attribute's value (`nil`
    /// for `NULL`; an enum's raw value, a `Codable` value's `JSONValue`, an array, as
    /// stored), a to-one relationship's object, or a to-many relationship's objects as
    /// `[ManagedObject]`.
    ///
    /// - Throws: `ManagedObjectError.unknownKey` naming the entity and key, or
    ///   `.objectDeleted` when the object's row is deleted (by a save of its own context,
    ///   or elsewhere and merged in).
    public func value(forKey key: String) throws -> Any? {
        checkQueue()
        if isMissingFromStore { throw ManagedObjectError.objectDeleted(objectID) }
        prepareStorage()
        if let attribute = entity.attribute(named: key) { return storage.value(at: attribute.index).anyValue }
        if let relationship = entity.relationship(named: key) {
            let objects = relatedObjects(at: relationship.index)
            return relationship.isToMany ? objects : objects.first
        }
        throw ManagedObjectError.unknownKey(entity: entity.name, key: key)
    }

    /// Sets an attribute or relationship by name, checking the type.
    ///
    /// For example, `try user.setValue(36, forKey: "age")`; integers convert between
    /// widths when the value fits. An enum attribute takes the enum or its raw value
    /// (`"draft"`), a `Codable` one the value or JSON that decodes into it (a
    /// `JSONValue`, a dictionary), an array attribute an array of its element type or of
    /// integers that fit it (`[Int64]` for `[Int]`).
    ///
    /// - Throws: `ManagedObjectError.unknownKey`, or `.typeMismatch` naming the entity,
    ///   key, expected and actual types (also for `nil` into a non-optional attribute),
    ///   `.wrongContext` naming a related object that belongs to another context (fetch
    ///   it here with `object(with:)`; nothing is changed), or `.objectDeleted` when the
    ///   object's row is deleted (by a save of its own context, or elsewhere and merged
    ///   in; an object deleted but not saved yet still takes values).
    public func setValue(_ value: Any?, forKey key: String) throws {
        checkQueue()
        if isMissingFromStore { throw ManagedObjectError.objectDeleted(objectID) }
        prepareStorage()
        if let attribute = entity.attribute(named: key) {
            if let json = value as? JSONValue, json.nestsTooDeep {
                throw ManagedObjectError.typeMismatch(
                    entity: entity.name, key: key,
                    expected: "JSONValue nested at most \(JSONValue.maximumDepth) levels",
                    actual: "JSONValue nested deeper")
            }
            guard let stored = attribute.coerce(value) else {
                throw ManagedObjectError.typeMismatch(
                    entity: entity.name, key: key, expected: attribute.swiftTypeName,
                    actual: value.map { String(describing: type(of: $0)) } ?? "nil")
            }
            setStoredValue(stored, at: attribute.index)
            return
        }
        if let relationship = entity.relationship(named: key) {
            let objects: [ManagedObject]
            switch value {
            case nil: objects = []
            case let object as ManagedObject: objects = [object]
            case let many as [ManagedObject]: objects = many
            case let many as any Collection:
                objects = many.compactMap { $0 as? ManagedObject }
                guard objects.count == many.count else { fallthrough }
            default:
                throw ManagedObjectError.typeMismatch(
                    entity: entity.name, key: key, expected: relationship.isToMany
                        ? "Set<\(relationship.destinationEntityName)>" : "\(relationship.destinationEntityName)?",
                    actual: value.map { String(describing: type(of: $0)) } ?? "nil")
            }
            let wrongType = objects.first { !$0.entity.isKind(of: relationship.destinationType) }
            if let wrongType {
                throw ManagedObjectError.typeMismatch(
                    entity: entity.name, key: key, expected: relationship.destinationEntityName,
                    actual: wrongType.entity.name)
            }
            if !relationship.isToMany && objects.count > 1 {
                throw ManagedObjectError.typeMismatch(
                    entity: entity.name, key: key, expected: "one \(relationship.destinationEntityName)",
                    actual: "\(objects.count) objects")
            }
            if let context = managedObjectContext,
                let stranger = objects.first(where: { $0.managedObjectContext.map { $0 !== context } ?? false })
            {
                throw ManagedObjectError.wrongContext(stranger.objectID)
            }
            setRelatedObjects(objects, at: relationship.index)
            return
        }
        throw ManagedObjectError.unknownKey(entity: entity.name, key: key)
    }
}

/// Unique markers used to find a property wrapper by reflection.
enum SlotMarker {
    private static let counter = Atomic<Int>(0)

    static func next() -> Int {
        -2 - counter.add(1, ordering: .relaxed).newValue
    }
}
