import Foundation

extension String: PostgresCodable {
    /// Strings are sent untyped so they fit `text`, `varchar`, `uuid` and enum columns.
    public static var postgresType: PostgresType { .unknown }

    /// The string itself; a NUL character is an error, not a silent truncation.
    public func postgresText() throws -> String? {
        var text = self
        let hasNUL = text.withUTF8 { utf8 in utf8.baseAddress.map { memchr($0, 0, utf8.count) != nil } ?? false }
        if hasNUL {
            throw PostgresValueError(code: .containsNUL, swiftType: "String")
        }
        return self
    }

    /// The strings written straight into the literal, quoted and escaped.
    public static func postgresArrayText(_ elements: [String]) throws -> String {
        var literal = ArrayLiteralBuilder(capacity: elements.count)
        for element in elements { try literal.append(element) }
        return literal.text()
    }

    /// The strings written straight into the literal; `NULL` for `nil`.
    public static func postgresArrayText(ofOptionals elements: [String?]) throws -> String {
        try arrayText(of: elements)
    }

    /// Any column's text reads as a string.
    public static func decode(from cell: PostgresCell) throws -> String {
        SmallText.decoded(try cell.requireBytes(for: String.self))
    }
}

/// Parses a decimal integer from ASCII bytes without allocating.
@inline(__always)
private func parseInteger<T: FixedWidthInteger>(
    _ type: T.Type, from cell: PostgresCell
) throws -> T {
    let bytes = try cell.requireBytes(for: type)
    guard !bytes.isEmpty else { throw cell.invalid(for: type) }
    var index = 0
    var negative = false
    if bytes[0] == UInt8(ascii: "-") {
        negative = true
        index = 1
    } else if bytes[0] == UInt8(ascii: "+") {
        index = 1
    }
    guard index < bytes.count else { throw cell.invalid(for: type) }
    var value: T = 0
    while index < bytes.count {
        let digit = bytes[index] &- UInt8(ascii: "0")
        guard digit < 10 else { throw cell.invalid(for: type) }
        let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
        let (next, overflow2) =
            negative
            ? times.subtractingReportingOverflow(T(digit))
            : times.addingReportingOverflow(T(digit))
        guard !overflow1, !overflow2 else { throw cell.error(.outOfRange, for: type) }
        value = next
        index += 1
    }
    return value
}

extension PostgresEncodable where Self: FixedWidthInteger {
    /// Decimal digits.
    public func postgresText() throws -> String? { String(self) }

    /// The digits written straight into the literal (values beyond 64 bits through
    /// their text).
    public static func postgresArrayText(_ elements: [Self]) throws -> String {
        var literal = ArrayLiteralBuilder(capacity: elements.count)
        for element in elements {
            if let value = Int64(exactly: element) { literal.append(value) } else { try literal.append(String(element)) }
        }
        return literal.text()
    }

    /// The digits written straight into the literal; `NULL` for `nil`.
    public static func postgresArrayText(ofOptionals elements: [Self?]) throws -> String {
        var literal = ArrayLiteralBuilder(capacity: elements.count)
        for element in elements {
            if let element {
                if let value = Int64(exactly: element) { literal.append(value) } else { try literal.append(String(element)) }
            } else {
                literal.appendNull()
            }
        }
        return literal.text()
    }
}

extension PostgresDecodable where Self: FixedWidthInteger {
    /// Reads any integer column; out-of-range values throw.
    public static func decode(from cell: PostgresCell) throws -> Self {
        try parseInteger(Self.self, from: cell)
    }
}

extension Int: PostgresCodable {
    /// Sent as `bigint`.
    public static var postgresType: PostgresType { .int8 }
}

extension Int64: PostgresCodable {
    /// Sent as `bigint`.
    public static var postgresType: PostgresType { .int8 }
}

extension Int32: PostgresCodable {
    /// Sent as `integer`.
    public static var postgresType: PostgresType { .int4 }
}

extension Int16: PostgresCodable {
    /// Sent as `smallint`.
    public static var postgresType: PostgresType { .int2 }
}

extension PostgresEncodable where Self: BinaryFloatingPoint & LosslessStringConvertible {
    /// Shortest round-trip digits; `Infinity`, `-Infinity` and `NaN` for the specials.
    public func postgresText() throws -> String? {
        if isNaN { return "NaN" }
        if isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return description
    }
}

extension PostgresDecodable where Self: BinaryFloatingPoint & LosslessStringConvertible {
    /// Reads float columns, and integer and numeric ones (numeric may round; use
    /// `Decimal` for exact values).
    public static func decode(from cell: PostgresCell) throws -> Self {
        let text = String(decoding: try cell.requireBytes(for: Self.self), as: UTF8.self)
        guard let value = Self(text) else { throw cell.invalid(for: Self.self) }
        return value
    }
}

extension Double: PostgresCodable {
    /// Sent as `double precision`.
    public static var postgresType: PostgresType { .float8 }
}

