import Foundation
import Synchronization

/// What the model knows about one entity: its class, table, attributes, relationships,
/// unique keys and bookkeeping columns.
///
/// Entities are described from their class (a `ManagedObject` subclass, read through
/// `EntityObject`) by reflection: every `@Attribute` and `@Relationship` property, in
/// declaration order.
public final class EntityDescription: @unchecked Sendable, CustomStringConvertible {
    // Sendable: everything is immutable after the model is built (`toOneRelationships`,
    // `selectColumns` and the hierarchy's fields are set while it is built) except the slot table,
    // which is atomic, and its writers' list, which is a Mutex.
    /// The entity name (the class name unless `entityName` is overridden).
    public let name: String
    /// The class of its objects: a `ManagedObject` subclass.
    public let objectClass: any EntityObject.Type
    // Unsafe: written only while the model is built (`placeInHierarchy`), before the entity
    // is shared, and only read afterwards: no access overlaps another. (Saves read these
    // per object; the runtime check of each read measured +1.7% instructions a record.)
    /// The table (a sub-entity's is its root entity's).
    @exclusivity(unchecked) public internal(set) var tableName: String
    // Unsafe: as `tableName`: written while the model is built, only read afterwards.
    /// The primary-key column (a `bigint` with a sequence, such as an identity column;
    /// a sub-entity's is its root entity's).
    @exclusivity(unchecked) public internal(set) var primaryKeyColumn: String
    // Unsafe: as `tableName`: written while the model is built, only read afterwards.
    /// The version column used for optimistic locking (a sub-entity's is its root
    /// entity's).
    @exclusivity(unchecked) public internal(set) var versionColumn: String
    /// Whether the entity is abstract: its objects are never stored, its sub-entities'
    /// are (`ManagedObject.isAbstract`).
    public internal(set) var isAbstract = false
    // Unsafe: as `tableName`: written while the model is built, only read afterwards.
    /// The entity this one inherits from: the nearest superclass of its class that is
    /// an entity of the model; `nil` for a root.
    @exclusivity(unchecked) public internal(set) var superentityName: String?
    /// The entities that inherit from this one directly, in model order.
    public internal(set) var subentityNames: [String] = []
    /// The discriminator column of the hierarchy's table, which holds each row's
    /// concrete entity name (`ManagedObject.entityColumn` of the root); `nil` for an
    /// entity with neither superentity nor sub-entities.
    public internal(set) var discriminatorColumn: String?
    // Unsafe: as `tableName`: written while the model is built, only read afterwards.
    /// The root of the entity's hierarchy (itself for an entity without superentity):
    /// the entity whose name the object IDs of the whole hierarchy carry, so a reference
    /// to any kind finds the registered object without knowing its kind.
    @exclusivity(unchecked) public internal(set) var rootEntityName: String
    /// How many of `attributes` (the first ones) the entity inherits from its
    /// superentity; 0 for a root.
    public internal(set) var inheritedAttributeCount = 0
    /// How many of `relationships` (the first ones) the entity inherits from its
    /// superentity; 0 for a root.
    public internal(set) var inheritedRelationshipCount = 0
    /// The attributes the entity declares itself (not inherited from its superentity).
    public var ownAttributes: ArraySlice<AttributeDescription> { attributes.dropFirst(inheritedAttributeCount) }
    /// The to-one relationships with a foreign-key column that the entity declares
    /// itself (not inherited from its superentity).
    var ownToOneRelationships: [RelationshipDescription] {
        toOneRelationships.filter { $0.index >= inheritedRelationshipCount }
    }
    /// The concrete entities stored as this one: itself unless abstract, and every
    /// concrete descendant; what a fetch of it filters the discriminator by.
    public internal(set) var concreteEntityNames: [String] = []
    /// The entity's class's superclass chain, nearest first (up to `ManagedObject`):
    /// where the model looks for its superentity, and whose first class's `isAbstract`
    /// tells whether the entity's own is an override.
    let superclasses: [Any.Type]
    /// The entity's position in the model (set while the model is built).
    var order = 0
    /// The attributes, in declaration order.
    public let attributes: [AttributeDescription]
    /// The relationships, in declaration order.
    public let relationships: [RelationshipDescription]
    /// The unique keys: each is a list of attribute names.
    public let uniqueKeys: [[String]]
    let attributesByName: [String: AttributeDescription]
    let relationshipsByName: [String: RelationshipDescription]

