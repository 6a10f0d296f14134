import Foundation

/// Integers keyed by text compared byte for byte (`ExactText`'s equality), for maps of a
/// batch's size: an import batch's records by key. The texts' UTF-8 is copied into one
/// buffer and found through an open-addressing table by a hash of the bytes — a lookup
/// costs about a fifth of a `Dictionary<ExactText, Int>`'s (SipHash, and the `String`
/// comparison through two closures, per lookup), and the map is three arrays whatever
/// the number of texts.
///
/// The hash is seeded once per process at random, as `Hasher` is, so which texts share a
/// slot cannot be chosen from outside; it is not a cryptographic hash (texts made to
/// collide would make lookups slower, never wrong).
///
/// ```swift
/// var map = ExactTextMap()
/// map.value(for: "a", inserting: 0)   // 0: new
/// map.value(for: "a", inserting: 5)   // 0: "a" was there
/// map.value(for: "caf\u{E9}")         // nil: "café" spelled with "e" + U+0301 is another text
/// ```
package struct ExactTextMap {
    /// The texts' UTF-8, one after another.
    private var bytes: [UInt8] = []
    /// Where text `i` starts in `bytes`; it ends where `i + 1` starts.
    private var starts: [Int] = [0]
    /// The value of text `i`.
    private var values: [Int] = []
    /// The hash of text `i` (compared before the bytes; reused when the table grows).
    private var hashes: [UInt64] = []
    /// Text positions by hash, `-1` where empty; a power of two, more than twice `count`.
    private var slots: [Int32]

    /// The process's seed.
    private static let seed = UInt64.random(in: .min ... .max)

    /// An empty map with room for `minimumCapacity` texts before it grows.
    package init(minimumCapacity: Int = 0) {
        slots = Array(repeating: -1, count: Self.slotCount(for: minimumCapacity))
        values.reserveCapacity(minimumCapacity)
        hashes.reserveCapacity(minimumCapacity)
        starts.reserveCapacity(minimumCapacity + 1)
    }

    /// The number of texts.
    package var count: Int { values.count }

    /// The value stored for `text`, or `nil`.
    package func value(for text: String) -> Int? {
        Self.withUTF8(text) { utf8 in
            let hash = Self.hash(utf8)
            let found = find(utf8, hash: hash)
            return found.entry.map { values[$0] }
        }
    }

    /// The value stored for `text` when there is one; otherwise `value`, stored for it.
    @discardableResult
    package mutating func value(for text: String, inserting value: Int) -> Int {
        Self.withUTF8(text) { utf8 in
            let hash = Self.hash(utf8)
            let found = find(utf8, hash: hash)
            if let entry = found.entry { return values[entry] }
            // (At most `Int32.max` texts: positions are kept as `Int32`.)
            precondition(values.count < Int(Int32.max), "an ExactTextMap holds at most Int32.max texts")
            bytes.append(contentsOf: utf8)
            starts.append(bytes.count)
            values.append(value)
            hashes.append(hash)
            slots[found.slot] = Int32(truncatingIfNeeded: values.count - 1)
            if values.count * 2 >= slots.count { grow() }
            return value
        }
    }

    /// The entry holding `utf8` (`nil` when none does) and the slot where the search ended:
    /// the entry's, or the empty slot a new entry takes.
    private func find(_ utf8: UnsafeBufferPointer<UInt8>, hash: UInt64) -> (entry: Int?, slot: Int) {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let entry = Int(slots[slot])
            if entry < 0 { return (nil, slot) }
            if hashes[entry] == hash, holds(entry, utf8) { return (entry, slot) }
            slot = (slot + 1) & mask
        }
    }

    /// Whether text `entry` has exactly these bytes.
    private func holds(_ entry: Int, _ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        let start = starts[entry]
        let length = starts[entry + 1] - start
        guard length == utf8.count else { return false }
        guard length > 0, let other = utf8.baseAddress else { return true }
        // Unsafe: `start..<start + length` is inside `bytes` (`starts` marks its texts),
        // and both buffers are valid for the call.
        return bytes.withUnsafeBufferPointer { stored in
            guard let base = stored.baseAddress else { return false }
            return memcmp(base + start, other, length) == 0
        }
    }

    /// Twice the slots, the entries placed again by their kept hashes.
    private mutating func grow() {
        var grown = [Int32](repeating: -1, count: slots.count * 2)
        let mask = grown.count - 1
        for (entry, hash) in hashes.enumerated() {
            var slot = Int(truncatingIfNeeded: hash) & mask
            while grown[slot] >= 0 { slot = (slot + 1) & mask }
            grown[slot] = Int32(truncatingIfNeeded: entry)
        }
        slots = grown
    }

    /// A power of two above twice `capacity` (at least 16).
    private static func slotCount(for capacity: Int) -> Int {
        var count = 16
        while count <= Swift.min(capacity, Int(Int32.max)) * 2 { count *= 2 }
        return count
    }

    /// The text's UTF-8, in place where the string is stored contiguously (a native
    /// string, small or not), otherwise copied.
    private static func withUTF8<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        // Unsafe: the array's buffer is valid for the call.
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }

    /// A 64-bit hash of the bytes: eight at a time, each word mixed in with a multiply
    /// and shifts, the length and the process's seed in the start, and splitmix64's
    /// finalizer at the end, so that the low bits (the slot) depend on every byte.
    private static func hash(_ utf8: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var state = seed ^ (UInt64(utf8.count) &* 0x9E37_79B9_7F4A_7C15)
        let raw = UnsafeRawBufferPointer(utf8)
        var offset = 0
        while offset + 8 <= raw.count {
            state = mix(state ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            offset += 8
        }
        if offset < raw.count {
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while offset < raw.count {
                tail |= UInt64(raw[offset]) << shift
                shift += 8
                offset += 1
            }
            state = mix(state ^ tail)
        }
        return mix(state ^ (state >> 33))
    }

    /// splitmix64's finalizer.
    @inline(__always)
    private static func mix(_ value: UInt64) -> UInt64 {
        var mixed = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
