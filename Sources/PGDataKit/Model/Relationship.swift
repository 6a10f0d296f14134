/// What happens to related objects when an object is deleted.
public enum DeleteRule: String, Sendable {
    /// Related objects stay; their reference to the deleted object becomes `nil`.
    case nullify
    /// Related objects are deleted too.
    case cascade
    /// The delete is refused (at save) while related objects exist.
    case deny
    /// Nothing is done to related objects.
    case noAction
}

/// The type of a `@Relationship` property: an optional managed object (to-one) or a
/// set of them (to-many).
public protocol RelationshipValue {
    /// The related entity's class.
    static var destinationType: ManagedObject.Type { get }
    /// Whether this is a to-many relationship.
    static var isToMany: Bool { get }
    /// Builds the value from related objects.
    static func make(from objects: [ManagedObject]) -> Self
    /// The related objects.
    var relatedObjects: [ManagedObject] { get }
}

extension Optional: RelationshipValue where Wrapped: ManagedObject {
    /// The wrapped class.
    public static var destinationType: ManagedObject.Type { Wrapped.self }
    /// To-one.
    public static var isToMany: Bool { false }
    /// The first object, if any.
    public static func make(from objects: [ManagedObject]) -> Wrapped? { objects.first as? Wrapped }
    /// The object, if any.
    public var relatedObjects: [ManagedObject] { map { [$0] } ?? [] }
}

extension Set: RelationshipValue where Element: ManagedObject {
    /// The element class.
    public static var destinationType: ManagedObject.Type { Element.self }
    /// To-many.
    public static var isToMany: Bool { true }
    /// A set of the objects.
    public static func make(from objects: [ManagedObject]) -> Set<Element> {
        Set(objects.compactMap { $0 as? Element })
    }
    /// The objects.
    public var relatedObjects: [ManagedObject] { Array(self) }
}

/// Declares a relationship of a `ManagedObject` subclass.
///
/// A to-one relationship (`User?`) is stored as a foreign-key column, `<name>_id` unless
/// `column:` says otherwise. A to-many relationship (`Set<Post>`) is the inverse of a
/// to-one relationship on the other entity, named by `inverse:`; it is loaded lazily with
/// one query on first access. Both sides stay in sync in memory: setting `post.user`
/// changes `user.posts`, and inserting into `user.posts` sets `post.user`. Many-to-many
/// relationships are not supported yet: model them with a join entity.
///
/// Related objects must belong to the same context (objects of no context are inserted
/// into it). Assigning an object of another context through the property traps, since a
/// setter cannot throw; use `try object.setValue(other, forKey: "user")` where the
/// object may come from elsewhere, which throws `ManagedObjectError.wrongContext`.
///
/// For example:
///
/// ```swift
/// final class Post: ManagedObject {
///     override class var tableName: String { "posts" }
///     @Attribute(unique: true) var postID: String = ""
///     @Attribute var title: String?
///     @Relationship(inverse: "posts") var user: User?
/// }
/// ```
@propertyWrapper
public struct Relationship<Value: RelationshipValue>: RelationshipDeclaration, SlotHolder {
    let inverse: String?
    let deleteRule: DeleteRule
    let column: String?
    /// A mark used while the model finds this property by reflection.
    @usableFromInline var slot: Int = -1
    @usableFromInline static var isAttribute: Bool { false }

    /// Declares a to-one relationship.
    ///
    /// - Parameters:
    ///   - inverse: the to-many (or to-one) relationship on the other side, if any.
    ///   - deleteRule: what deleting this object does to the related one (default
    ///     `.nullify`: nothing, the other side simply loses this object).
    ///   - column: the foreign-key column (default `<snake_case name>_id`).
    public init(inverse: String? = nil, deleteRule: DeleteRule = .nullify, column: String? = nil)
    where Value: ExpressibleByNilLiteral {
        self.inverse = inverse
        self.deleteRule = deleteRule
        self.column = column
    }

    /// Declares a to-many relationship, the inverse of a to-one relationship.
    ///
    /// - Parameters:
    ///   - inverse: the to-one relationship on the related entity that points back.
    ///   - deleteRule: what deleting this object does to the related ones (default
    ///     `.nullify`: their reference becomes `nil`).
    public init(inverse: String, deleteRule: DeleteRule = .nullify) where Value: SetAlgebra {
        self.inverse = inverse
        self.deleteRule = deleteRule
        self.column = nil
    }

    /// Not available: `@Relationship` works only inside `ManagedObject` subclasses.
    @available(*, unavailable, message: "@Relationship is only for properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { preconditionFailure("@Relationship is only for properties of ManagedObject subclasses") }
        set { preconditionFailure("@Relationship is only for properties of ManagedObject subclasses") }
    }

    /// Reads and writes the relationship through the object's context.
    ///
    /// Setting objects of another context is a programmer error that traps, because a
    /// property setter cannot throw; `setValue(_:forKey:)` throws
    /// `ManagedObjectError.wrongContext` for the same mistake.
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Relationship<Value>>
    ) -> Value {
        get {
            let slot = ManagedObject.slot(of: object, storageKeyPath)
            return Value.make(from: object.relatedObjects(at: slot))
        }
        set {
            let slot = ManagedObject.slot(of: object, storageKeyPath)
            object.setRelatedObjects(newValue.relatedObjects, at: slot)
        }
    }

    func describe(name: String, index: Int) -> RelationshipDescription {
        RelationshipDescription(
            name: name, destinationType: Value.destinationType, isToMany: Value.isToMany,
            inverseName: inverse, deleteRule: deleteRule,
            columnName: Value.isToMany ? nil : (column ?? Naming.snakeCase(name) + "_id"), index: index)
    }
}

/// Implemented by `Relationship` so the model can read declarations through reflection.
protocol RelationshipDeclaration {
    func describe(name: String, index: Int) -> RelationshipDescription
}

/// A property wrapper that can carry a mark while the model finds it by reflection.
@usableFromInline
protocol SlotHolder {
    var slot: Int { get set }
    static var isAttribute: Bool { get }
}

/// What the model knows about one relationship.
public final class RelationshipDescription: @unchecked Sendable, CustomStringConvertible {
    // Sendable: `inverseName` and `destinationEntityName` are filled in while the model
    // is built, before the description is shared; everything is read-only afterwards.
    /// The Swift property name.
    public let name: String
    /// The related entity's class.
    public let destinationType: ManagedObject.Type
    /// Whether this is a to-many relationship.
    public let isToMany: Bool
    /// The relationship on the other side, if declared.
    public internal(set) var inverseName: String?
    /// What deleting the source object does to the related objects.
    public let deleteRule: DeleteRule
    /// The foreign-key column of a to-one relationship; `nil` for to-many.
    public let columnName: String?
    /// Position among the entity's relationships.
    let index: Int
    /// The related entity's name, filled in when the model is built.
    public internal(set) var destinationEntityName: String = ""

    init(
        name: String, destinationType: ManagedObject.Type, isToMany: Bool, inverseName: String?,
        deleteRule: DeleteRule, columnName: String?, index: Int
    ) {
        self.name = name
        self.destinationType = destinationType
        self.isToMany = isToMany
        self.inverseName = inverseName
        self.deleteRule = deleteRule
        self.columnName = columnName
        self.index = index
    }

    /// `name -> Destination` or `name ->> Destination`.
    public var description: String {
        "\(name) \(isToMany ? "->>" : "->") \(destinationEntityName)"
            + (inverseName.map { " (inverse \($0))" } ?? "")
    }
}
