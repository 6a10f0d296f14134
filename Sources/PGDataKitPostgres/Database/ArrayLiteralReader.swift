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
/// let keys = reader.int64s(in: bytes)  // "{3,1,2}" → [3, 1, 2]
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
    // the call of `body` only (the doc says so).
    package mutating func forEachElement(
        in bytes: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>?) throws -> Void
    ) rethrows -> Bool {
        guard var cursor = ArrayLiteralCursor(bytes) else { return false }
        while true {
            switch cursor.next() {
            case .text(let element): try body(element)
            case .null: try body(nil)
            case .escaped(let quoted):
                scratch.removeAll(keepingCapacity: true)
                scratch.reserveCapacity(quoted.count)
                ArrayLiteralCursor.unescape(quoted) { scratch.append($0) }
                try scratch.withUnsafeBufferPointer { try body($0) }
            case .end: return true
            case .malformed: return false
            }
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
}

/// One element of an array literal, as `ArrayLiteralCursor.next()` finds it.
package enum ArrayLiteralElement {
    /// An element's text as it stands in the literal (unquoted, or quoted without escapes).
    case text(UnsafeBufferPointer<UInt8>)
    /// A quoted element's text with its escapes still in: `ArrayLiteralCursor.unescape`.
    case escaped(UnsafeBufferPointer<UInt8>)
    /// An unquoted `NULL`.
    case null
    /// No more elements.
    case end
    /// Not an array literal from here on.
    case malformed
}

/// A position in an array literal's text, read one element at a time: the one parser of
/// the array text the server writes (`ArrayLiteralReader` and the aggregated rows of
/// `FieldReader` go through it).
package struct ArrayLiteralCursor {
    /// The literal.
    private let bytes: UnsafeBufferPointer<UInt8>
    /// The first byte of the next element.
    private var index: Int
    /// The closing brace's index.
    private let end: Int
    /// Whether every element has been handed out (or the text is malformed: `index` is
    /// then -1).
    private var done: Bool

    /// A cursor before the first element; `nil` when `bytes` does not open and close as a
    /// one-dimensional array literal (a dimension decoration such as `[0:2]=` is skipped).
    package init?(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count >= 2, bytes[bytes.count - 1] == UInt8(ascii: "}") else { return nil }
        var index = 0
        if bytes[0] == UInt8(ascii: "[") {
            guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")), bytes[equals - 1] == UInt8(ascii: "]") else {
                return nil
            }
            index = equals + 1
        }
        guard index < bytes.count - 1, bytes[index] == UInt8(ascii: "{") else { return nil }
        self.bytes = bytes
        self.index = index + 1
        self.end = bytes.count - 1
        self.done = self.index == end
    }

    /// The next element (`.end` after the last one, and again after it; `.malformed` once
    /// the text is not an array literal, and again after it).
    // Unsafe: the elements handed out point into `bytes`, which the caller holds; every
    // index read is below `end`, the closing brace's.
    package mutating func next() -> ArrayLiteralElement {
        guard !done, let base = bytes.baseAddress else { return index < 0 ? .malformed : .end }
        let element: ArrayLiteralElement
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
            guard index < end else { return fail() }
            let text = UnsafeBufferPointer(start: base + start, count: index - start)
            element = escaped ? .escaped(text) : .text(text)
            index += 1  // the closing quote
        } else {
            let start = index
            while index < end, bytes[index] != UInt8(ascii: ","), bytes[index] != UInt8(ascii: "{"),
                bytes[index] != UInt8(ascii: "\"")
            {
                index += 1
            }
            let text = UnsafeBufferPointer(start: base + start, count: index - start)
            guard !text.isEmpty else { return fail() }
            element = Self.isNull(text) ? .null : .text(text)
        }
        if index == end {
            done = true
        } else {
            guard bytes[index] == UInt8(ascii: ","), index + 1 < end else { return fail() }
            index += 1
        }
        return element
    }

    /// Marks the text malformed.
    private mutating func fail() -> ArrayLiteralElement {
        done = true
        index = -1
        return .malformed
    }

    /// Hands `byte` each byte of an `.escaped` element's text without its escapes (a
    /// backslash stands for the byte after it): as many bytes as the text or fewer.
    // Unsafe: reads `quoted` (lent by the caller) within its count.
    package static func unescape(_ quoted: UnsafeBufferPointer<UInt8>, _ byte: (UInt8) -> Void) {
        var at = 0
        while at < quoted.count {
            if quoted[at] == UInt8(ascii: "\\"), at + 1 < quoted.count { at += 1 }
            byte(quoted[at])
            at += 1
        }
    }

    /// Whether an unquoted element spells `NULL` (in any case, as the server reads it).
    private static func isNull(_ element: UnsafeBufferPointer<UInt8>) -> Bool {
        guard element.count == 4 else { return false }
        return element[0] | 0x20 == UInt8(ascii: "n") && element[1] | 0x20 == UInt8(ascii: "u")
            && element[2] | 0x20 == UInt8(ascii: "l") && element[3] | 0x20 == UInt8(ascii: "l")
    }
}
