import Foundation

/// A stored attribute value inside a managed object: `NULL`, or a value of the attribute's
/// scalar type.
///
/// The scalar types the model knows have a case each, so a value is stored, compared,
/// read and encoded without an existential box or a dynamic cast (24 bytes a value, where
/// an optional `any Sendable` takes 32); decimals and scalar types of callers' own are
/// kept in a shared box (`.other`). An attribute only ever holds `NULL` or values of its
/// own scalar type: its decoding and its property's setter make them, `coerce` checks
/// dynamically typed ones.
@usableFromInline
enum StoredValue: Sendable {
    case null
    case string(String)
    case int(Int)
    case int64(Int64)
    case int32(Int32)
    case int16(Int16)
    case bool(Bool)
    case double(Double)
    case float(Float)
    case date(Date)
    case uuid(UUID)
    case data(Data)
    case json(JSONValue)
    /// A decimal, or a value of a caller's own `AttributeScalar` type.
    case other(StoredBox)

    /// The value of a scalar, `NULL` for `nil`. Inlinable, so that a property's setter
    /// picks its case when it is specialized for the property's type.
    @inlinable
    init<Scalar: AttributeScalar>(_ scalar: Scalar?) {
        guard let scalar else {
            self = .null
            return
        }
        self.init(scalar: scalar)
    }

    /// The value of a scalar (never `NULL`).
    @inlinable
    init<Scalar: AttributeScalar>(scalar: Scalar) {
        // Each test compares metatypes; the cast after it only converts the value to the
        // type just matched (folded away where `Scalar` is known).
        if Scalar.self == String.self, let value = scalar as? String {
            self = .string(value)
        } else if Scalar.self == Int.self, let value = scalar as? Int {
            self = .int(value)
        } else if Scalar.self == Int64.self, let value = scalar as? Int64 {
            self = .int64(value)
        } else if Scalar.self == Int32.self, let value = scalar as? Int32 {
            self = .int32(value)
        } else if Scalar.self == Int16.self, let value = scalar as? Int16 {
            self = .int16(value)
        } else if Scalar.self == Bool.self, let value = scalar as? Bool {
            self = .bool(value)
        } else if Scalar.self == Double.self, let value = scalar as? Double {
            self = .double(value)
        } else if Scalar.self == Float.self, let value = scalar as? Float {
            self = .float(value)
        } else if Scalar.self == Date.self, let value = scalar as? Date {
            self = .date(value)
        } else if Scalar.self == UUID.self, let value = scalar as? UUID {
            self = .uuid(value)
        } else if Scalar.self == Data.self, let value = scalar as? Data {
            self = .data(value)
        } else if Scalar.self == JSONValue.self, let value = scalar as? JSONValue {
            self = .json(value)
        } else {
            self = .other(StoredBox(scalar))
        }
    }

    /// Whether this is `NULL`.
    @inlinable
    var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// Whether the value holds a reference (its destruction releases something): text,
    /// bytes, JSON and boxed values do; `NULL`, numbers, booleans, dates and UUIDs do not.
    @inline(__always)
    var holdsReference: Bool {
        switch self {
        case .string, .data, .json, .other: return true
        case .null, .int, .int64, .int32, .int16, .bool, .double, .float, .date, .uuid: return false
        }
    }

    /// The value as `Scalar`: `nil` for `NULL` and for a value of another type (which an
    /// attribute of type `Scalar` never holds). Inlinable: specialized for `Scalar`, only
    /// its own case is tested.
    @inlinable
    func scalar<Scalar>(as type: Scalar.Type) -> Scalar? {
        switch self {
        case .null: return nil
        case .string(let value): return Scalar.self == String.self ? value as? Scalar : nil
        case .int(let value): return Scalar.self == Int.self ? value as? Scalar : nil
        case .int64(let value): return Scalar.self == Int64.self ? value as? Scalar : nil
        case .int32(let value): return Scalar.self == Int32.self ? value as? Scalar : nil
        case .int16(let value): return Scalar.self == Int16.self ? value as? Scalar : nil
        case .bool(let value): return Scalar.self == Bool.self ? value as? Scalar : nil
        case .double(let value): return Scalar.self == Double.self ? value as? Scalar : nil
        case .float(let value): return Scalar.self == Float.self ? value as? Scalar : nil
        case .date(let value): return Scalar.self == Date.self ? value as? Scalar : nil
        case .uuid(let value): return Scalar.self == UUID.self ? value as? Scalar : nil
        case .data(let value): return Scalar.self == Data.self ? value as? Scalar : nil
        case .json(let value): return Scalar.self == JSONValue.self ? value as? Scalar : nil
        case .other(let box): return box.value as? Scalar
        }
    }

    /// The value as an existential (`nil` for `NULL`), for code that works with
    /// dynamically typed values: predicates evaluated in memory, merge reports.
    var anyValue: (any AttributeScalar)? {
        switch self {
        case .null: return nil
        case .string(let value): return value
        case .int(let value): return value
        case .int64(let value): return value
        case .int32(let value): return value
        case .int16(let value): return value
        case .bool(let value): return value
        case .double(let value): return value
        case .float(let value): return value
        case .date(let value): return value
        case .uuid(let value): return value
        case .data(let value): return value
        case .json(let value): return value
        case .other(let box): return box.value
        }
    }
}

extension StoredValue: Equatable {
    /// Values of the same case and equal scalars; `NULL` equals `NULL`. Each operand is
    /// matched in place (matching a tuple of the two would copy both first: a retain and
    /// release of a string per comparison, and saves compare every value they track).
    /// Inlined where it is used, so that an operand read from storage is matched where it
    /// lies rather than copied out for a call.
    @usableFromInline @inline(__always)
    static func == (left: StoredValue, right: StoredValue) -> Bool {
        switch left {
        case .null: return right.isNull
        case .string(let a): if case .string(let b) = right { return a == b }
        case .int(let a): if case .int(let b) = right { return a == b }
        case .int64(let a): if case .int64(let b) = right { return a == b }
        case .int32(let a): if case .int32(let b) = right { return a == b }
        case .int16(let a): if case .int16(let b) = right { return a == b }
        case .bool(let a): if case .bool(let b) = right { return a == b }
        case .double(let a): if case .double(let b) = right { return a == b }
        case .float(let a): if case .float(let b) = right { return a == b }
        case .date(let a): if case .date(let b) = right { return a == b }
        case .uuid(let a): if case .uuid(let b) = right { return a == b }
        case .data(let a): if case .data(let b) = right { return a == b }
        case .json(let a): if case .json(let b) = right { return a == b }
        case .other(let a): if case .other(let b) = right { return a === b || a.isEqual(to: b.value) }
        }
        return false
    }
}

/// A decimal, or a value of a caller's own scalar type, in a `StoredValue`.
@usableFromInline
final class StoredBox: Sendable {
    @usableFromInline let value: any AttributeScalar

    @usableFromInline
    init(_ value: any AttributeScalar) { self.value = value }

    /// Whether `other` is a value of this value's type, equal to it.
    func isEqual(to other: any AttributeScalar) -> Bool {
        func equal<T: AttributeScalar>(_ value: T) -> Bool { (other as? T) == value }
        return equal(value)
    }
}
