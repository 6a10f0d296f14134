import Foundation

/// Text compared, ordered and hashed byte for byte (its UTF-8), as PostgreSQL compares
/// the values of a unique key under a deterministic collation, rather than by Swift's
/// `String` equality, which holds canonically equivalent texts equal ("café" with a
/// precomposed "é" and with "e" plus a combining accent). Where texts stand for rows'
/// keys, two texts are one key exactly when they are one row's.
///
/// Use it to key dictionaries by a text attribute:
///
/// ```swift
/// let byID = try User.fetchAsDictionary(keyedBy: "userID", as: ExactText.self, in: context)
/// let user = byID[ExactText("caf\u{E9}")]   // not the row keyed "cafe\u{301}"
/// ```
public struct ExactText: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The text.
    public let text: String

    /// Wraps a text.
    public init(_ text: String) { self.text = text }

    /// The text itself.
    public var description: String { text }

    /// Whether the two texts have the same UTF-8 bytes.
    public static func == (lhs: ExactText, rhs: ExactText) -> Bool {
        compare(lhs.text, rhs.text) == 0
    }

    /// Byte order of the UTF-8 (a prefix first).
    public static func < (lhs: ExactText, rhs: ExactText) -> Bool {
        compare(lhs.text, rhs.text) < 0
    }

    /// Hashes the UTF-8 bytes.
    public func hash(into hasher: inout Hasher) {
        let hashed: Bool? = text.utf8.withContiguousStorageIfAvailable {
            hasher.combine(bytes: UnsafeRawBufferPointer($0))
            return true
        }
        if hashed == nil {
            for byte in text.utf8 { hasher.combine(byte) }
        }
    }

    /// Negative, zero or positive as `lhs`'s UTF-8 sorts before, with or after `rhs`'s
    /// (bytes as unsigned; a prefix first).
    static func compare(_ lhs: String, _ rhs: String) -> Int {
        let result = lhs.utf8.withContiguousStorageIfAvailable { left in
            rhs.utf8.withContiguousStorageIfAvailable { right in
                let common = Swift.min(left.count, right.count)
                if common > 0, let a = left.baseAddress, let b = right.baseAddress {
                    let order = memcmp(a, b, common)
                    if order != 0 { return Int(order) }
                }
                return left.count - right.count
            }
        }
        if let result, let result { return result }
        // Text without contiguous UTF-8 (bridged): element by element.
        var left = lhs.utf8.makeIterator()
        var right = rhs.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case let (a?, b?) where a != b: return a < b ? -1 : 1
            default: continue
            }
        }
    }
}

/// Texts copied once into one buffer of UTF-8, for sorting and comparing many of them
/// byte for byte (`ExactText`'s order) without touching each `String` per comparison.
package struct PackedTexts {
    private var bytes: [UInt8] = []
    /// Where text `i` starts in `bytes`; text `i` ends where `i + 1` starts.
    private var starts: [Int] = [0]

    package init(_ texts: [String]) {
        starts.reserveCapacity(texts.count + 1)
        bytes.reserveCapacity(texts.count * 16)
        for text in texts {
            if let inline = SmallText.inlineASCII(text) {
                // A short ASCII text's bytes, from the string's words (no call into it).
                // Unsafe: the two words' bytes, read inside the call, the first `count`.
                withUnsafeBytes(of: (inline.low.littleEndian, inline.high.littleEndian)) { words in
                    bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: words[..<inline.count]))
                }
            } else {
                bytes.append(contentsOf: text.utf8)
            }
            starts.append(bytes.count)
        }
    }

    /// How many texts there are.
    var count: Int { starts.count - 1 }

    /// The positions of the texts in `ExactText` order (equal texts in no set order).
    ///
    /// Keys of one batch tend to share a prefix (`user-00…`): past the prefix all texts
    /// share, each text's next eight bytes, as one big-endian integer (zero-padded), order
    /// most pairs with one integer comparison; only equal integers compare the texts.
    package func sortedIndices() -> [Int] {
        var distinct = false
        return sortedIndices(distinct: &distinct)
    }

    /// `sortedIndices()`, and whether the texts are known to be all different: set when
    /// the texts came in order already, each after the one before (`false` says only
    /// that the check was not made or found equal texts).
    package func sortedIndices(distinct: inout Bool) -> [Int] {
        let count = self.count
        distinct = count <= 1
        guard count > 1 else { return Array(0..<count) }
        return bytes.withUnsafeBufferPointer { bytes in
            starts.withUnsafeBufferPointer { starts in
                var shared = starts[1] - starts[0]
                for index in 1..<count where shared > 0 {
                    shared = Swift.min(shared, starts[index + 1] - starts[index])
                    var position = 0
                    while position < shared, bytes[starts[0] + position] == bytes[starts[index] + position] { position += 1 }
                    shared = position
                }
                var keyed: [(prefix: UInt64, index: Int)] = []
                keyed.reserveCapacity(count)
                for index in 0..<count {
                    let from = starts[index] + shared
                    let end = Swift.min(starts[index + 1], from + 8)
                    var prefix: UInt64 = 0
                    for position in from..<end { prefix = prefix << 8 | UInt64(bytes[position]) }
                    prefix <<= UInt64(8 * (8 - (end - from)))
                    keyed.append((prefix, index))
                }
                // Batches often come in key order already: one pass tells (and whether
                // each text differs from the one before).
                var ordered = true
                var increasing = true
                for index in 1..<count where keyed[index - 1].prefix >= keyed[index].prefix {
                    let order =
                        keyed[index - 1].prefix > keyed[index].prefix ? 1 : PackedTexts.compare(bytes, starts, index - 1, index)
                    if order > 0 {
                        ordered = false
                        break
                    }
                    if order == 0 { increasing = false }
                }
                if ordered {
                    distinct = increasing
                    return Array(0..<count)
                }
                keyed.sort {
                    $0.prefix != $1.prefix ? $0.prefix < $1.prefix : PackedTexts.compare(bytes, starts, $0.index, $1.index) < 0
                }
                return keyed.map(\.index)
            }
        }
    }

    /// Text `i` against `other` in `ExactText` order: negative, zero (the same bytes) or
    /// positive.
    package func compare(_ i: Int, with other: UnsafeBufferPointer<UInt8>) -> Int {
        bytes.withUnsafeBufferPointer { bytes in
            let start = starts[i]
            let count = starts[i + 1] - start
            let common = Swift.min(count, other.count)
            if common > 0, let base = bytes.baseAddress, let otherBase = other.baseAddress {
                let order = memcmp(base + start, otherBase, common)
                if order != 0 { return Int(order) }
            }
            return count - other.count
        }
    }

    /// Whether texts `i` and `j` have the same bytes.
    package func equal(_ i: Int, _ j: Int) -> Bool {
        bytes.withUnsafeBufferPointer { bytes in
            starts.withUnsafeBufferPointer { starts in PackedTexts.compare(bytes, starts, i, j) == 0 }
        }
    }

    private static func compare(
        _ bytes: UnsafeBufferPointer<UInt8>, _ starts: UnsafeBufferPointer<Int>, _ i: Int, _ j: Int
    ) -> Int {
        let left = starts[i]
        let right = starts[j]
        let leftCount = starts[i + 1] - left
        let rightCount = starts[j + 1] - right
        let common = Swift.min(leftCount, rightCount)
        if common > 0, let base = bytes.baseAddress {
            let order = memcmp(base + left, base + right, common)
            if order != 0 { return Int(order) }
        }
        return leftCount - rightCount
    }
}
