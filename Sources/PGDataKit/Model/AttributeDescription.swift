import Foundation

/// What the model knows about one attribute: names, type, optionality, uniqueness, and
/// how its values are read and written.
public final class AttributeDescription: Sendable, CustomStringConvertible {
    /// The Swift property name.
    public let name: String
    /// The column name.
    public let columnName: String
    /// The storage type.
    public let type: AttributeType
    /// Whether `nil` is allowed.
    public let isOptional: Bool
    /// Whether the attribute alone is a unique key.
    public let isUnique: Bool
    /// The Swift type, for messages (`String?`, `Int`).
    public let swiftTypeName: String
    /// Position in the object's value storage.
    let index: Int
    /// `Entity.attribute`, for errors.
    let qualifiedName: String
    let defaultValue: StoredValue
    let decode: @Sendable (PostgresCell) throws -> StoredValue
    /// The fetch fast path for this attribute's scalar type.
    let decoding: AttributeDecoding
    let encode: @Sendable (StoredValue) throws -> (any PostgresEncodable)?
    let encodeArray: @Sendable ([StoredValue]) throws -> any PostgresEncodable
    /// Converts a dynamically typed value to storage, or `nil` when the type is wrong.
    let coerce: @Sendable (Any?) -> StoredValue?
    /// For an attribute whose Swift type holds fewer values than its column (an
    /// `AttributeEnum`, an `AttributeCodable`): why a stored value is not one of them
    /// (`nil` when it is, and for `NULL`). `nil` for the other attributes, whose type
    /// holds every value its decoding makes.
    let storedValueProblem: (@Sendable (StoredValue) -> String?)?
    /// The rules a value must keep for a save (`@Attribute(validate:)`), in declaration
    /// order.
    let checks: [AttributeCheck]

    init(
        name: String, columnName: String, type: AttributeType, isOptional: Bool, isUnique: Bool,
        swiftTypeName: String, index: Int, qualifiedName: String, defaultValue: StoredValue, decoding: AttributeDecoding,
        decode: @escaping @Sendable (PostgresCell) throws -> StoredValue,
        encode: @escaping @Sendable (StoredValue) throws -> (any PostgresEncodable)?,
        encodeArray: @escaping @Sendable ([StoredValue]) throws -> any PostgresEncodable,
        coerce: @escaping @Sendable (Any?) -> StoredValue?,
        storedValueProblem: (@Sendable (StoredValue) -> String?)? = nil, checks: [AttributeCheck] = []
    ) {
        self.name = name
        self.columnName = columnName
        self.type = type
        self.isOptional = isOptional
        self.isUnique = isUnique
        self.swiftTypeName = swiftTypeName
        self.index = index
        self.qualifiedName = qualifiedName
        self.defaultValue = defaultValue
        self.decode = decode
        self.decoding = decoding
        self.encode = encode
        self.encodeArray = encodeArray
        self.coerce = coerce
        self.storedValueProblem = storedValueProblem
        self.checks = checks
    }

    /// The rules `value` breaks, in declaration order (none for most attributes).
    func brokenChecks(of value: StoredValue) -> [AttributeCheck] {
        checks.filter { !$0.passes(value) }
    }

    /// `name: Type (column)`.
    public var description: String { "\(name): \(swiftTypeName) (\(columnName) \(type.sqlType))" }

    /// One column of a statement as an array parameter, read from rows of values (each
    /// row's value of this attribute at `index`): the rows at `order` (all of them, in
    /// their order, when `nil`). Strings and integers are read in place and written
    /// straight into a binary array; other types go through `encodeArray`.
    ///
    /// - Throws: `PostgresValueError` naming the attribute as `Entity.attribute` (in
    ///   `column`).
    func encodeColumn(rows: [AttributeValues], order: [Int]? = nil) throws -> any PostgresEncodable {
        let index = self.index
        let scalars = try encodeScalars(count: order?.count ?? rows.count) { rows[order?[$0] ?? $0][index] }
        return try scalars ?? encodeArray((order ?? Array(rows.indices)).map { rows[$0][index] })
    }

