/// Reads PostgreSQL's text form of a one-dimensional array (`{1,"a b",NULL}`) element by
/// element, without a `String` per element: the statements that answer with one row of
/// aggregated arrays (`array_agg`) instead of a row per written row are read with it.
///
/// The server quotes an element that is empty, holds a brace, comma, quote, backslash or
/// white space, or spells `NULL`; inside quotes a backslash escapes the next byte. An
/// unquoted element is its bytes as they stand, and so is a quoted one without a
/// backslash; only an element with escapes is copied (into a buffer the reader keeps).
///
/// For example:
///
/// ```swift
/// var reader = ArrayLiteralReader()
/// let keys = try reader.int64s(in: bytes)  // "{3,1,2}" → [3, 1, 2]
/// ```
package struct ArrayLiteralReader {
    /// The element being unescaped, when it has escapes.
    private var scratch: [UInt8] = []

    /// A reader with an empty buffer.
    package init() {}

    /// Calls `body` with each element's text (unescaped), in order, `nil` for an unquoted
    /// `NULL`.
    ///
    /// - Returns: `false` when `bytes` is not a one-dimensional array literal (nothing is
    ///   handed out past the first malformed element). A dimension decoration such as
    ///   `[0:2]=` is skipped.
    // Unsafe: each element's bytes point into `bytes` or into `scratch`, both valid for
    // the call of `body` only (the doc says so); indices stay below `bytes.count - 1`.
    package mutating func forEachElement(
        in bytes: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>?) throws -> Void
    ) rethrows -> Bool {
        guard let base = bytes.baseAddress, bytes.count >= 2, bytes[bytes.count - 1] == UInt8(ascii: "}") else { return false }
        var index = 0
        if bytes[0] == UInt8(ascii: "[") {
            guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")), bytes[equals - 1] == UInt8(ascii: "]") else {
                return false
            }
            index = equals + 1
        }
        guard index < bytes.count - 1, bytes[index] == UInt8(ascii: "{") else { return false }
        index += 1
        let end = bytes.count - 1
        if index == end { return true }
        while true {
            if bytes[index] == UInt8(ascii: "\"") {
                index += 1
                let start = index
                var escaped = false
                while index < end, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\") {
                        escaped = true
                        index += 1
                    }
                    index += 1
                }
                guard index < end else { return false }
                if escaped {
                    scratch.removeAll(keepingCapacity: true)
                    var at = start
                    while at < index {
                        if bytes[at] == UInt8(ascii: "\\") { at += 1 }
                        scratch.append(bytes[at])
                        at += 1
                    }
                    try scratch.withUnsafeBufferPointer { try body($0) }
                } else {
                    try body(UnsafeBufferPointer(start: base + start, count: index - start))
                }
                index += 1  // the closing quote
            } else {
                let start = index
                while index < end, bytes[index] != UInt8(ascii: ","), bytes[index] != UInt8(ascii: "{"),
                    bytes[index] != UInt8(ascii: "\"")
                {
                    index += 1
                }
                let element = UnsafeBufferPointer(start: base + start, count: index - start)
                guard !element.isEmpty else { return false }
                try body(Self.isNull(element) ? nil : element)
            }
            if index == end { return true }
            guard bytes[index] == UInt8(ascii: ","), index + 1 < end else { return false }
            index += 1
        }
    }

    /// The elements of an `int2`, `int4` or `int8` array literal; `nil` when `bytes` is
    /// not one, or an element is `NULL` or out of `Int64`'s range.
    package mutating func int64s(in bytes: UnsafeBufferPointer<UInt8>) -> [Int64]? {
        var values: [Int64] = []
        values.reserveCapacity(bytes.count / 2)
        var valid = true
        let wellFormed = forEachElement(in: bytes) { element in
            guard valid, let element, let value = Row.decimal(element) else {
                valid = false
                return
            }
            values.append(value)
        }
        return wellFormed && valid ? values : nil
    }

    /// The elements of a `boolean` array literal (`t`, `f`); `nil` when `bytes` is not
    /// one, or an element is anything else.
    package mutating func booleans(in bytes: UnsafeBufferPointer<UInt8>) -> [Bool]? {
        var values: [Bool] = []
        values.reserveCapacity(bytes.count / 2)
        var valid = true
        let wellFormed = forEachElement(in: bytes) { element in
            guard valid, let element, element.count == 1,
                element[0] == UInt8(ascii: "t") || element[0] == UInt8(ascii: "f")
            else {
                valid = false
                return
            }
            values.append(element[0] == UInt8(ascii: "t"))
        }
        return wellFormed && valid ? values : nil
    }

    /// Whether an unquoted element spells `NULL` (in any case, as the server reads it).
    private static func isNull(_ element: UnsafeBufferPointer<UInt8>) -> Bool {
        guard element.count == 4 else { return false }
        return element[0] | 0x20 == UInt8(ascii: "n") && element[1] | 0x20 == UInt8(ascii: "u")
            && element[2] | 0x20 == UInt8(ascii: "l") && element[3] | 0x20 == UInt8(ascii: "l")
    }
}
