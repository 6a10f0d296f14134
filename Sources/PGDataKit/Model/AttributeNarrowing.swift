import Foundation

/// What the model needs of an attribute whose Swift type holds fewer values than its
/// scalar type (an `AttributeEnum`: the raw values of its cases; an `AttributeCodable`:
/// the JSON that decodes into it): the check of stored values (fetches, merges and
/// conflict reads refuse a value the type cannot hold) and the conversion of dynamically
/// typed values (`setValue(_:forKey:)`, imports), which takes the type itself as well as
/// its scalars.
struct AttributeNarrowing: Sendable {
    /// Why a stored value is not one the type holds; `nil` when it is, and for `NULL`.
    let problem: @Sendable (StoredValue) -> String?
    /// The stored value of a value of the type itself (or of an optional of it, `NULL`
    /// for `nil`); `.some(nil)` when it has none (it does not encode); `nil` when the
    /// value is not of the type.
    let storedValueOfTyped: @Sendable (Any) -> StoredValue??
    /// Whether Foundation JSON objects (dictionaries and arrays) are taken, as JSON.
    let takesJSONObjects: Bool

    /// The narrowing of `Value` (an `AttributeStorable` type or an optional of one);
    /// `nil` for a scalar, whose type holds every value of its column.
    static func of<Value: AttributeValue>(_ type: Value.Type) -> AttributeNarrowing? {
        let base: any AttributeStorable.Type
        if let storable = Value.self as? any AttributeStorable.Type {
            base = storable
        } else if let optional = Value.self as? any OptionalOfStorable.Type {
            base = optional.wrappedStorableType
        } else {
            return nil
        }
        if base is any AttributeScalar.Type { return nil }
        return make(base)
    }

    private static func make<Base: AttributeStorable>(_ base: Base.Type) -> AttributeNarrowing {
        AttributeNarrowing(
            problem: { stored in
                guard let scalar = stored.scalar(as: Base.Scalar.self) else { return nil }
                do {
                    _ = try Base(storedScalar: scalar)
                    return nil
                } catch {
                    return reason(error)
                }
            },
            storedValueOfTyped: { value in
                guard let typed = value as? Base? else { return nil }
                guard let typed else { return .some(.null) }
                return .some(try? StoredValue(scalar: typed.storedScalar()))
            },
            takesJSONObjects: Base.Scalar.self == JSONValue.self)
    }

    /// Why a conversion failed, without the value.
    static func reason(_ error: any Error) -> String {
        guard let error = error as? PostgresValueError else { return "\(type(of: error)) was thrown" }
        return error.reason ?? error.message
    }

    /// A dynamically typed value as a stored value of the attribute, or `nil` when the
    /// type is wrong or the value is not one the type holds.
    ///
    /// - Parameters:
    ///   - value: a value of the type, an optional of it, or a scalar (a raw value,
    ///     JSON); for a `Codable` type also a Foundation JSON object.
    ///   - isOptional: whether the attribute takes `nil`.
    ///   - scalar: the conversion of scalars (the attribute's scalar type's).
    func coerce(_ value: Any?, isOptional: Bool, scalar: (Any?) -> StoredValue?) -> StoredValue? {
        guard let value else { return isOptional ? .null : nil }
        if let typed = storedValueOfTyped(value) {
            guard let stored = typed, isOptional || !stored.isNull else { return nil }
            return stored
        }
        var candidate = value
        if takesJSONObjects, !(value is JSONValue), JSONSerialization.isValidJSONObject(value) {
            guard let data = try? JSONSerialization.data(withJSONObject: value),
                let json = try? JSONDecoder().decode(JSONValue.self, from: data)
            else { return nil }
            candidate = json
        }
        guard let stored = scalar(candidate), problem(stored) == nil else { return nil }
        return stored
    }
}

/// An optional of an `AttributeStorable` type, which names the wrapped type.
protocol OptionalOfStorable {
    /// The wrapped type.
    static var wrappedStorableType: any AttributeStorable.Type { get }
}

extension Optional: OptionalOfStorable where Wrapped: AttributeStorable {
    static var wrappedStorableType: any AttributeStorable.Type { Wrapped.self }
}