    /// One column of a statement as an array parameter: the values at `order` (all of
    /// them, in their order, when `nil`). Strings and integers are written straight into
    /// a binary array; other types go through `encodeArray`.
    ///
    /// - Throws: `PostgresValueError` naming the attribute as `Entity.attribute` (in
    ///   `column`).
    func encodeColumn(_ values: [StoredValue], order: [Int]? = nil) throws -> any PostgresEncodable {
        let scalars = try encodeScalars(count: order?.count ?? values.count) { values[order?[$0] ?? $0] }
        return try scalars ?? encodeArray(order.map { $0.map { values[$0] } } ?? values)
    }

    /// One value as a statement parameter's text, `nil` for `NULL`: what one element of
    /// `encodeColumn`'s array holds, for a statement that casts the parameter to the
    /// column's type (`$3::bigint`). Strings are checked and sent as they are, integers
    /// as their digits, other types as their `postgresText()`.
    ///
    /// - Throws: `PostgresValueError` naming the attribute as `Entity.attribute` (in
    ///   `column`).
    func encodeText(_ value: StoredValue) throws -> String? {
        do {
            let integers = type == .int64 && (decoding == .int || decoding == .int64)
            switch value {
            case .string(let text) where decoding == .string && type == .string: return try text.postgresText()
            case .int(let integer) where integers: return String(integer)
            case .int64(let integer) where integers: return String(integer)
            default: return try encode(value)?.postgresText()
            }
        } catch var error as PostgresValueError {
            error.column = qualifiedName
            throw error
        }
    }

    /// A string or integer column written straight into a binary array (`text[]`,
    /// `bigint[]`), `nil` for the other types. `value(position)` hands the stored value at
    /// each position in turn (in place: no copy of the value). Only attributes whose
    /// column type is that of the array (`text`, `bigint`) take this way: statements cast
    /// the parameter to the attribute's type, and binary data must be of the parameter's
    /// element type.
    private func encodeScalars(count: Int, value: (Int) -> StoredValue) throws -> (any PostgresEncodable)? {
        switch decoding {
        case .string where type == .string:
            var array = BinaryArrayBuilder(element: .text, capacity: count)
            do {
                for position in 0..<count {
                    if case .string(let text) = value(position) {
                        try array.append(text)
                    } else {
                        array.appendNull()
                    }
                }
            } catch var error as PostgresValueError {
                error.column = qualifiedName
                throw error
            }
            return BinaryArray<String>(bytes: array.finish())
        case .int where type == .int64, .int64 where type == .int64:
            var array = BinaryArrayBuilder(element: .int8, capacity: count)
            for position in 0..<count {
                switch value(position) {
                case .int(let integer): array.append(Int64(integer))
                case .int64(let integer): array.append(integer)
                default: array.appendNull()
                }
            }
            return BinaryArray<Int64>(bytes: array.finish())
        default:
            return nil
        }
    }
}

/// Implemented by `Attribute` so the model can read declarations through reflection.
protocol AttributeDeclaration {
    func describe(name: String, index: Int, entityName: String) -> AttributeDescription
}

enum AttributeCoding {
    /// Encodes a column of stored values as one array parameter; the common types get
    /// closures compiled for them (a save encodes every value it writes).
    static func arrayEncoding<Scalar: AttributeScalar>(_ scalar: Scalar.Type, label: String)
        -> @Sendable ([StoredValue]) -> any PostgresEncodable
    {
        switch scalar {
        case is String.Type: return { AttributeValueArray(values: scalars($0, as: String.self), attribute: label) }
        case is Int.Type: return { AttributeValueArray(values: scalars($0, as: Int.self), attribute: label) }
        case is Int64.Type: return { AttributeValueArray(values: scalars($0, as: Int64.self), attribute: label) }
        default: return { AttributeValueArray(values: scalars($0, as: Scalar.self), attribute: label) }
        }
    }

    /// The stored values as their scalar type (`nil` for `NULL` and for a value of
    /// another type, which the model never stores).
    @inline(__always)
    private static func scalars<T>(_ values: [StoredValue], as type: T.Type) -> [T?] {
        var result: [T?] = []
        result.reserveCapacity(values.count)
        for value in values { result.append(value.scalar(as: T.self)) }
        return result
    }