    // Unsafe: the table is held unretained; `slotTables` holds every table ever published and
    // never drops one, so each lives as long as the entity: a reader never sees one freed.
    /// Storage positions by key-path identity; the key paths are kept alive so their
    /// identities cannot be reused.
    ///
    /// Property reads look here on every access, so reading takes no lock: the current
    /// table is immutable and published atomically; additions (a few per entity, on
    /// first use of each property) build a new table under `slotTables`.
    private let slotTable: Atomic<Unmanaged<SlotTable>>
    private let slotTables: Mutex<[SlotTable]>

    init(objectClass: any EntityObject.Type) {
        self.objectClass = objectClass
        self.name = objectClass.entityName
        self.tableName = objectClass.tableName
        self.primaryKeyColumn = objectClass.primaryKeyColumn
        self.versionColumn = objectClass.versionColumn
        self.rootEntityName = objectClass.entityName
        let emptyTable = SlotTable(entries: [], keyPaths: [])
        // Unsafe: `slotTables`, set on the next line, keeps `emptyTable` alive.
        self.slotTable = Atomic(Unmanaged.passUnretained(emptyTable))
        self.slotTables = Mutex([emptyTable])
        let (attributes, relationships, classes) = Self.declarations(
            of: objectClass.init(), entityName: objectClass.entityName)
        self.attributes = attributes
        self.superclasses = Array(classes.dropFirst())
        self.relationships = relationships
        // A default that differs between two new objects (`= UUID()`, `= Date()`) is made
        // per object: a column default cannot be a copy of it.
        let second = Self.declarations(of: objectClass.init(), entityName: objectClass.entityName).attributes
        self.volatileDefaults = Set(
            zip(attributes, second).filter { !Self.sameDefault($0.defaultValue, $1.defaultValue) }.map(\.0.index))
        self.attributesByName = Dictionary(attributes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.relationshipsByName = Dictionary(
            relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.uniqueKeys = attributes.filter(\.isUnique).map { [$0.name] } + objectClass.uniqueKeys
        let keyNames = Set(uniqueKeys.joined())
        self.keyAttributeIndexes = Set(attributes.filter { keyNames.contains($0.name) }.map(\.index))
        self.keyAttributeMask = keyAttributeIndexes.reduce(0) { $1 < 64 ? $0 | (1 << UInt64($1)) : $0 }
        self.attributeDecodings = attributes.map(\.decoding)
        self.attributeOptionality = attributes.map(\.isOptional)
        self.defaultValues = attributes.map(\.defaultValue)
        self.defaultValueRun = AttributeValues(defaultValues)
        self.checkedAttributeIndexes = attributes.filter { $0.storedValueProblem != nil }.map(\.index)
        self.validatedAttributes = attributes.filter { !$0.checks.isEmpty }
        self.validatedRelationships = relationships.filter(\.isRequired)
        self.hasRules = !validatedAttributes.isEmpty || !validatedRelationships.isEmpty
        relationshipsResolved()
    }

    /// The attributes and relationships a new object of the class declares, superclass
    /// properties first, in declaration order, and the class's superclass chain (its
    /// own class first).
    private static func declarations(
        of prototype: any EntityObject, entityName: String
    ) -> (attributes: [AttributeDescription], relationships: [RelationshipDescription], classes: [Any.Type]) {
        var attributes: [AttributeDescription] = []
        var relationships: [RelationshipDescription] = []
        var mirror: Mirror? = Mirror(reflecting: prototype)
        var levels: [Mirror] = []
        while let current = mirror {
            levels.insert(current, at: 0)  // superclass properties first
            mirror = current.superclassMirror
        }
        for level in levels {
            for child in level.children {
                guard let label = child.label, label.hasPrefix("_") else { continue }
                let propertyName = String(label.dropFirst())
                if let declaration = child.value as? any AttributeDeclaration {
                    attributes.append(
                        declaration.describe(name: propertyName, index: attributes.count, entityName: entityName))
                } else if let declaration = child.value as? any RelationshipDeclaration {
                    relationships.append(declaration.describe(name: propertyName, index: relationships.count))
                }
            }
        }
        return (attributes, relationships, levels.reversed().map(\.subjectType))
    }

    /// Whether two prototypes' defaults are the same value (NaN is, though `==` says not).
    private static func sameDefault(_ first: StoredValue, _ second: StoredValue) -> Bool {
        switch (first, second) {
        case (.double(let a), .double(let b)): return a.bitPattern == b.bitPattern
        case (.float(let a), .float(let b)): return a.bitPattern == b.bitPattern
        default: return first == second
        }
    }

    /// The indexes of attributes whose default is made per object (`= UUID()`,
    /// `= Date()`): two new objects hold different values, so no column default copies
    /// it (`Model.schemaSQL()` writes `gen_random_uuid()` / `now()` for those types and
    /// none for others).
    let volatileDefaults: Set<Int>

    /// Whether the DDL the model implies gives `attribute`'s column a default: a
    /// non-nil default outside every unique key (a default on a key column would make the
    /// second defaulted row a conflict), either constant or one PostgreSQL can make per
    /// row too (a new UUID, the current time).
    func impliesColumnDefault(_ attribute: AttributeDescription) -> Bool {
        if case .null = attribute.defaultValue { return false }
        if uniqueKeys.contains(where: { $0.contains(attribute.name) }) { return false }
        return !volatileDefaults.contains(attribute.index) || attribute.type == .uuid || attribute.type == .date
    }

    /// Places the entity in its hierarchy (the model calls it while it is built, before
    /// the entity is shared): a sub-entity takes its root's table and bookkeeping
    /// columns; `concrete` are the entities whose rows it stands for.
    func placeInHierarchy(
        root: EntityDescription, superentity: EntityDescription?, subentities: [String], isAbstract: Bool, concrete: [String]
    ) {
        let rootClass = root.objectClass
        (tableName, primaryKeyColumn, versionColumn) = (rootClass.tableName, rootClass.primaryKeyColumn, rootClass.versionColumn)
        rootEntityName = root.name
        superentityName = superentity?.name
        // (Superclass properties come first in declaration order.)
        inheritedAttributeCount = superentity?.attributes.count ?? 0
        inheritedRelationshipCount = superentity?.relationships.count ?? 0
        subentityNames = subentities
        self.isAbstract = isAbstract
        concreteEntityNames = concrete
        let inHierarchy = superentity != nil || !subentities.isEmpty
        discriminatorColumn = inHierarchy ? root.objectClass.entityColumn : nil
        relationshipsResolved()
    }

    /// Whether the entity's objects are objects of `objectClass`: its class is that class
    /// or a subclass of it (read from the class chain, so it needs no model).
    func isKind(of objectClass: any EntityObject.Type) -> Bool {
        ObjectIdentifier(self.objectClass) == ObjectIdentifier(objectClass) || superclasses.contains { ObjectIdentifier($0) == ObjectIdentifier(objectClass) }
    }

    /// Whether the entity has sub-entities: a fetch of it may return objects of several
    /// classes.
    var hasSubentities: Bool { !subentityNames.isEmpty }

    /// Recomputes what depends on which relationships hold a foreign key; the model calls
    /// it once it has settled one-to-one relationships (before the entity is shared).
    func relationshipsResolved() {
        toOneRelationships = relationships.filter { $0.columnName != nil }
        toOneIndexes = toOneRelationships.map(\.index)
        selectColumns =
            [primaryKeyColumn, versionColumn] + attributes.map(\.columnName) + relationships.compactMap(\.columnName)
    }

    /// The attributes whose columns are in a unique index (alone or with others): a
    /// change of one is a change of a key, which PostgreSQL locks `FOR UPDATE`.
    let keyAttributeIndexes: Set<Int>
    /// `keyAttributeIndexes` as a bit mask (bit `i` for attribute `i`; attributes past
    /// the 64th are not in it: objects of such entities have no change mask either).
    let keyAttributeMask: UInt64
    /// Each attribute's fetch fast path and optionality, in attribute order (plain
    /// arrays, so the decoding loop touches no attribute objects).
    let attributeDecodings: [AttributeDecoding]
    let attributeOptionality: [Bool]
    /// The values of a new object, in attribute order.
    let defaultValues: [StoredValue]
    /// `defaultValues` in a value block: a new object's storage starts with this run,
    /// shared until its first write copies it.
    let defaultValueRun: AttributeValues
    /// The attributes whose Swift type holds fewer values than their column (enums,
    /// `Codable` values), by index: the stored values a fetch checks
    /// (`AttributeDescription.storedValueProblem`). Empty for most entities.
    let checkedAttributeIndexes: [Int]
    /// The attributes with validation rules (`@Attribute(validate:)`), in declaration
    /// order: what a save checks of each object it writes. Empty for most entities.
    let validatedAttributes: [AttributeDescription]
    /// The to-one relationships declared `required: true`.
    let validatedRelationships: [RelationshipDescription]
    /// Whether any attribute or relationship has rules, read per object a save writes
    /// without touching the arrays.
    let hasRules: Bool
    /// The indexes of `toOneRelationships` in `relationships`.
    private(set) var toOneIndexes: [Int] = []

    /// Columns in the order fetches select them: primary key, version, attributes, then
    /// to-one foreign keys (in relationship order).
    private(set) var selectColumns: [String] = []

    /// The attribute with a name, if any.
    public func attribute(named name: String) -> AttributeDescription? { attributesByName[name] }

    /// The relationship with a name, if any.
    public func relationship(named name: String) -> RelationshipDescription? { relationshipsByName[name] }

    /// The to-one relationships that hold a foreign-key column (all to-one relationships
    /// but the side of a one-to-one relationship whose partner holds the key).
    public private(set) var toOneRelationships: [RelationshipDescription] = []

    /// `Entity(table): attributes; relationships`; in a hierarchy
    /// `abstract Entity : Superentity(table): …` (the words that apply).
    public var description: String {
        (isAbstract ? "abstract " : "") + name + (superentityName.map { " : \($0)" } ?? "") + "(\(tableName)): "
            + attributes.map(\.description).joined(separator: ", ")
            + (relationships.isEmpty ? "" : "; " + relationships.map(\.description).joined(separator: ", "))
    }

    /// The cached storage position of the property behind a wrapper's storage key path.
    /// (Inlined into `ManagedObject.cachedSlot(for:)`, one call less per typed property
    /// access; the entity read there is still retained around the scan.)
    @inline(__always)
    func cachedSlot(for keyPath: AnyKeyPath) -> Int? {
        let id = ObjectIdentifier(keyPath)
        // Unsafe: the loaded table lives as long as `self` (see `slotTable`), so it is read
        // without a retain; the acquiring load sees it fully built.
        return slotTable.load(ordering: .acquiring)._withUnsafeGuaranteedRef { $0.slot(for: id) }
    }

    func cacheSlot(_ slot: Int, for keyPath: AnyKeyPath) {
        slotTables.withLock { tables in
            guard let current = tables.last, current.slot(for: ObjectIdentifier(keyPath)) == nil else { return }
            let next = SlotTable(
                entries: current.entries + [(ObjectIdentifier(keyPath), slot)], keyPaths: current.keyPaths + [keyPath])
            tables.append(next)
            // Unsafe: `tables` (appended to above, never shrunk) keeps `next` alive.
            slotTable.store(Unmanaged.passUnretained(next), ordering: .releasing)
        }
    }
}

/// Storage positions by key-path identity, immutable once built. It holds the key paths,
/// so their identities cannot be reused while it lives.
final class SlotTable: @unchecked Sendable {
    // Sendable: immutable after init; the key paths are only held, never used.
    let entries: [(ObjectIdentifier, Int)]
    let keyPaths: [AnyKeyPath]

    init(entries: [(ObjectIdentifier, Int)], keyPaths: [AnyKeyPath]) {
        self.entries = entries
        self.keyPaths = keyPaths
    }

    /// A linear scan: an entity has a handful of properties.
    @inline(__always)
    func slot(for id: ObjectIdentifier) -> Int? {
        // Unsafe: `entries` is immutable, and the buffer is only iterated inside the closure.
        entries.withUnsafeBufferPointer { buffer in
            for entry in buffer where entry.0 == id { return entry.1 }
            return nil
        }
    }
}
