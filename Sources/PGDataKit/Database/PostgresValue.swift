import Foundation

/// A Swift value that can be sent as a bound statement parameter.
///
/// Values travel in PostgreSQL's text format and are always bound, never spliced into
/// SQL. `String`, the integer types, `Double`, `Float`, `Decimal`, `Bool`, `Date`,
/// `UUID`, `Data`, `JSONValue`, optionals and arrays of these conform.
///
/// For example, a custom type that is stored as text:
///
/// ```swift
/// struct Email: PostgresEncodable {
///     var address: String
///     static var postgresType: PostgresType { .unknown }
///     func postgresText() throws -> String? { address }
/// }
/// ```
public protocol PostgresEncodable: Sendable {
    /// The type sent with the parameter (`.unknown` lets the server infer it).
    static var postgresType: PostgresType { get }
    /// The value in PostgreSQL's text format, or `nil` for `NULL`.
    func postgresText() throws -> String?
}

/// A Swift type that a result column can be read as.
///
/// For example:
///
/// ```swift
/// let row = try connection.query("SELECT name, age FROM users WHERE id = $1", [id])[0]
/// let name: String? = try row.decode(named: "name")
/// let age = try row.decode(Int.self, named: "age")  // throws if NULL
/// ```
public protocol PostgresDecodable {
    /// Reads a value from a field in PostgreSQL's text format.
    static func decode(from cell: PostgresCell) throws -> Self
}

/// A type that is both a parameter and a column type.
public typealias PostgresCodable = PostgresEncodable & PostgresDecodable

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    /// The wrapped type's PostgreSQL type.
    public static var postgresType: PostgresType { Wrapped.postgresType }

    /// `nil` (NULL) for `.none`, the wrapped value's text otherwise.
    public func postgresText() throws -> String? {
        switch self {
        case .none: return nil
        case .some(let value): return try value.postgresText()
        }
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    /// `nil` for `NULL`, the wrapped type's reading otherwise.
    public static func decode(from cell: PostgresCell) throws -> Wrapped? {
        if cell.isNull { return nil }
        return try Wrapped.decode(from: cell)
    }
}

extension Array: PostgresEncodable where Element: PostgresEncodable {
    /// The array type of the element type.
    public static var postgresType: PostgresType {
        PostgresType(oid: Element.postgresType.arrayOID, arrayOID: 0)
    }

    /// A one-dimensional array literal with every element quoted, such as
    /// `{"a","b",NULL}`, for `= ANY($1)`.
    public func postgresText() throws -> String? {
        // The common element types without generic dispatch per element (saves and
        // imports send thousands of them per statement).
        if Element.self == String?.self { return try arrayText(of: unsafeBitCast(self, to: [String?].self)) }
        if Element.self == String.self { return try arrayText(of: unsafeBitCast(self, to: [String].self).map { $0 }) }
        if Element.self == Int64?.self { return arrayText(of: unsafeBitCast(self, to: [Int64?].self)) }
        if Element.self == Int64.self { return arrayText(of: unsafeBitCast(self, to: [Int64].self).map { $0 }) }
        if Element.self == Int?.self { return arrayText(of: unsafeBitCast(self, to: [Int?].self).map { $0.map(Int64.init) }) }
        if Element.self == Int.self { return arrayText(of: unsafeBitCast(self, to: [Int].self).map { Int64($0) }) }
        var text = "{"
        for (index, element) in enumerated() {
            if index > 0 { text += "," }
            guard let elementText = try element.postgresText() else {
                text += "NULL"
                continue
            }
            text += "\""
            if elementText.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                for character in elementText.unicodeScalars {
                    if character == "\"" || character == "\\" { text += "\\" }
                    text.unicodeScalars.append(character)
                }
            } else {
                text += elementText  // nothing to escape: one append, not one per character
            }
            text += "\""
        }
        return text + "}"
    }
}

/// `{"a","b",NULL}`: an array of strings, without generic dispatch per element.
private func arrayText(of strings: [String?]) throws -> String {
    var literal = ArrayLiteralBuilder(capacity: strings.count)
    for element in strings {
        if let element { try literal.append(element) } else { literal.appendNull() }
    }
    return literal.text()
}

/// `{"1","2",NULL}`: an array of integers, without generic dispatch per element.
private func arrayText(of integers: [Int64?]) -> String {
    var literal = ArrayLiteralBuilder(capacity: integers.count)
    for element in integers {
        if let element { literal.append(element) } else { literal.appendNull() }
    }
    return literal.text()
}

/// Writes a one-dimensional array literal in PostgreSQL's text form, element by element,
/// as bytes (appending to a `String` piece by piece costs far more per element): every
/// element quoted, `"` and `\` escaped, `NULL` bare.
struct ArrayLiteralBuilder {
    private var bytes: [UInt8] = []