    static func make<Value: AttributeValue>(
        _ type: Value.Type, name: String, column: String?, unique: Bool, index: Int,
        defaultValue: Value?, entityName: String, rules: [AttributeRule<Value>] = []
    ) -> AttributeDescription {
        let label = "\(entityName).\(name)"
        typealias Scalar = Value.Scalar
        let swiftTypeName = Self.typeName(Value.self)
        let scalarCoerce = coercion(Value.self)
        let narrowing = AttributeNarrowing.of(Value.self)
        let coerce: @Sendable (Any?) -> StoredValue?
        if let narrowing {
            coerce = { value in narrowing.coerce(value, isOptional: Value.isOptional, scalar: scalarCoerce) }
        } else {
            coerce = scalarCoerce
        }
        return AttributeDescription(
            name: name, columnName: column ?? Naming.snakeCase(name), type: Scalar.attributeType,
            isOptional: Value.isOptional, isUnique: unique, swiftTypeName: swiftTypeName,
            index: index, qualifiedName: label, defaultValue: StoredValue(defaultValue?.scalar), decoding: AttributeDecoding(Scalar.self),
            decode: { cell in
                if cell.isNull { return .null }
                return StoredValue(scalar: try Scalar.decode(from: cell))
            },
            encode: { stored in stored.scalar(as: Scalar.self) },
            encodeArray: arrayEncoding(Scalar.self, label: label),
            coerce: coerce, storedValueProblem: narrowing?.problem, checks: rules.map(AttributeCheck.init))
    }

    /// The Swift type as written in a declaration, for messages: `Int?`, `[String]`,
    /// `[Int16]?`.
    static func typeName<Value>(_ type: Value.Type) -> String {
        var name = String(describing: Value.self)
        var optional = false
        if name.hasPrefix("Optional<"), name.hasSuffix(">") {
            name = String(name.dropFirst("Optional<".count).dropLast())
            optional = true
        }
        if name.hasPrefix("Array<"), name.hasSuffix(">") { name = "[" + name.dropFirst("Array<".count).dropLast() + "]" }
        return name + (optional ? "?" : "")
    }

    /// Converts a dynamically typed value to a stored value of `Value`'s scalar type, or
    /// `nil` when the type is wrong; integers convert between widths when they fit.
    private static func coercion<Value: AttributeValue>(_ type: Value.Type) -> @Sendable (Any?) -> StoredValue? {
        typealias Scalar = Value.Scalar
        return { value in
            guard let value else { return Value.isOptional ? .null : nil }
            if let scalar = value as? Scalar { return StoredValue(scalar: scalar) }
            if let optional = value as? Scalar? {
                return optional.map { StoredValue(scalar: $0) } ?? (Value.isOptional ? .null : nil)
            }
            // Arrays of other element types (`[Int64]` for `[Int]`, `[Any]`) convert
            // element by element.
            if Scalar.attributeType.isArray, let arrayType = Scalar.self as? any StoredArray.Type {
                guard let elements = value as? [Any] else { return nil }
                return arrayType.coerced(from: elements).flatMap { $0 as? Scalar }.map { StoredValue(scalar: $0) }
            }
            // Integers convert between widths when the value fits.
            if let integer = value as? any BinaryInteger {
                switch Scalar.attributeType {
                case .int64: return Int(exactly: integer).flatMap { $0 as? Scalar }.map { StoredValue(scalar: $0) }
                        ?? Int64(exactly: integer).flatMap { $0 as? Scalar }.map { StoredValue(scalar: $0) }
                case .int32: return Int32(exactly: integer).flatMap { $0 as? Scalar }.map { StoredValue(scalar: $0) }
                case .int16: return Int16(exactly: integer).flatMap { $0 as? Scalar }.map { StoredValue(scalar: $0) }
                case .double: return Double(exactly: integer).flatMap { $0 as? Scalar }.map { StoredValue(scalar: $0) }
                case .decimal: return (Decimal(string: "\(integer)") as? Scalar).map { StoredValue(scalar: $0) }
                default: return nil
                }
            }
            return nil
        }
    }
}

/// One attribute's values in a save statement: sent as the array of its scalars; when a
/// value cannot be encoded, the error names the attribute as `Entity.attribute` (in
/// `PostgresValueError.column`), so a failed save says which property to fix.
struct AttributeValueArray<Scalar: PostgresEncodable>: PostgresEncodable {
    let values: [Scalar?]
    /// `Entity.attribute`.
    let attribute: String

    static var postgresType: PostgresType { [Scalar?].postgresType }

    func postgresText() throws -> String? {
        do {
            return try values.postgresText()
        } catch var error as PostgresValueError {
            error.column = attribute
            throw error
        }
    }
}
