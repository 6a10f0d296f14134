import Foundation

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
/// - A **to-one** relationship (`User?`) is stored as a foreign-key column, `<name>_id`
///   unless `column:` says otherwise.
/// - A **to-many** relationship (`Set<Post>`) whose inverse (named by `inverse:`) is a
///   to-one relationship is **one-to-many**: the other entity's foreign key holds it, and
///   it is loaded lazily with one query on first access.
/// - Two to-many relationships that are each other's inverse (`Post.tags: Set<Tag>` and
///   `Tag.posts: Set<Post>`) are **many-to-many**, stored in a join table: by default
///   named after the two tables, sorted and joined with `_` (`posts_tags`), with one
///   `<snake_case entity name>_id` column per side (`post_id`, `tag_id`). `joinTable:`
///   names the table, `column:` the column that holds the related objects' keys.
/// - Two to-one relationships that are each other's inverse are **one-to-one**: the side
///   declared with `column:` holds the foreign key; the other side is read through it.
///
/// Both sides stay in sync in memory: setting `post.user` changes `user.posts`, inserting
/// into `user.posts` sets `post.user`, inserting a tag into `post.tags` adds the post to
/// `tag.posts`, and assigning a one-to-one partner clears the previous partner's side.
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
///     @Relationship(inverse: "posts") var tags: Set<Tag>              // join table posts_tags
/// }
///
/// final class Tag: ManagedObject {
///     override class var tableName: String { "tags" }
///     @Attribute(unique: true) var name: String = ""
///     @Relationship(inverse: "tags") var posts: Set<Post>
/// }
///
/// final class Profile: ManagedObject {
///     @Relationship(inverse: "profile", column: "user_id") var user: User?   // holds the key
/// }
/// // and in User: @Relationship(inverse: "user", deleteRule: .cascade) var profile: Profile?
/// ```
@propertyWrapper
public struct Relationship<Value: RelationshipValue>: RelationshipDeclaration, SlotHolder {
    let inverse: String?
    let deleteRule: DeleteRule
    let column: String?
    let joinTable: String?
    /// Whether a save refuses the object while a to-one relationship points at nothing.
    let required: Bool
    /// A mark used while the model finds this property by reflection.
    @usableFromInline var slot: Int = -1
    @usableFromInline static var isAttribute: Bool { false }

    /// Declares a to-one relationship.
    ///
    /// - Parameters:
    ///   - inverse: the to-many (or to-one) relationship on the other side, if any.
    ///   - deleteRule: what deleting this object does to the related one (default
    ///     `.nullify`: nothing, the other side simply loses this object; for the side of
    ///     a one-to-one relationship without the foreign key, the partner's key becomes
    ///     `NULL`).
    ///   - column: the foreign-key column (default `<snake_case name>_id`). In a
    ///     one-to-one relationship exactly one side names its column: that side's table
    ///     holds the foreign key (give the column a unique constraint).
    ///   - required: whether a save refuses the object while the relationship points at
    ///     nothing (Core Data's non-optional relationship; `ObjectValidationError`, rule
    ///     `.required`).
    public init(inverse: String? = nil, deleteRule: DeleteRule = .nullify, column: String? = nil, required: Bool = false)
    where Value: ExpressibleByNilLiteral {
        self.inverse = inverse
        self.deleteRule = deleteRule
        self.column = column
        self.joinTable = nil
        self.required = required
    }

    /// Declares a to-many relationship: one-to-many when the inverse is a to-one
    /// relationship, many-to-many when the inverse is to-many too.
    ///
    /// - Parameters:
    ///   - inverse: the relationship on the related entity that points back.
    ///   - deleteRule: what deleting this object does to the related ones (default
    ///     `.nullify`: their reference becomes `nil`, or for many-to-many the join rows
    ///     go and they simply lose this object).
    ///   - joinTable: many-to-many only: the join table (default: the two tables' names
    ///     sorted and joined with `_`, such as `posts_tags`). If both sides name it, the
    ///     names must agree.
    ///   - column: many-to-many only: the join-table column holding the related objects'
    ///     keys (default `<snake_case of the related entity's name>_id`, such as
    ///     `tag_id` for `Post.tags`). Name both columns of a relationship between objects
    ///     of one entity (`User.following` / `User.followers`).
    public init(inverse: String, deleteRule: DeleteRule = .nullify, joinTable: String? = nil, column: String? = nil)
    where Value: SetAlgebra {
        self.inverse = inverse
        self.deleteRule = deleteRule
        self.column = column
        self.joinTable = joinTable
        self.required = false
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
            columnName: Value.isToMany ? nil : (column ?? Naming.snakeCase(name) + "_id"), index: index,
            declaredColumn: column, declaredJoinTable: joinTable, isRequired: required)
    }
}

