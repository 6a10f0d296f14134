import Foundation

/// A Swift value that can be sent as a bound statement parameter.
///
/// Values are always bound, never spliced into SQL. They travel in PostgreSQL's text
/// format, except arrays of `Int` and `Int64` (optional elements too), which are sent as
/// `bigint[]` in the binary array format: nothing for the client to write as digits or
/// the server to parse. `String`, the integer types, `Double`, `Float`, `Decimal`,
/// `Bool`, `Date`, `UUID`, `Data`, `JSONValue`, optionals and arrays of these conform.
/// (A `[String]` stays text and untyped, so `= ANY($1)` fits `text`, `varchar`, `uuid` and
/// enum columns alike.)
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
    /// A one-dimensional array literal of values of this type, every element quoted, such
    /// as `{"a","b"}`: what an `[Self]` parameter sends. The default quotes each element's
    /// `postgresText()`; strings and integers write their elements straight into the
    /// literal (saves and imports send thousands per statement).
    static func postgresArrayText(_ elements: [Self]) throws -> String
    /// `postgresArrayText(_:)` for optional values, `NULL` for `nil`: what an `[Self?]`
    /// parameter sends.
    static func postgresArrayText(ofOptionals elements: [Self?]) throws -> String
}

extension PostgresEncodable {
    /// Each element's `postgresText()`, quoted and escaped.
    public static func postgresArrayText(_ elements: [Self]) throws -> String {
        try quotedArrayText(elements)
    }

    /// Each element's `postgresText()`, quoted and escaped; `NULL` for `nil`.
    public static func postgresArrayText(ofOptionals elements: [Self?]) throws -> String {
        try quotedArrayText(elements)
    }
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

    /// The wrapped type's literal of optional values.
    public static func postgresArrayText(_ elements: [Wrapped?]) throws -> String {
        try Wrapped.postgresArrayText(ofOptionals: elements)
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
        try Element.postgresArrayText(self)
    }
}

/// `{"a","b",NULL}` from each element's `postgresText()` (the generic path).
private func quotedArrayText<Element: PostgresEncodable>(_ elements: [Element]) throws -> String {
    var literal = ArrayLiteralBuilder(capacity: elements.count)
    for element in elements {
        if let text = try element.postgresText() { try literal.append(text) } else { literal.appendNull() }
    }
    return literal.text()
}

/// `{"a","b",NULL}`: an array of strings, without generic dispatch per element.
func arrayText(of strings: [String?]) throws -> String {
    var literal = ArrayLiteralBuilder(capacity: strings.count)
    for element in strings {
        if let element { try literal.append(element) } else { literal.appendNull() }
    }
    return literal.text()
}

