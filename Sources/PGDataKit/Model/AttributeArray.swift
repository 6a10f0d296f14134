import Foundation

/// A scalar type whose arrays an attribute can hold, as a one-dimensional PostgreSQL
/// array: `[String]` in a `text[]` column, `[Int]` in `bigint[]`, `[UUID]` in `uuid[]`,
/// and so on for `String`, `Int`, `Int64`, `Int32`, `Int16`, `Double`, `Float`,
/// `Decimal`, `Bool`, `Date` and `UUID`.
///
/// For example:
///
/// ```swift
/// final class Article: ManagedObject {
///     @Attribute var tags: [String] = []   // tags text[] NOT NULL DEFAULT '{}'
///     @Attribute var scores: [Int]?        // scores bigint[]
/// }
///
/// article.tags.append("swift")   // a change of `tags`, saved with the object
/// ```
///
/// The conformances come with the library: nothing is declared on the element type. An
/// array's elements are never `NULL` (`[String?]` is not an attribute type), and its
/// lower bound is not kept (PostgreSQL's `'[0:1]={a,b}'` reads as `["a", "b"]`). A row
/// holding a `NULL` element or a multi-dimensional array fails the fetch that reads it
/// with `ManagedObjectError.invalidStoredValue`, naming the entity, the attribute and the
/// row. Predicates test elements (`ANY tags == 'x'`, `'x' IN tags`, `tags CONTAINS
/// 'x'`, `ALL scores > 0`) and counts (`tags.@count > 2`, 0 for `nil`); they do not
/// order arrays (`tags < 'x'` is a `FetchPredicateError`).
public protocol AttributeArrayElement: AttributeScalar {
    /// The attribute type of an array of this type (`.stringArray` for `String`).
    static var arrayAttributeType: AttributeType { get }
}

extension String: AttributeArrayElement {
    /// `.stringArray`.
    public static var arrayAttributeType: AttributeType { .stringArray }
}
extension Int: AttributeArrayElement {
    /// `.int64Array`.
    public static var arrayAttributeType: AttributeType { .int64Array }
}
extension Int64: AttributeArrayElement {
    /// `.int64Array`.
    public static var arrayAttributeType: AttributeType { .int64Array }
}
extension Int32: AttributeArrayElement {
    /// `.int32Array`.
    public static var arrayAttributeType: AttributeType { .int32Array }
}
extension Int16: AttributeArrayElement {
    /// `.int16Array`.
    public static var arrayAttributeType: AttributeType { .int16Array }
}
extension Double: AttributeArrayElement {
    /// `.doubleArray`.
    public static var arrayAttributeType: AttributeType { .doubleArray }
}
extension Float: AttributeArrayElement {
    /// `.floatArray`.
    public static var arrayAttributeType: AttributeType { .floatArray }
}
extension Decimal: AttributeArrayElement {
    /// `.decimalArray`.
    public static var arrayAttributeType: AttributeType { .decimalArray }
}
extension Bool: AttributeArrayElement {
    /// `.boolArray`.
    public static var arrayAttributeType: AttributeType { .boolArray }
}
extension Date: AttributeArrayElement {
    /// `.dateArray`.
    public static var arrayAttributeType: AttributeType { .dateArray }
}
extension UUID: AttributeArrayElement {
    /// `.uuidArray`.
    public static var arrayAttributeType: AttributeType { .uuidArray }
}

extension Array: AttributeStorable where Element: AttributeArrayElement {}

extension Array: AttributeScalar where Element: AttributeArrayElement {
    /// The element type's array type (`.stringArray` for `[String]`).
    public static var attributeType: AttributeType { Element.arrayAttributeType }
}

extension Array: AttributeValue where Element: AttributeArrayElement {
    /// The array itself.
    public typealias Scalar = [Element]
}

/// An array an attribute holds, seen without its element type: for the code that works
/// with dynamically typed values (predicates in memory, exports, `setValue`, imports).
protocol StoredArray {
    /// The elements, each as its own scalar type.
    var anyElements: [any Sendable] { get }
    /// The elements as stored values.
    var storedElements: [StoredValue] { get }
    /// The number of elements.
    var elementCount: Int { get }
    /// `\[Element].count`, which `#Predicate` reads as `.@count`.
    static var countKeyPath: AnyKeyPath { get }
    /// `\[Element].isEmpty`, which `#Predicate` reads as `.@count == 0`.
    static var isEmptyKeyPath: AnyKeyPath { get }
    /// An array of this type from dynamically typed elements: each one of the element
    /// type, or an integer that fits it (`Int64` for `[Int]`, `Int` for `[Int16]`); `nil`
    /// when one is neither.
    static func coerced(from elements: [Any]) -> Self?
}

extension Array: StoredArray where Element: AttributeArrayElement {
    var anyElements: [any Sendable] { map { $0 } }

    var storedElements: [StoredValue] { map { StoredValue(scalar: $0) } }

    var elementCount: Int { count }

    static var countKeyPath: AnyKeyPath { \[Element].count }

    static var isEmptyKeyPath: AnyKeyPath { \[Element].isEmpty }

    static func coerced(from elements: [Any]) -> [Element]? {
        var result: [Element] = []
        result.reserveCapacity(elements.count)
        for element in elements {
            if let value = element as? Element {
                result.append(value)
            } else if let integer = element as? any BinaryInteger, let value = Self.integer(integer) {
                result.append(value)
            } else {
                return nil
            }
        }
        return result
    }

    /// An integer as an element, when the element type is an integer or number type
    /// that holds it exactly.
    private static func integer(_ integer: any BinaryInteger) -> Element? {
        switch Element.self {
        case is Int.Type: return Int(exactly: integer) as? Element
        case is Int64.Type: return Int64(exactly: integer) as? Element
        case is Int32.Type: return Int32(exactly: integer) as? Element
        case is Int16.Type: return Int16(exactly: integer) as? Element
        case is Double.Type: return Double(exactly: integer) as? Element
        case is Decimal.Type: return Decimal(string: "\(integer)") as? Element
        default: return nil
        }
    }
}
