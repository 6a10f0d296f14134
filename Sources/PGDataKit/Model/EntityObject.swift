/// What the model reads from an entity's class: its names and keys as class properties,
/// and its `@Attribute` and `@Relationship` properties by reflecting a new instance.
///
/// `ManagedObject` is the one class that conforms: subclass it to declare an entity
/// (`Model(entities:)` takes `ManagedObject` subclasses only). The protocol lets the
/// model describe entities without knowing the object graph's classes, so the Model
/// layer depends on nothing above it; `EntityDescription.objectClass` and
/// `RelationshipDescription.destinationType` are of this type.
///
/// For example:
///
/// ```swift
/// let model = try Model(entities: [User.self])
/// if let entity = model.entity(for: User.self) {
///     print(entity.objectClass == User.self)  // true
/// }
/// ```
public protocol EntityObject: AnyObject {
    /// The entity name.
    static var entityName: String { get }
    /// The table.
    static var tableName: String { get }
    /// The primary-key column.
    static var primaryKeyColumn: String { get }
    /// The optimistic-locking version column.
    static var versionColumn: String { get }
    /// Unique keys of several attributes (single-attribute keys are declared with
    /// `@Attribute(unique: true)`).
    static var uniqueKeys: [[String]] { get }
    /// Whether the class declares an abstract entity: one whose objects are never
    /// stored, whose sub-entities' objects are (see `EntityDescription.isAbstract`).
    static var isAbstract: Bool { get }
    /// The discriminator column of an entity hierarchy's table: it names each row's
    /// concrete entity. Read on the root entity of a hierarchy only.
    static var entityColumn: String { get }
    /// A new instance, which the model reflects to find the declared properties.
    init()
}