extension Float: PostgresCodable {
    /// Sent as `real`.
    public static var postgresType: PostgresType { .float4 }
}

extension Bool: PostgresCodable {
    /// Sent as `boolean`.
    public static var postgresType: PostgresType { .bool }
    /// `t` or `f`.
    public func postgresText() throws -> String? { self ? "t" : "f" }

    /// Reads `t`/`f` (and `true`/`false`).
    public static func decode(from cell: PostgresCell) throws -> Bool {
        let bytes = try cell.requireBytes(for: Bool.self)
        switch String(decoding: bytes, as: UTF8.self) {
        case "t", "true": return true
        case "f", "false": return false
        default: throw cell.invalid(for: Bool.self)
        }
    }
}

/// A `uuid` parameter whose text is written once, for a value sent again and again (a
/// coordinator's origin goes with every save: its text each time was over a thousand
/// instructions of a one-object save).
package struct EncodedUUID: PostgresEncodable, Sendable {
    /// Sent as `uuid`.
    package static var postgresType: PostgresType { .uuid }
    /// The canonical text (upper case, as `uuidString` writes it; PostgreSQL reads
    /// either case).
    private let text: String

    /// The parameter of `uuid`.
    package init(_ uuid: UUID) {
        text = uuid.uuidString
    }

    /// The text written at `init`.
    package func postgresText() throws -> String? { text }
}

extension UUID: PostgresCodable {
    /// Sent as `uuid`.
    public static var postgresType: PostgresType { .uuid }
    /// The lower-case canonical form.
    public func postgresText() throws -> String? {
        // (Written directly: `uuidString` formats with `snprintf`, then `lowercased()`
        // copies; every save sends its coordinator's UUID.)
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        return withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { text in
                var position = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    text[position] = digits[Int(byte >> 4)]
                    text[position + 1] = digits[Int(byte & 0x0F)]
                    position += 2
                }
                return position
            }
        }
    }

    /// Reads the canonical form.
    public static func decode(from cell: PostgresCell) throws -> UUID {
        let text = String(decoding: try cell.requireBytes(for: UUID.self), as: UTF8.self)
        guard let value = UUID(uuidString: text) else { throw cell.invalid(for: UUID.self) }
        return value
    }
}

extension Data: PostgresCodable {
    /// Sent as `bytea`.
    public static var postgresType: PostgresType { .bytea }

    /// `\x` followed by hex digits.
    public func postgresText() throws -> String? {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        bytes.reserveCapacity(2 + count * 2)
        for byte in self {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Reads `bytea` in hex output format.
    public static func decode(from cell: PostgresCell) throws -> Data {
        let bytes = try cell.requireBytes(for: Data.self)
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"),
            bytes.count % 2 == 0
        else { throw cell.invalid(for: Data.self) }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var output = [UInt8]()
        output.reserveCapacity((bytes.count - 2) / 2)
        var index = 2
        while index < bytes.count {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else {
                throw cell.invalid(for: Data.self)
            }
            output.append(high << 4 | low)
            index += 2
        }
        let data = Data(output)
        return data
    }
}

extension Decimal: PostgresCodable {
    /// Sent as `numeric`.
    public static var postgresType: PostgresType { .numeric }

    /// The exact decimal digits (never through `Double`); `NaN` for not-a-number.
    ///
    /// - Throws: `PostgresValueError` for a value of more than 38 significant digits:
    ///   `numeric` would store it, but `Decimal` cannot read it back, so every later
    ///   fetch of the row would fail.
    public func postgresText() throws -> String? {
        if isNaN { return "NaN" }
        let text = description
        guard Self.significantDigits(of: text) <= Self.maximumReadableDigits else {
            throw PostgresValueError(
                code: .unencodable, swiftType: "Decimal",
                reason: "it has more than \(Self.maximumReadableDigits) significant digits, which Decimal "
                    + "cannot read back from numeric")
        }
        return text
    }

    /// The most significant digits `decode(from:)` reads without rounding.
    static let maximumReadableDigits = 38

    /// Reads `numeric` exactly; values with more than 38 significant digits throw
    /// rather than round.
    public static func decode(from cell: PostgresCell) throws -> Decimal {
        let text = String(decoding: try cell.requireBytes(for: Decimal.self), as: UTF8.self)
        if text == "NaN" { return .nan }
        guard significantDigits(of: text) <= maximumReadableDigits,
            let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
        else {
            if Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) != nil {
                throw cell.error(.outOfRange, for: Decimal.self)
            }
            throw cell.invalid(for: Decimal.self)
        }
        return value
    }

    /// Digits from the first to the last non-zero digit, ignoring sign and point.
    private static func significantDigits(of text: String) -> Int {
        let digits = text.utf8.filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard let first = digits.firstIndex(where: { $0 != UInt8(ascii: "0") }),
            let last = digits.lastIndex(where: { $0 != UInt8(ascii: "0") })
        else { return 0 }
        return last - first + 1
    }
}
