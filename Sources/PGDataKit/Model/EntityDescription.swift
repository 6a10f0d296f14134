import Foundation
import Synchronization

/// What the model knows about one entity: its class, table, attributes, relationships,
/// unique keys and bookkeeping columns.
///
/// Entities are described from their `ManagedObject` subclass by reflection: every
/// `@Attribute` and `@Relationship` property, in declaration order.
public final class EntityDescription: @unchecked Sendable, CustomStringConvertible {
    // Sendable: everything is immutable after the model is built except `slotCache`,
    // which is a Mutex.
    /// The entity name (the class name unless `entityName` is overridden).
    public let name: String
    /// The class of its objects.
    public let objectClass: ManagedObject.Type
    /// The table.
    public let tableName: String
    /// The primary-key column (a `bigint` with a sequence, such as an identity column).
    public let primaryKeyColumn: String
    /// The version column used for optimistic locking.
    public let versionColumn: String
    /// The attributes, in declaration order.
    public let attributes: [AttributeDescription]
    /// The relationships, in declaration order.
    public let relationships: [RelationshipDescription]
    /// The unique keys: each is a list of attribute names.
    public let uniqueKeys: [[String]]
    let attributesByName: [String: AttributeDescription]
    let relationshipsByName: [String: RelationshipDescription]

    /// Storage positions by key-path identity; the key paths are kept alive so their
    /// identities cannot be reused.
    private let slotCache = Mutex<(slots: [ObjectIdentifier: Int], keyPaths: [AnyKeyPath])>(([:], []))

    init(objectClass: ManagedObject.Type) {
        self.objectClass = objectClass
        self.name = objectClass.entityName
        self.tableName = objectClass.tableName
        self.primaryKeyColumn = objectClass.primaryKeyColumn
        self.versionColumn = objectClass.versionColumn
        let prototype = objectClass.init()
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
                    attributes.append(declaration.describe(name: propertyName, index: attributes.count))
                } else if let declaration = child.value as? any RelationshipDeclaration {
                    relationships.append(declaration.describe(name: propertyName, index: relationships.count))
                }
            }
        }
        self.attributes = attributes
        self.relationships = relationships
        self.attributesByName = Dictionary(attributes.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.relationshipsByName = Dictionary(
            relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.uniqueKeys = attributes.filter(\.isUnique).map { [$0.name] } + objectClass.uniqueKeys
        self.toOneRelationships = relationships.filter { !$0.isToMany }
        self.selectColumns =
            [objectClass.primaryKeyColumn, objectClass.versionColumn] + attributes.map(\.columnName)
            + relationships.compactMap(\.columnName)
    }

    /// Columns in the order fetches select them: primary key, version, attributes, then
    /// to-one foreign keys (in relationship order).
    let selectColumns: [String]

    /// The attribute with a name, if any.
    public func attribute(named name: String) -> AttributeDescription? { attributesByName[name] }

    /// The relationship with a name, if any.
    public func relationship(named name: String) -> RelationshipDescription? { relationshipsByName[name] }

    /// The to-one relationships (those with a foreign-key column).
    public let toOneRelationships: [RelationshipDescription]

    /// `Entity(table): attributes; relationships`.
    public var description: String {
        "\(name)(\(tableName)): " + attributes.map(\.description).joined(separator: ", ")
            + (relationships.isEmpty ? "" : "; " + relationships.map(\.description).joined(separator: ", "))
    }

    /// The cached storage position of the property behind a wrapper's storage key path.
    func cachedSlot(for keyPath: AnyKeyPath) -> Int? {
        slotCache.withLock { $0.slots[ObjectIdentifier(keyPath)] }
    }

    func cacheSlot(_ slot: Int, for keyPath: AnyKeyPath) {
        slotCache.withLock { cache in
            if cache.slots.updateValue(slot, forKey: ObjectIdentifier(keyPath)) == nil {
                cache.keyPaths.append(keyPath)
            }
        }
    }

    /// `"t"."id", "t"."version", …` for a table alias.
    func selectList(alias: String) -> String {
        selectColumns.map { "\(alias).\(Connection.quoteIdentifier($0))" }.joined(separator: ", ")
    }

    /// The quoted table name.
    var quotedTable: String { Connection.quoteIdentifier(tableName) }
}
