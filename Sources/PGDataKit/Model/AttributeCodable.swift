import Foundation

/// A `Codable` value an attribute stores as JSON, in a `jsonb` column.
///
/// For example:
///
/// ```swift
/// struct Address: Codable, Equatable, AttributeCodable {
///     var city: String
///     var zip: String
/// }
///
/// final class Customer: ManagedObject {
///     @Attribute var home: Address = Address(city: "", zip: "")
///     @Attribute var work: Address?
/// }
///
/// customer.home.city = "Oslo"   // a change of `home`, saved with the object
/// ```
///
/// The conformance is all there is to write: the requirements of ``AttributeStorable``
/// come with it. The attribute's ``AttributeDescription/type`` is `.json`: the schema,
/// saves, merges and change records see the value's JSON (`JSONValue`), which dynamic
/// access gives too (`value(forKey:)`, dictionaries, export); `setValue(_:forKey:)` and
/// imports take the value itself, or a `JSONValue` or dictionary that decodes into it.
/// Changing the value in place (`customer.home.city = "Oslo"`) sets the property again,
/// so it is a change; setting an equal value is not.
///
/// Values go through Foundation's `JSONEncoder` and `JSONDecoder` with their default
/// strategies (a `Date` is a number of seconds since 2001), except that a NaN or infinite
/// floating-point number is written as the string `"NaN"`, `"Infinity"` or `"-Infinity"`;
/// numbers are held as `Double` (see `JSONValue`), so integers beyond 2^53 lose
/// precision. A value that does not encode (its `encode(to:)` throws, or it nests deeper
/// than `JSONValue.maximumDepth`) is not kept: setting the property to it logs an error,
/// reading the property then gives its default (`nil` when optional), and saving the
/// object throws until the property is set again. A row whose JSON does not decode into
/// the type fails the fetch that reads it with `ManagedObjectError.invalidStoredValue`,
/// naming the entity, the attribute and the row. Predicates cannot compare these
/// attributes with a value (JSON has no order and PostgreSQL's `jsonb` equality is not
/// Swift's): such a predicate is a `FetchPredicateError`; compare with `nil` only.
public protocol AttributeCodable: Codable, AttributeStorable, AttributeValue where Scalar == JSONValue {}

extension AttributeCodable {
    /// Decodes a value from its stored JSON.
    ///
    /// - Parameter storedScalar: the JSON.
    /// - Throws: `PostgresValueError` (`.invalidText`) when the JSON does not decode
    ///   into the type; its `reason` names the coding path, not the value.
    public init(storedScalar: JSONValue) throws {
        self = try AttributeJSON.decode(Self.self, from: storedScalar)
    }

    /// The value's JSON.
    ///
    /// - Throws: `PostgresValueError` (`.unencodable`) when the value does not encode
    ///   (its `encode(to:)` throws, or it nests deeper than `JSONValue.maximumDepth`).
    public func storedScalar() throws -> JSONValue {
        try AttributeJSON.encode(self)
    }

    /// Not optional.
    public static var isOptional: Bool { false }

    /// The value decoded from its JSON; `nil` for `NULL` and for JSON that does not
    /// decode into the type.
    public static func fromScalar(_ scalar: JSONValue?) -> Self? {
        scalar.flatMap { try? Self(storedScalar: $0) }
    }

    /// The value's JSON, `nil` when it does not encode.
    public var scalar: JSONValue? { try? storedScalar() }
}

/// How `AttributeCodable` values become JSON and back.
enum AttributeJSON {
    /// The encoder: Foundation's defaults, with non-finite floating-point numbers as
    /// strings (JSON has no such numbers).
    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return encoder
    }

    /// The decoder matching `makeEncoder()`.
    static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return decoder
    }

    /// A value's JSON.
    ///
    /// - Throws: `PostgresValueError` (`.unencodable`), naming the type and why.
    static func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let data: Data
        do {
            data = try makeEncoder().encode(value)
        } catch {
            throw PostgresValueError(
                code: .unencodable, swiftType: String(describing: T.self), reason: describe(error, encoding: true))
        }
        do {
            return try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            // (What the encoder wrote is JSON: only its depth can be refused.)
            throw PostgresValueError(
                code: .unencodable, swiftType: String(describing: T.self),
                reason: "it nests deeper than \(JSONValue.maximumDepth) levels (JSONValue.maximumDepth)")
        }
    }

    /// A value decoded from JSON.
    ///
    /// - Throws: `PostgresValueError` (`.invalidText`), naming the type and the coding
    ///   path that failed.
    static func decode<T: Decodable>(_ type: T.Type, from json: JSONValue) throws -> T {
        do {
            return try makeDecoder().decode(T.self, from: Data(json.jsonText.utf8))
        } catch {
            throw PostgresValueError(
                code: .invalidText, swiftType: String(describing: T.self), reason: describe(error, encoding: false))
        }
    }

    /// Why encoding or decoding failed, without a value: the kind of failure and the
    /// coding path (Foundation's own descriptions may quote the value).
    static func describe(_ error: any Error, encoding: Bool) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.isEmpty ? "the top level" : codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
                .joined(separator: ".")
        }
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "the JSON has no \(path(context.codingPath + [key]))"
        case DecodingError.typeMismatch(let type, let context):
            return "the JSON at \(path(context.codingPath)) is not \(type)"
        case DecodingError.valueNotFound(let type, let context):
            return "the JSON at \(path(context.codingPath)) is null, not \(type)"
        case DecodingError.dataCorrupted(let context):
            return "the JSON at \(path(context.codingPath)) is not a valid value"
        case EncodingError.invalidValue(_, let context):
            return "the value at \(path(context.codingPath)) does not encode as JSON"
        default:
            return encoding ? "its encode(to:) threw \(type(of: error))" : "its init(from:) threw \(type(of: error))"
        }
    }
}
