import Foundation

/// The storage type of an attribute, with the PostgreSQL column type it maps to.
public enum AttributeType: String, Sendable, CaseIterable {
    /// `String` ↔ `text`.
    case string
    /// `Int16` ↔ `smallint`.
    case int16
    /// `Int32` ↔ `integer`.
    case int32
    /// `Int` / `Int64` ↔ `bigint`.
    case int64
    /// `Double` ↔ `double precision`.
    case double
    /// `Float` ↔ `real`.
    case float
    /// `Decimal` ↔ `numeric`.
    case decimal
    /// `Bool` ↔ `boolean`.
    case bool
    /// `Date` ↔ `timestamptz`.
    case date
    /// `UUID` ↔ `uuid`.
    case uuid
    /// `Data` ↔ `bytea`.
    case binary
    /// `JSONValue` ↔ `jsonb`.
    case json
    /// `[String]` ↔ `text[]`.
    case stringArray
    /// `[Int16]` ↔ `smallint[]`.
    case int16Array
    /// `[Int32]` ↔ `integer[]`.
    case int32Array
    /// `[Int]` / `[Int64]` ↔ `bigint[]`.
    case int64Array
    /// `[Double]` ↔ `double precision[]`.
    case doubleArray
    /// `[Float]` ↔ `real[]`.
    case floatArray
    /// `[Decimal]` ↔ `numeric[]`.
    case decimalArray
    /// `[Bool]` ↔ `boolean[]`.
    case boolArray
    /// `[Date]` ↔ `timestamptz[]`.
    case dateArray
    /// `[UUID]` ↔ `uuid[]`.
    case uuidArray

    /// The type of the elements of an array type (`.string` for `.stringArray`); `nil`
    /// for the other types.
    public var elementType: AttributeType? {
        switch self {
        case .stringArray: return .string
        case .int16Array: return .int16
        case .int32Array: return .int32
        case .int64Array: return .int64
        case .doubleArray: return .double
        case .floatArray: return .float
        case .decimalArray: return .decimal
        case .boolArray: return .bool
        case .dateArray: return .date
        case .uuidArray: return .uuid
        default: return nil
        }
    }

    /// Whether values of the type are arrays (stored as one-dimensional PostgreSQL
    /// arrays of non-`NULL` elements).
    public var isArray: Bool { elementType != nil }

    /// The PostgreSQL type used in casts such as `unnest($1::text[])`.
    public var sqlType: String {
        if let elementType { return elementType.sqlType + "[]" }
        switch self {
        case .string: return "text"
        case .int16: return "smallint"
        case .int32: return "integer"
        case .int64: return "bigint"
        case .double: return "double precision"
        case .float: return "real"
        case .decimal: return "numeric"
        case .bool: return "boolean"
        case .date: return "timestamptz"
        case .uuid: return "uuid"
        case .binary: return "bytea"
        case .json: return "jsonb"
        default: return "text"  // (the array types are answered above)
        }
    }

    /// The `information_schema.columns.udt_name` values a column of this type may have
    /// (an array's is its element type's with a leading `_`: `_text`, `_int8`).
    var acceptedColumnTypes: Set<String> {
        if let elementType { return Set(elementType.acceptedColumnTypes.map { "_" + $0 }) }
        switch self {
        case .string: return ["text", "varchar", "bpchar", "citext", "name"]
        case .int16: return ["int2"]
        case .int32: return ["int4", "int2"]
        case .int64: return ["int8", "int4", "int2"]
        case .double: return ["float8", "float4"]
        case .float: return ["float4"]
        case .decimal: return ["numeric"]
        case .bool: return ["bool"]
        case .date: return ["timestamptz", "timestamp", "date"]
        case .uuid: return ["uuid"]
        case .binary: return ["bytea"]
        case .json: return ["jsonb", "json"]
        default: return []  // (the array types are answered above)
        }
    }
}

/// A type whose values an attribute stores as a scalar: the scalars themselves
/// (``AttributeScalar``), enums by their raw value (``AttributeEnum``), `Codable` values as
/// JSON (``AttributeCodable``). An `@Attribute` property is of such a type or an optional
/// of one.
///
/// Conform through ``AttributeEnum`` or ``AttributeCodable``, which implement the
/// requirements; the library converts with them when a property is read or set and
/// checks stored values with them when rows are fetched.
public protocol AttributeStorable: Sendable, Equatable {
    /// The scalar type the value is stored as (`String` for an enum of `String` raw
    /// values, `JSONValue` for a `Codable` value).
    associatedtype Scalar: AttributeScalar
    /// Makes the value a stored scalar stands for.
    ///
    /// - Parameter storedScalar: the scalar, as read from the database.
    /// - Throws: `PostgresValueError` when the type holds no value for it (`.outOfRange`
    ///   for a raw value no case has, `.invalidText` for JSON that does not decode), with
    ///   a `reason` that does not show the value.
    init(storedScalar: Scalar) throws
    /// The scalar the value is stored as.
    ///
    /// - Throws: `PostgresValueError` (`.unencodable`) when the value has none (a
    ///   `Codable` value whose encoding fails).
    func storedScalar() throws -> Scalar
}