/// Writes a one-dimensional array literal in PostgreSQL's text form, element by element,
/// as bytes (appending to a `String` piece by piece costs far more per element): every
/// element quoted, `"` and `\` escaped, `NULL` bare.
package struct ArrayLiteralBuilder: ~Copyable {
    /// The literal so far, `count` bytes of `capacity` (grown by doubling).
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0

    /// Starts an empty literal with room for about `capacity` short elements.
    package init(capacity: Int) {
        self.capacity = Swift.max(64, Swift.min(capacity, 1 << 24) &* 12)
        base = .allocate(capacity: self.capacity)
        base[0] = UInt8(ascii: "{")
        count = 1
    }

    deinit { base.deallocate() }

    /// Makes room for `extra` more bytes.
    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if extra > capacity - count { grow(to: count + extra) }
    }

    private mutating func grow(to needed: Int) {
        let larger = Swift.max(needed, capacity > Int.max / 2 ? needed : capacity * 2)
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        grown.initialize(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = larger
    }

    /// Writes the separator before an element (none before the first); `reserve` first.
    @inline(__always)
    private mutating func separate() {
        if count > 1 {
            base[count] = UInt8(ascii: ",")
            count += 1
        }
    }

    /// Appends `NULL`.
    package mutating func appendNull() {
        reserve(5)
        separate()
        for byte in "NULL".utf8 {
            base[count] = byte
            count += 1
        }
    }

    /// Appends a string, quoted and escaped.
    ///
    /// - Throws: `PostgresValueError` with code `.containsNUL` (the literal is left as it
    ///   was).
    package mutating func append(_ text: String) throws {
        if let inline = SmallText.inlineASCII(text), appendInline(inline) { return }
        var text = text
        try text.withUTF8 { utf8 in try appendQuoted(utf8) }
    }

    /// Writes the separator (none before the first element) and the opening quote of an
    /// element, after `count`, which it leaves as it was; returns where the element's
    /// bytes go. The caller reserved room first.
    @inline(__always)
    private func openQuotedElement() -> Int {
        var position = count
        if position > 1 {
            base[position] = UInt8(ascii: ",")
            position += 1
        }
        base[position] = UInt8(ascii: "\"")
        return position + 1
    }

    /// Appends a short ASCII string from its two words (`SmallText.inlineASCII`), quoted,
    /// when none of its bytes is `"`, `\` or NUL; returns `false` (and appends nothing)
    /// when one is, for `appendQuoted(_:)` to escape or refuse.
    @inline(__always)
    private mutating func appendInline(_ inline: (low: UInt64, high: UInt64, count: Int)) -> Bool {
        let (low, high, length) = inline
        // (The bytes past the string's end padded with `a`s, as `needsEscaping` pads.)
        let filler = UInt8(ascii: "a")
        if Self.holdsSpecialByte(SmallText.padded(low, keeping: length, with: filler))
            || Self.holdsSpecialByte(SmallText.padded(high, keeping: length - 8, with: filler))
        {
            return false
        }
        reserve(length + 19)  // (both words are stored whole; the count then covers the string)
        var position = openQuotedElement()
        // Unsafe: `reserve` made room for 16 bytes past `position` (and the quote after).
        let raw = UnsafeMutableRawPointer(base + position)
        raw.storeBytes(of: low.littleEndian, as: UInt64.self)
        raw.storeBytes(of: high.littleEndian, toByteOffset: 8, as: UInt64.self)
        position += length
        base[position] = UInt8(ascii: "\"")
        count = position + 1
        return true
    }

    /// Writes `utf8` quoted and escaped: one copy when a scan finds nothing to escape (the
    /// common case), else one pass that escapes, into room for every byte escaped; the
    /// literal takes the element only once it was accepted.
    private mutating func appendQuoted(_ utf8: UnsafeBufferPointer<UInt8>) throws {
        let plain = utf8.baseAddress.map { !Self.needsEscaping($0, count: utf8.count) } ?? true
        reserve((plain ? utf8.count : utf8.count + utf8.count) + 3)
        var position = openQuotedElement()
        if plain {
            if let source = utf8.baseAddress { (base + position).initialize(from: source, count: utf8.count) }
            position += utf8.count
        } else if let source = utf8.baseAddress {
            // Runs between the bytes to escape are copied whole; the scan skips a word at
            // a time while a word holds none (a JSON payload has a quote every few bytes,
            // a user's text seldom).
            var start = 0
            var index = 0
            let count = utf8.count
            while index < count {
                while count - index >= 8, !Self.holdsSpecialByte(UnsafeRawPointer(source + index).loadUnaligned(as: UInt64.self)) {
                    index += 8
                }
                guard index < count else { break }
                let byte = source[index]
                if byte == 0 { throw PostgresValueError(code: .containsNUL, swiftType: "String") }
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    (base + position).initialize(from: source + start, count: index - start)
                    position += index - start
                    base[position] = UInt8(ascii: "\\")
                    position += 1
                    start = index  // (the byte itself leads the next run)
                }
                index += 1
            }
            (base + position).initialize(from: source + start, count: count - start)
            position += count - start
        }
        base[position] = UInt8(ascii: "\"")
        count = position + 1
    }

    /// Whether any of `count` bytes is `"`, `\` or NUL, looked for eight bytes at a time: a
    /// word holds one of them when its XOR with that byte repeated has a zero byte, which
    /// `(w - 0x01…01) & ~w & 0x80…80` finds (exactly, as a yes or no). The last word
    /// overlaps the one before it; a text shorter than a word is padded with `a`s.
    private static func needsEscaping(_ bytes: UnsafePointer<UInt8>, count: Int) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let holdsOne = holdsSpecialByte
        let raw = UnsafeRawPointer(bytes)
        guard count >= 8 else {
            var word = ones &* UInt64(UInt8(ascii: "a"))
            withUnsafeMutableBytes(of: &word) { padded in
                padded.baseAddress?.copyMemory(from: raw, byteCount: count)
            }
            return holdsOne(word)
        }
        var index = 0
        while count - index > 8 {
            if holdsOne(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) { return true }
            index += 8
        }
        return holdsOne(raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
    }

    /// Whether a word of eight bytes holds a `"`, a `\` or a NUL (see `needsEscaping`).
    @inline(__always)
    private static func holdsSpecialByte(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        @inline(__always) func hasZeroByte(_ word: UInt64) -> Bool { (word &- ones) & ~word & (ones &* 0x80) != 0 }
        return hasZeroByte(word) || hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C))
    }

    /// Appends an integer, quoted.
    package mutating func append(_ value: Int64) {
        reserve(24)
        separate()
        base[count] = UInt8(ascii: "\"")
        count += 1
        count += writeDecimal(value, into: base + count)
        base[count] = UInt8(ascii: "\"")
        count += 1
    }

    /// Closes the literal and returns it (call once, last).
    package mutating func text() -> String {
        reserve(1)
        base[count] = UInt8(ascii: "}")
        count += 1
        return String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self)
    }
}

