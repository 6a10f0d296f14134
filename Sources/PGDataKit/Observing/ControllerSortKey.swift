import Foundation

/// Where an object sorts, as bytes that compare (`memcmp`, shorter first on a tie) in
/// the order the SQL `ORDER BY` of a fetch gives its rows: each sort value in an
/// order-preserving encoding (inverted for descending terms), then the primary key
/// (unsaved objects after saved ones). A controller compares keys in every binary
/// search, so comparing is one `memcmp` with no dynamic casts.
///
/// Encodings, per term: a marker byte (`0x00` for `NULL`, which so sorts first
/// ascending and — inverted — last descending, as `NULLS FIRST` / `NULLS LAST`), then
/// integers (and `Bool`) as big-endian with the sign bit flipped; floating-point values
/// (and `Date`, as its time interval) as IEEE bits made order-preserving (`-0` as `0`,
/// NaN above everything, as in PostgreSQL); strings (lower-cased for case-insensitive
/// sorts) as UTF-8 bytes, which is code-point order and so `COLLATE "C"`, and `Data` as
/// its bytes, both with `0x00` escaped and a terminator so a prefix sorts first; UUIDs as
/// their 16 bytes (PostgreSQL's order); decimals by sign, exponent and digits. Other
/// values (JSON) use their description.
struct ControllerSortKey: Equatable {
    /// The first 16 bytes as two big-endian words (zero-padded): most comparisons end
    /// here, without reading `bytes` from the heap (binary searches over thousands of
    /// keys would otherwise miss the cache at every step).
    let head: (UInt64, UInt64)
    /// The encoded key.
    let bytes: [UInt8]
    /// How many leading bytes encode the first term (a sectioned controller's section).
    let firstTermLength: Int

    init(bytes: [UInt8], firstTermLength: Int) {
        func word(_ offset: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in offset..<(offset + 8) {
                value = value << 8 | UInt64(index < bytes.count ? bytes[index] : 0)
            }
            return value
        }
        self.head = (word(0), word(8))
        self.bytes = bytes
        self.firstTermLength = firstTermLength
    }

    static func == (a: ControllerSortKey, b: ControllerSortKey) -> Bool { compare(a, b) == 0 }

    /// Orders two keys: negative, zero or positive.
    @inline(__always)
    static func compare(_ a: ControllerSortKey, _ b: ControllerSortKey) -> Int {
        if a.head.0 != b.head.0 { return a.head.0 < b.head.0 ? -1 : 1 }
        if a.head.1 != b.head.1 { return a.head.1 < b.head.1 ? -1 : 1 }
        // The first 16 bytes agree (a shorter key's padding reads as zeros).
        if a.bytes.count <= 16 && b.bytes.count <= 16 {
            return a.bytes.count == b.bytes.count ? 0 : (a.bytes.count < b.bytes.count ? -1 : 1)
        }
        return compareBytes(a.bytes, b.bytes)
    }

    /// Whether two keys have the same first term (they are in the same section).
    static func sameFirstTerm(_ a: ControllerSortKey, _ b: ControllerSortKey) -> Bool {
        a.firstTermLength == b.firstTermLength && a.bytes.prefix(a.firstTermLength) == b.bytes.prefix(b.firstTermLength)
    }

    static func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
        // Unsafe: both buffers are read only inside the closures, and `memcmp` reads `length`
        // bytes, the shorter count, from each (non-nil bases checked).
        a.withUnsafeBufferPointer { left in
            b.withUnsafeBufferPointer { right in
                let length = Swift.min(left.count, right.count)
                if length > 0, let l = left.baseAddress, let r = right.baseAddress {
                    let result = memcmp(l, r, length)
                    if result != 0 { return result < 0 ? -1 : 1 }
                }
                return left.count == right.count ? 0 : (left.count < right.count ? -1 : 1)
            }
        }
    }

    /// A key that keeps objects in a given order.
    static func position(_ position: Int) -> ControllerSortKey {
        var builder = ControllerSortKeyBuilder()
        builder.appendTiebreak(primaryKey: Int64(position))
        return builder.key
    }
}

/// Builds a `ControllerSortKey` term by term.
struct ControllerSortKeyBuilder {
    private(set) var bytes: [UInt8] = []
    private var firstTermLength: Int?

    init() { bytes.reserveCapacity(24) }

    /// The key built so far.
    var key: ControllerSortKey { ControllerSortKey(bytes: bytes, firstTermLength: firstTermLength ?? 0) }