/// A Swift type an attribute can hold: the database layer's value types.
public protocol AttributeScalar: PostgresCodable, AttributeStorable where Scalar == Self {
    /// The storage type.
    static var attributeType: AttributeType { get }
}

extension AttributeScalar {
    /// The scalar itself: every stored scalar is a value of its own type.
    ///
    /// - Parameter storedScalar: the scalar.
    @inlinable
    public init(storedScalar: Self) { self = storedScalar }
    /// Itself.
    @inlinable
    public func storedScalar() -> Self { self }
}

extension String: AttributeScalar {
    /// `.string`.
    public static var attributeType: AttributeType { .string }
}
extension Int: AttributeScalar {
    /// `.int64`.
    public static var attributeType: AttributeType { .int64 }
}
extension Int64: AttributeScalar {
    /// `.int64`.
    public static var attributeType: AttributeType { .int64 }
}
extension Int32: AttributeScalar {
    /// `.int32`.
    public static var attributeType: AttributeType { .int32 }
}
extension Int16: AttributeScalar {
    /// `.int16`.
    public static var attributeType: AttributeType { .int16 }
}
extension Double: AttributeScalar {
    /// `.double`.
    public static var attributeType: AttributeType { .double }
}
extension Float: AttributeScalar {
    /// `.float`.
    public static var attributeType: AttributeType { .float }
}
extension Decimal: AttributeScalar {
    /// `.decimal`.
    public static var attributeType: AttributeType { .decimal }
}
extension Bool: AttributeScalar {
    /// `.bool`.
    public static var attributeType: AttributeType { .bool }
}
extension Date: AttributeScalar {
    /// `.date`.
    public static var attributeType: AttributeType { .date }
}
extension UUID: AttributeScalar {
    /// `.uuid`.
    public static var attributeType: AttributeType { .uuid }
}
extension Data: AttributeScalar {
    /// `.binary`.
    public static var attributeType: AttributeType { .binary }
}
extension JSONValue: AttributeScalar {
    /// `.json`.
    public static var attributeType: AttributeType { .json }
}

/// The type of an `@Attribute` property: an ``AttributeStorable`` type (a scalar, an
/// ``AttributeEnum``, an ``AttributeCodable``) or an optional of one.
public protocol AttributeValue: Sendable, Equatable {
    /// The scalar type underneath.
    associatedtype Scalar: AttributeScalar
    /// Whether `nil` (SQL `NULL`) is allowed.
    static var isOptional: Bool { get }
    /// Wraps a stored scalar (`nil` for `NULL`); `nil` when the type cannot hold it.
    static func fromScalar(_ scalar: Scalar?) -> Self?
    /// The scalar to store, `nil` for `NULL`.
    var scalar: Scalar? { get }
}

extension AttributeScalar {
    /// Not optional.
    public static var isOptional: Bool { false }
    /// The scalar itself; `NULL` cannot be held.
    public static func fromScalar(_ scalar: Self?) -> Self? { scalar }
    /// Itself.
    public var scalar: Self? { self }
}

extension String: AttributeValue { public typealias Scalar = String }
extension Int: AttributeValue { public typealias Scalar = Int }
extension Int64: AttributeValue { public typealias Scalar = Int64 }
extension Int32: AttributeValue { public typealias Scalar = Int32 }
extension Int16: AttributeValue { public typealias Scalar = Int16 }
extension Double: AttributeValue { public typealias Scalar = Double }
extension Float: AttributeValue { public typealias Scalar = Float }
extension Decimal: AttributeValue { public typealias Scalar = Decimal }
extension Bool: AttributeValue { public typealias Scalar = Bool }
extension Date: AttributeValue { public typealias Scalar = Date }
extension UUID: AttributeValue { public typealias Scalar = UUID }
extension Data: AttributeValue { public typealias Scalar = Data }
extension JSONValue: AttributeValue { public typealias Scalar = JSONValue }

extension Optional: AttributeValue where Wrapped: AttributeStorable {
    /// The wrapped type's scalar type.
    public typealias Scalar = Wrapped.Scalar
    /// Optional.
    public static var isOptional: Bool { true }
    /// `.some(nil)` for `NULL`, the wrapped value for a scalar it holds, `nil` for one it
    /// cannot hold.
    @inlinable
    public static func fromScalar(_ scalar: Wrapped.Scalar?) -> Wrapped?? {
        guard let scalar else { return .some(nil) }
        guard let value = try? Wrapped(storedScalar: scalar) else { return nil }
        return .some(value)
    }
    /// The wrapped value's scalar (`nil` for `nil`, and for a value that has none).
    @inlinable
    public var scalar: Wrapped.Scalar? {
        guard let wrapped = self else { return nil }
        return try? wrapped.storedScalar()
    }
}