    /// Starts an empty literal with room for about `capacity` short elements.
    init(capacity: Int) {
        bytes.reserveCapacity(2 + capacity * 8)
        bytes.append(UInt8(ascii: "{"))
    }

    private mutating func separate() {
        if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
    }

    /// Appends `NULL`.
    mutating func appendNull() {
        separate()
        bytes.append(contentsOf: [UInt8(ascii: "N"), UInt8(ascii: "U"), UInt8(ascii: "L"), UInt8(ascii: "L")])
    }

    /// Appends a string, quoted and escaped.
    ///
    /// - Throws: `PostgresValueError.Reason.containsNUL`.
    mutating func append(_ text: String) throws {
        separate()
        bytes.append(UInt8(ascii: "\""))
        var text = text
        try text.withUTF8 { utf8 in
            var plain = true
            if let base = utf8.baseAddress {
                if memchr(base, 0, utf8.count) != nil { throw PostgresValueError(reason: .containsNUL, swiftType: "String") }
                plain = memchr(base, Int32(UInt8(ascii: "\"")), utf8.count) == nil
                    && memchr(base, Int32(UInt8(ascii: "\\")), utf8.count) == nil
            }
            if plain {
                bytes.append(contentsOf: utf8)  // nothing to escape: one copy, not one per byte
            } else {
                for byte in utf8 {
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                    bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends an integer, quoted.
    mutating func append(_ value: Int64) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        appendDecimal(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// Closes the literal and returns it (call once, last).
    mutating func text() -> String {
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// An array parameter already written as its literal (`ArrayLiteralBuilder`), sent with
/// the type of an array of `Element`.
struct ArrayLiteral<Element: PostgresEncodable>: PostgresEncodable {
    let text: String

    static var postgresType: PostgresType { [Element?].postgresType }

    func postgresText() throws -> String? { text }
}

/// Appends an integer's decimal digits (with a leading `-` when negative) to `bytes`:
/// statements and change records write thousands of keys, and `String(value)` per key
/// allocates.
func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
    if value >= 0 && value < 100 {  // (versions, small counts: the common case)
        if value >= 10 { bytes.append(UInt8(ascii: "0") + UInt8(value / 10)) }
        bytes.append(UInt8(ascii: "0") + UInt8(value % 10))
        return
    }
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    var magnitude = value.magnitude
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
    withUnsafeMutableBytes(of: &digits) { buffer in
        var position = buffer.count
        repeat {
            position -= 1
            buffer[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[position...]))
    }
}

extension Array: PostgresDecodable where Element: PostgresDecodable {
    /// Reads a one-dimensional array literal; `NULL` elements need an optional element
    /// type.
    public static func decode(from cell: PostgresCell) throws -> [Element] {
        let bytes = try cell.requireBytes(for: [Element].self)
        guard let elements = ArrayLiteralParser.parse(bytes) else {
            throw cell.invalid(for: [Element].self)
        }
        var result: [Element] = []
        result.reserveCapacity(elements.count)
        for element in elements {
            if let element {
                var utf8 = element
                let value = try utf8.withUTF8 { buffer in
                    try Element.decode(
                        from: PostgresCell(
                            bytes: buffer, typeOID: 0, columnName: cell.columnName,
                            rowIndex: cell.rowIndex))
                }
                result.append(value)
            } else {
                result.append(
                    try Element.decode(
                        from: PostgresCell(
                            bytes: nil, typeOID: 0, columnName: cell.columnName,
                            rowIndex: cell.rowIndex)))
            }
        }
        return result
    }
}

/// Splits PostgreSQL's text array output (`{a,"b c",NULL}`) into element strings.
enum ArrayLiteralParser {
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> [String?]? {
        var index = 0
        // Skip an optional dimension decoration such as "[0:2]=".
        if bytes.first == UInt8(ascii: "[") {
            guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else { return nil }
            index = equals + 1
        }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{"),
            bytes.last == UInt8(ascii: "}")
        else { return nil }
        index += 1
        let end = bytes.count - 1
        var elements: [String?] = []
        if index == end { return elements }
        while index <= end {
            var element: [UInt8] = []
            var quoted = false
            if bytes[index] == UInt8(ascii: "\"") {
                quoted = true
                index += 1
                while index < end, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\") { index += 1 }
                    guard index < end else { return nil }
                    element.append(bytes[index])
                    index += 1
                }
                guard index < end else { return nil }
                index += 1  // closing quote
            } else {
                while index < end, bytes[index] != UInt8(ascii: ","),
                    bytes[index] != UInt8(ascii: "{")
                {
                    element.append(bytes[index])
                    index += 1
                }
                guard index >= end || bytes[index] == UInt8(ascii: ",") else {
                    return nil  // nested arrays are not supported
                }
            }
            let text = String(decoding: element, as: UTF8.self)
            elements.append(!quoted && text == "NULL" ? nil : text)
            guard index == end || bytes[index] == UInt8(ascii: ",") else { return nil }
            index += 1
        }
        return elements
    }
}