/// An array parameter already written as its literal (`ArrayLiteralBuilder`), sent with
/// the type of an array of `Element`.
package struct ArrayLiteral<Element: PostgresEncodable>: PostgresEncodable {
    package let text: String

    package init(text: String) { self.text = text }

    /// The type of an array of `Element` (what `[Element?].postgresType` is, without
    /// instantiating that generic type's metadata on every statement).
    package static var postgresType: PostgresType { PostgresType(oid: Element.postgresType.arrayOID, arrayOID: 0) }

    /// The literal.
    package func postgresText() throws -> String? { text }
}

/// Appends an integer's decimal digits (with a leading `-` when negative) to `bytes`:
/// statements and change records write thousands of keys, and `String(value)` per key
/// allocates.
package func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
    if value >= 0 && value < 100 {  // (versions, small counts: the common case)
        if value >= 10 { bytes.append(UInt8(ascii: "0") + UInt8(value / 10)) }
        bytes.append(UInt8(ascii: "0") + UInt8(value % 10))
        return
    }
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for a sign and 19 or 20 digits
    withUnsafeMutableBytes(of: &digits) { buffer in
        guard let start = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        bytes.append(contentsOf: UnsafeBufferPointer(start: start, count: writeDecimal(value, into: start)))
    }
}

/// Writes an integer's decimal digits (with a leading `-` when negative) at `destination`,
/// which has room for 20 bytes; returns how many it wrote.
@inline(__always)
func writeDecimal(_ value: Int64, into destination: UnsafeMutablePointer<UInt8>) -> Int {
    var written = 0
    if value < 0 {
        destination[0] = UInt8(ascii: "-")
        written = 1
    }
    var magnitude = value.magnitude
    var digits = 1
    var scale: UInt64 = 10
    while digits < 20 && magnitude >= scale {
        digits += 1
        if digits < 20 { scale &*= 10 }
    }
    var position = written + digits
    repeat {
        position -= 1
        destination[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
        magnitude /= 10
    } while magnitude > 0
    return written + digits
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
