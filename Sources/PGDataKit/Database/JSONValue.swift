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

    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
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
    public func encode(to encoder: any Encoder) throws {
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
    /// (`postgresText()` refuses such values instead).
    public var jsonText: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return value ? "true" : "false"
        case .number(let value):
            if value.isFinite, value == value.rounded(), abs(value) < 1e15 {
                return String(Int64(value))
            }
            return value.isFinite ? value.description : "null"
        case .string(let value): return JSONValue.quote(value)
        case .array(let values): return "[" + values.map(\.jsonText).joined(separator: ",") + "]"
        case .object(let members):
            let body = members.keys.sorted().map { key in
                JSONValue.quote(key) + ":" + (members[key] ?? .null).jsonText
            }
            return "{" + body.joined(separator: ",") + "}"
        }
    }

    private static func quote(_ string: String) -> String {
        var text = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        return text + "\""
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
            throw PostgresValueError(reason: problem, swiftType: "JSONValue")
        }
        return jsonText
    }

    /// Why the value cannot be stored, if it cannot (checked with a worklist).
    private var unencodable: PostgresValueError.Reason? {
        var pending = [self]
        while let value = pending.popLast() {
            switch value {
            case .number(let number):
                if !number.isFinite {
                    return .unencodable("it holds a number that is NaN or infinite, which JSON cannot represent")
                }
            case .string(let text): if text.utf8.contains(0) { return .containsNUL }
            case .array(let values): pending.append(contentsOf: values)
            case .object(let members):
                if members.keys.contains(where: { $0.utf8.contains(0) }) { return .containsNUL }
                pending.append(contentsOf: members.values)
            case .null, .bool: break
            }
        }
        return nil
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
