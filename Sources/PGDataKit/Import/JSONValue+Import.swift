import Foundation

/// Reading imported records: members, key paths and typed values.
///
/// For example:
///
/// ```swift
/// let record: JSONValue = ["PostID": "p1", "author": ["id": 7, "name": "Ada"]]
/// record["PostID"]?.stringValue            // "p1"
/// record.value(atKeyPath: "author.id")     // .number(7)
/// record["missing"]                        // nil
/// ```
extension JSONValue {
    /// The member of an object with this key; `nil` when the value is not an object or
    /// has no such member (a member whose value is `null` is `.null`).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return Self.member(key, of: members)
    }

    /// The member with this key: an object of a few members (an imported record, usually)
    /// is searched key by key, which costs less than hashing the key once; a larger one
    /// is looked up. Keys match as `String`s do, by canonical equivalence, either way.
    static func member(_ key: String, of members: [String: JSONValue]) -> JSONValue? {
        guard members.count <= 8 else { return members[key] }
        var index = members.startIndex
        while index != members.endIndex {
            if members.keys[index] == key { return members.values[index] }
            members.formIndex(after: &index)
        }
        return nil
    }

    /// The element of an array at this index; `nil` when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// The value at a dotted key path through nested objects (`"author.id"`); `nil` when
    /// a step is missing. `"self"` is the value itself.
    public func value(atKeyPath keyPath: String) -> JSONValue? {
        RemoteKeyPath(keyPath).value(in: self)
    }

    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number as an `Int`, if this is a whole number that fits.
    public var intValue: Int? {
        if case .number(let value) = self { return Int(exactly: value) }
        return nil
    }

    /// The number, if this is a number.
    public var doubleValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The boolean, if this is one.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// Whether this is `null`. (A pattern match: `==` compares deeply, and imports ask
    /// this of every key and value.)
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The kind of value, for messages: `string`, `number`, `boolean`, `object`,
    /// `array` or `null`.
    var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// Where a value sits in a record: a dotted path through nested objects, or `self` for
/// the record itself (bare key values).
struct RemoteKeyPath: Hashable, Sendable, CustomStringConvertible {
    /// The components; empty for `self`.
    let components: [String]
    /// The path as written.
    let description: String

    init(_ path: String) {
        self.description = path
        self.components = path == "self" ? [] : path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    /// Whether the path is the record itself.
    var isSelf: Bool { components.isEmpty }

    /// The value at the path; `nil` when a step is missing.
    func value(in record: JSONValue) -> JSONValue? {
        if components.count == 1 {  // (a plain member name: the common case)
            guard case .object(let members) = record else { return nil }
            return JSONValue.member(components[0], of: members)
        }
        var current = record
        for component in components {
            guard case .object(let members) = current, let next = JSONValue.member(component, of: members) else {
                return nil
            }
            current = next
        }
        return current
    }
}
