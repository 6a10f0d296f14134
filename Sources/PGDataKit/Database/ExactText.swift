import Foundation

/// Text compared, ordered and hashed byte for byte (its UTF-8), as PostgreSQL compares
/// the values of a unique key under a deterministic collation, rather than by Swift's
/// `String` equality, which holds canonically equivalent texts equal ("café" with a
/// precomposed "é" and with "e" plus a combining accent). Where texts stand for rows'
/// keys, two texts are one key exactly when they are one row's.
struct ExactText: Hashable, Comparable {
    let text: String

    init(_ text: String) { self.text = text }

    static func == (lhs: ExactText, rhs: ExactText) -> Bool {
        compare(lhs.text, rhs.text) == 0
    }

    static func < (lhs: ExactText, rhs: ExactText) -> Bool {
        compare(lhs.text, rhs.text) < 0
    }

    func hash(into hasher: inout Hasher) {
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
