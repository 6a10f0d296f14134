import Foundation

/// Declares a stored attribute of a `ManagedObject` subclass.
///
/// The property name is the attribute name; its column is the snake_case of the name
/// unless `column:` says otherwise. Optional types allow `NULL`; other types need a
/// default value.
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
/// ```
///
/// Reading and writing go through the object's context, which records changes for
/// `save()`. Objects are confined to their context's queue (checked in debug builds).
@propertyWrapper
public struct Attribute<Value: AttributeValue>: AttributeDeclaration, SlotHolder {
    @usableFromInline let defaultValue: Value?
    let column: String?
    let unique: Bool
    /// The rules a value must keep for a save (`validate:`); `nil` for none, so an
    /// attribute without rules costs its object no reference to count.
    let rules: [AttributeRule<Value>]?
    /// A mark used while the model finds this property by reflection.
    @usableFromInline var slot: Int = -1
    @usableFromInline static var isAttribute: Bool { true }

    /// Declares an attribute with a default value.
    ///
    /// - Parameters:
    ///   - wrappedValue: the value of a new object.
    ///   - column: the column name (default: snake_case of the property name).
    ///   - unique: whether the attribute alone is a unique key (a unique constraint must
    ///     exist in the database).
    ///   - validate: rules a value must keep for a save to go ahead (`AttributeRule`):
    ///     `save()` checks them before it sends anything.
    public init(
        wrappedValue: Value, column: String? = nil, unique: Bool = false, validate: [AttributeRule<Value>]? = nil
    ) {
        self.defaultValue = wrappedValue
        self.column = column
        self.unique = unique
        self.rules = validate
    }

    /// Declares an optional attribute, `nil` by default.
    ///
    /// - Parameters:
    ///   - column: the column name (default: snake_case of the property name).
    ///   - unique: whether the attribute alone is a unique key.
    ///   - validate: rules a value must keep for a save to go ahead (`AttributeRule`;
    ///     `.required` for a value that must be set before the save).
    public init(column: String? = nil, unique: Bool = false, validate: [AttributeRule<Value>]? = nil)
    where Value: ExpressibleByNilLiteral {
        self.defaultValue = nil
        self.column = column
        self.unique = unique
        self.rules = validate
    }

    /// Not available: `@Attribute` works only inside `ManagedObject` subclasses.
    @available(*, unavailable, message: "@Attribute is only for properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { preconditionFailure("@Attribute is only for properties of ManagedObject subclasses") }
        // swiftlint:disable:next unused_setter_value
        set { preconditionFailure("@Attribute is only for properties of ManagedObject subclasses") }
    }

    /// Reads and writes the attribute through the object's storage.
    @inlinable
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Attribute<Value>>
    ) -> Value {
        get {
            let slot = ManagedObject.slot(of: object, storageKeyPath)
            if let value = Value.fromScalar(object.storedScalar(at: slot, as: Value.Scalar.self)) { return value }
            // A non-optional attribute read before it was ever set holds its default; so
            // does an attribute whose value did not encode (`AttributeCodable`; fetches
            // refuse stored values the type cannot hold), or `nil` when it is optional.
            return object[keyPath: storageKeyPath].defaultValue ?? Value.fromScalar(nil)
                ?? object.missingValue(Value.self, slot: slot)
        }
        set {
            let slot = ManagedObject.slot(of: object, storageKeyPath)
            if Value.Scalar.self == JSONValue.self && Value.self != JSONValue.self && Value.self != JSONValue?.self {
                // An `AttributeCodable` value (or an optional one): encoded, which may fail.
                object.setStoredCodable(newValue, at: slot)
            } else if Value.Scalar.self == JSONValue.self {
                // Handed over, not copied: a value too deep to keep goes to the object's
                // keeper, which must end up holding its last reference.
                var scalar = (consume newValue).scalar
                object.setStoredJSONValue(&scalar, at: slot)
            } else {
                object.setStoredValue(StoredValue(newValue.scalar), at: slot)
            }
        }
    }

    func describe(name: String, index: Int, entityName: String) -> AttributeDescription {
        AttributeCoding.make(
            Value.self, name: name, column: column, unique: unique, index: index,
            defaultValue: defaultValue, entityName: entityName, rules: rules ?? [])
    }
}
