import Foundation

/// A JSON document, stored in `jsonb` (or `json`) columns.
///
/// For example:
///
/// ```swift
/// let settings: JSONValue = ["theme": "dark", "fontSize": 14, "tags": ["a", "b"]]
/// try connection.execute("UPDATE users SET settings = $1 WHERE id = $2", [settings, id])
/// ```
///
/// Numbers are `Double`: integers beyond 2^53 lose precision, as in JavaScript. `jsonb`
/// does not keep key order or duplicate keys; neither does this type.
///
/// Nesting: comparing, hashing and `jsonText` never recurse, however deep a value is.
/// Storing, encoding and decoding stop at `maximumDepth` (512) levels with a typed error
/// (`PostgresValueError`, `EncodingError`, `DecodingError`, an import's malformed value,
/// `setValue(_:forKey:)`'s type mismatch), so the library never builds or keeps a deeper
/// value. A typed property cannot throw: set to a deeper value, it logs an error and
/// stores a stand-in one level deeper than the limit instead, so the object's save fails
/// with that error until the property is set again (the value itself is held aside and
/// taken apart level by level when the object goes). Swift itself releases a nested enum value recursively: a value you build tens
/// of thousands of levels deep exhausts the stack when your code releases it; release
/// such a value with `dismantle(_:)`.
public enum JSONValue: Sendable, Hashable, Codable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])

    /// How deeply arrays and objects may nest (the depth of `[[1]]` is 2).
    public static let maximumDepth = 512

    /// Decodes any JSON value.
    ///
    /// - Throws: `DecodingError.dataCorrupted` for values nested deeper than
    ///   `maximumDepth`.
    public init(from decoder: any Decoder) throws {
        guard decoder.codingPath.count <= Self.maximumDepth else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "JSON nested deeper than \(Self.maximumDepth) levels"))
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value as it is.
    ///
    /// - Throws: `EncodingError.invalidValue` for values nested deeper than
    ///   `maximumDepth`.
    public func encode(to encoder: any Encoder) throws {
        guard encoder.codingPath.count <= Self.maximumDepth else {
            throw EncodingError.invalidValue(
                JSONValue.null, .init(codingPath: encoder.codingPath, debugDescription: "JSON nested deeper than \(Self.maximumDepth) levels"))
        }
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Parses JSON text.
    ///
    /// - Throws: `DecodingError` when the text is not JSON.
    public init(parsing text: String) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// Compact JSON text with sorted keys; a NaN or infinite number is written `null`
    /// (`postgresText()` refuses such values instead). Written with a worklist, not
    /// recursion.
    public var jsonText: String {
        enum Step {
            case value(JSONValue)
            case text(String)
        }
        var text = ""
        var pending: [Step] = [.value(self)]
        while let step = pending.popLast() {
            switch step {
            case .text(let literal): text += literal
            case .value(.null): text += "null"
            case .value(.bool(let value)): text += value ? "true" : "false"
            case .value(.number(let value)):
                if value.isFinite, value == value.rounded(), abs(value) < 1e15 {
                    text += String(Int64(value))
                } else {
                    text += value.isFinite ? value.description : "null"
                }
            case .value(.string(let value)): text += JSONValue.quote(value)
            case .value(.array(let values)):
                text += "["
                pending.append(.text("]"))
                for (index, value) in values.enumerated().reversed() {
                    pending.append(.value(value))
                    if index > 0 { pending.append(.text(",")) }
                }
            case .value(.object(let members)):
                text += "{"
                pending.append(.text("}"))
                for (index, key) in members.keys.sorted().enumerated().reversed() {
                    pending.append(.value(members[key] ?? .null))
                    pending.append(.text(JSONValue.quote(key) + ":"))
                    if index > 0 { pending.append(.text(",")) }
                }
            }
        }
        return text
    }

    /// Releases a value level by level, with a worklist, and leaves `.null`: for values
    /// nested deeper than Swift can release recursively (tens of thousands of levels).
    ///
    /// ```swift
    /// var deep = JSONValue.null
    /// for _ in 0..<1_000_000 { deep = [deep] }
    /// JSONValue.dismantle(&deep)   // `deep = .null` would exhaust the stack
    /// ```
    public static func dismantle(_ value: inout JSONValue) {
        var pending: [JSONValue] = []
        switch value {
        case .array(let values): pending = values
        case .object(let members): pending = Array(members.values)
        case .null, .bool, .number, .string: return
        }
        value = .null
        while var next = pending.popLast() {
            switch next {
            case .array(let values): pending.append(contentsOf: values)
            case .object(let members): pending.append(contentsOf: members.values)
            case .null, .bool, .number, .string: break
            }
            next = .null
        }
    }

    /// Equal structure and leaves (numbers by `==`, strings by Swift's `==`, objects
    /// whatever their key order), compared with a worklist, not recursion.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        var pending = [(lhs, rhs)]
        while let pair = pending.popLast() {
            switch pair {
            case (.null, .null): continue
            case (.bool(let a), .bool(let b)): if a != b { return false }
            case (.number(let a), .number(let b)): if a != b { return false }
            case (.string(let a), .string(let b)): if a != b { return false }
            case (.array(let a), .array(let b)):
                guard a.count == b.count else { return false }
                pending.append(contentsOf: zip(a, b))
            case (.object(let a), .object(let b)):
                guard a.count == b.count else { return false }
                for (key, value) in a {
                    guard let other = b[key] else { return false }
                    pending.append((value, other))
                }
            default: return false
            }
        }
        return true
    }

    /// Hashes the structure and leaves (object keys in sorted order), with a worklist.
    public func hash(into hasher: inout Hasher) {
        var pending = [self]
        while let value = pending.popLast() {
            switch value {
            case .null:
                hasher.combine(0)
            case .bool(let flag):
                hasher.combine(1)
                hasher.combine(flag)
            case .number(let number):
                hasher.combine(2)
                hasher.combine(number)
            case .string(let text):
                hasher.combine(3)
                hasher.combine(text)
            case .array(let values):
                hasher.combine(4)
                hasher.combine(values.count)
                pending.append(contentsOf: values.reversed())
            case .object(let members):
                hasher.combine(5)
                hasher.combine(members.count)
                for key in members.keys.sorted().reversed() {
                    hasher.combine(key)
                    pending.append(members[key] ?? .null)
                }
            }
        }
    }

    private static func quote(_ string: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(string.utf8.count + 2)
        appendQuoted(string, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `string` as a JSON string to `bytes`: `"` and `\` escaped, `\n`, `\r`
    /// and `\t` by name, other control characters as `\u00XX`, everything else as its
    /// own UTF-8 bytes (byte by byte: every byte JSON escapes is ASCII, and a multi-byte
    /// character's bytes are never below 0x80). What `jsonText` writes for a string, also
    /// for writers of JSON bytes (change records) that make no `String` per value.
    package static func appendQuoted(_ string: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        // A string with nothing to escape (a name, a key: the common case) is copied
        // whole; byte by byte cost about four times as much.
        let copied = string.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                return false
            }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copied == true {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        let hexDigits: StaticString = "0123456789abcdef"
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case UInt8(ascii: "\n"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "n"))
            case UInt8(ascii: "\r"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "r"))
            case UInt8(ascii: "\t"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "t"))
            case ..<0x20:
                for escaped in "\\u00".utf8 { bytes.append(escaped) }
                hexDigits.withUTF8Buffer { digits in
                    bytes.append(digits[Int(byte >> 4)])
                    bytes.append(digits[Int(byte & 0xF)])
                }
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSONValue: PostgresCodable {
    /// Sent as `jsonb`.
    public static var postgresType: PostgresType { .jsonb }

    /// The JSON text.
    ///
    /// - Throws: `PostgresValueError` when a number is NaN or infinite (JSON has no such
    ///   numbers, and writing `null` instead would not read back as what was saved), or
    ///   a string or key holds NUL (`.containsNUL`: `jsonb` cannot hold U+0000, and the
    ///   server would refuse the whole statement).
    public func postgresText() throws -> String? {
        if let problem = unencodable {
            throw PostgresValueError(code: problem.code, swiftType: "JSONValue", reason: problem.reason)
        }
        return jsonText
    }

    /// Why the value cannot be stored, if it cannot (checked with a worklist).
    private var unencodable: (code: PostgresValueError.Code, reason: String?)? {
        var pending: [(value: JSONValue, depth: Int)] = [(self, 0)]
        while let (value, depth) = pending.popLast() {
            switch value {
            case .number(let number):
                if !number.isFinite {
                    return (.unencodable, "it holds a number that is NaN or infinite, which JSON cannot represent")
                }
            case .string(let text): if text.utf8.contains(0) { return (.containsNUL, nil) }
            case .array(let values):
                guard depth < Self.maximumDepth else { return Self.tooDeep }
                pending.append(contentsOf: values.lazy.map { ($0, depth + 1) })
            case .object(let members):
                guard depth < Self.maximumDepth else { return Self.tooDeep }
                if members.keys.contains(where: { $0.utf8.contains(0) }) { return (.containsNUL, nil) }
                pending.append(contentsOf: members.values.lazy.map { ($0, depth + 1) })
            case .null, .bool: break
            }
        }
        return nil
    }

    /// Whether arrays and objects nest deeper than `maximumDepth` (a worklist that stops
    /// at the first such level; every other value is visited once).
    package var nestsTooDeep: Bool {
        var pending: [(value: JSONValue, depth: Int)] = [(self, 0)]
        while let (value, depth) = pending.popLast() {
            switch value {
            case .array(let values):
                guard depth < Self.maximumDepth else { return true }
                pending.append(contentsOf: values.lazy.map { ($0, depth + 1) })
            case .object(let members):
                guard depth < Self.maximumDepth else { return true }
                pending.append(contentsOf: members.values.lazy.map { ($0, depth + 1) })
            case .null, .bool, .number, .string: break
            }
        }
        return false
    }

    /// What an object keeps instead of a value that nests deeper than `maximumDepth`: one
    /// level deeper than that (so saving it is refused the same way), shallow enough to
    /// release anywhere.
    package static let tooDeepStandIn: JSONValue = {
        var value = JSONValue.array([])
        for _ in 0..<maximumDepth { value = [value] }
        return value
    }()

    /// Holds a value nested deeper than `maximumDepth` until its holder goes, then takes
    /// it apart level by level. An object whose typed property was set to such a value
    /// keeps one: the property's caller may still release its own reference after the
    /// library's code ran (the compiler's accessor does), and whichever reference goes
    /// last releases the value — this keeper's, with a worklist, not recursion.
    package final class Keeper: @unchecked Sendable {
        // Unchecked: used on its object's context queue only, like the object.
        private var value: JSONValue = .null

        package init() {}

        /// Keeps `newValue`, taking apart the value kept before (its setter has long
        /// returned, so this reference is the last unless the caller kept its own).
        package func keep(_ newValue: consuming JSONValue) {
            var previous = value
            value = newValue
            JSONValue.dismantle(&previous)
        }

        deinit { JSONValue.dismantle(&value) }
    }

    /// Why a value nested deeper than `maximumDepth` is refused.
    private static var tooDeep: (code: PostgresValueError.Code, reason: String?) {
        (.unencodable, "it nests deeper than \(maximumDepth) levels (JSONValue.maximumDepth)")
    }

    /// Parses `json` or `jsonb` text.
    public static func decode(from cell: PostgresCell) throws -> JSONValue {
        let bytes = try cell.requireBytes(for: JSONValue.self)
        do {
            return try JSONDecoder().decode(JSONValue.self, from: Data(buffer: bytes))
        } catch {
            throw cell.invalid(for: JSONValue.self)
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByStringLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    /// `null`.
    public init(nilLiteral: ()) { self = .null }
    /// A boolean.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// A whole number.
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    /// A number.
    public init(floatLiteral value: Double) { self = .number(value) }
    /// A string.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An array.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object; a repeated key keeps the last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