    /// Appends one sort value.
    mutating func append(_ value: (any Sendable)?, ascending: Bool, caseInsensitive: Bool) {
        let start = bytes.count
        switch value {
        case .none:
            bytes.append(0x00)
        case .some(let text as String):
            bytes.append(0x01)
            appendEscaped(caseInsensitive ? Array(text.lowercased().utf8) : Array(text.utf8))
        case .some(let number as Int): appendInteger(Int64(number))
        case .some(let number as Int64): appendInteger(number)
        case .some(let number as Int32): appendInteger(Int64(number))
        case .some(let number as Int16): appendInteger(Int64(number))
        case .some(let flag as Bool): appendInteger(flag ? 1 : 0)
        case .some(let number as Double): appendDouble(number)
        case .some(let number as Float): appendDouble(Double(number))
        case .some(let date as Date): appendDouble(date.timeIntervalSinceReferenceDate)
        case .some(let uuid as UUID):
            bytes.append(0x01)
            // Unsafe: the 16 bytes of `uuid.uuid` are copied into `bytes` inside the closure.
            withUnsafeBytes(of: uuid.uuid) { bytes.append(contentsOf: $0) }
        case .some(let data as Data):
            bytes.append(0x01)
            appendEscaped(Array(data))
        case .some(let decimal as Decimal): appendDecimal(decimal)
        case .some(let other):
            bytes.append(0x01)
            appendEscaped(Array(String(describing: other).utf8))
        }
        if !ascending {
            for index in start..<bytes.count { bytes[index] = ~bytes[index] }
        }
        if firstTermLength == nil { firstTermLength = bytes.count }
    }

    /// Appends a saved object's primary key (or a given position).
    mutating func appendTiebreak(primaryKey: Int64) {
        if firstTermLength == nil { firstTermLength = 0 }
        bytes.append(0x00)
        appendBigEndian(UInt64(bitPattern: primaryKey) ^ (1 << 63))
    }

    /// Appends an unsaved object's temporary ID: after every saved object.
    mutating func appendTiebreak(temporary: String) {
        if firstTermLength == nil { firstTermLength = 0 }
        bytes.append(0x01)
        appendEscaped(Array(temporary.utf8))
    }

    private mutating func appendInteger(_ number: Int64) {
        bytes.append(0x01)
        appendBigEndian(UInt64(bitPattern: number) ^ (1 << 63))
    }

    private mutating func appendDouble(_ number: Double) {
        bytes.append(0x01)
        let value = number == 0 ? 0.0 : number  // -0 sorts as 0
        let bits = value.isNaN ? UInt64.max : value.bitPattern
        appendBigEndian(bits & (1 << 63) != 0 && !value.isNaN ? ~bits : bits | (value.isNaN ? 0 : 1 << 63))
    }

    /// Sign, then (for non-zero values) the decimal exponent and the digits, inverted
    /// for negative values so that larger magnitudes sort first.
    private mutating func appendDecimal(_ decimal: Decimal) {
        bytes.append(0x01)
        guard let (negative, exponent, digits) = Self.decimalParts(decimal) else {
            appendDouble(NSDecimalNumber(decimal: decimal).doubleValue)
            return
        }
        if digits.isEmpty {
            bytes.append(0x01)  // zero
            return
        }
        bytes.append(negative ? 0x00 : 0x02)
        let start = bytes.count
        appendBigEndian(UInt64(bitPattern: Int64(exponent)) ^ (1 << 63))
        bytes.append(contentsOf: digits)
        bytes.append(0x00)
        if negative {
            for index in start..<bytes.count { bytes[index] = ~bytes[index] }
        }
    }

    /// A decimal as sign, exponent `e` and significant digits `d` (ASCII, no leading or
    /// trailing zeros) with value 0.d × 10^e; `nil` when its description is not plain
    /// decimal notation.
    static func decimalParts(_ decimal: Decimal) -> (negative: Bool, exponent: Int, digits: [UInt8])? {
        var text = Substring(decimal.description)
        let negative = text.hasPrefix("-")
        if negative { text = text.dropFirst() }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) else {
            return nil
        }
        let integer = Array(parts[0].utf8)
        let fraction = parts.count == 2 ? Array(parts[1].utf8) : []
        var digits = integer + fraction
        var exponent = integer.count
        while let first = digits.first, first == UInt8(ascii: "0") {
            digits.removeFirst()
            exponent -= 1
        }
        while let last = digits.last, last == UInt8(ascii: "0") { digits.removeLast() }
        return (negative, digits.isEmpty ? 0 : exponent, digits)
    }

    /// Bytes with `0x00` escaped as `0x00 0xFF` and ended by `0x00 0x00`, so that a
    /// prefix sorts before its extensions.
    private mutating func appendEscaped(_ raw: [UInt8]) {
        for byte in raw {
            bytes.append(byte)
            if byte == 0 { bytes.append(0xFF) }
        }
        bytes.append(0x00)
        bytes.append(0x00)
    }

    private mutating func appendBigEndian(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }
}
