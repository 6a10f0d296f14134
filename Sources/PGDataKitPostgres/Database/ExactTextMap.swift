import Foundation

/// Integers keyed by text compared byte for byte (`ExactText`'s equality), for maps of a
/// batch's size: an import batch's records by key. Texts are found through an
/// open-addressing table by a 64-bit hash of their UTF-8 and compared only when the
/// hashes are equal: an insert of a 13-byte key costs about 250 instructions (callgrind)
/// against 618 for the `Dictionary<UniqueValue, Int>` it replaced (SipHash, and a
/// comparison of the texts through two closures per probe), and the map is two arrays
/// whatever the number of texts.
///
/// The hash is seeded once per process at random, as `Hasher` is, so which texts share a
/// slot cannot be chosen from outside; it is not a cryptographic hash (texts made to
/// collide would make lookups slower, never wrong).
///
/// ```swift
/// var map = ExactTextMap()
/// map.value(for: "caf\u{E9}", inserting: 0)   // 0: new
/// map.value(for: "caf\u{E9}", inserting: 5)   // 0: it was there
/// map.value(for: "cafe\u{301}")               // nil: the same word to `String`, other bytes
/// ```
package struct ExactTextMap {
    /// A text, its value and its hash (compared before the texts; reused when the table
    /// grows).
    private struct Entry {
        let text: String
        let value: Int
        let hash: UInt64
    }

    /// The entries, in the order added.
    private var entries: [Entry] = []
    /// Entry positions by hash, `-1` where empty; a power of two, more than twice `count`.
    private var slots: [Int]
    /// The process's seed (`processSeed`), kept here: a `static let` is checked for its
    /// initialization at every read.
    private let seed: UInt64

    /// The seed of every map of the process.
    private static let processSeed = UInt64.random(in: .min ... .max)

    /// An empty map with room for `minimumCapacity` texts before it grows.
    package init(minimumCapacity: Int = 0) {
        slots = Array(repeating: -1, count: Self.slotCount(for: minimumCapacity))
        entries.reserveCapacity(minimumCapacity)
        seed = Self.processSeed
    }

    /// The number of texts.
    package var count: Int { entries.count }

    /// The value stored for `text`, or `nil`.
    package func value(for text: String) -> Int? {
        let hash = Self.hash(text, seed: seed)
        return find(text, hash: hash).entry.map { entries[$0].value }
    }

    /// The value stored for `text` when there is one; otherwise `value`, stored for it.
    @discardableResult
    package mutating func value(for text: String, inserting value: Int) -> Int {
        let hash = Self.hash(text, seed: seed)
        let found = find(text, hash: hash)
        if let entry = found.entry { return entries[entry].value }
        slots[found.slot] = entries.count
        entries.append(Entry(text: text, value: value, hash: hash))
        if entries.count * 2 >= slots.count { grow() }
        return value
    }

    /// The entry holding `text` (`nil` when none does) and the slot where the search
    /// ended: the entry's, or the empty slot a new entry takes. Texts are compared only
    /// when their hashes are equal.
    private func find(_ text: String, hash: UInt64) -> (entry: Int?, slot: Int) {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let entry = slots[slot]
            if entry < 0 { return (nil, slot) }
            if entries[entry].hash == hash, ExactText.compare(entries[entry].text, text) == 0 { return (entry, slot) }
            slot = (slot + 1) & mask
        }
    }

    /// Twice the slots, the entries placed again by their kept hashes.
    private mutating func grow() {
        var grown = [Int](repeating: -1, count: slots.count * 2)
        let mask = grown.count - 1
        for (position, entry) in entries.enumerated() {
            var slot = Int(truncatingIfNeeded: entry.hash) & mask
            while grown[slot] >= 0 { slot = (slot + 1) & mask }
            grown[slot] = position
        }
        slots = grown
    }

    /// A power of two above twice `capacity` (at least 16; a capacity beyond 2^40 is
    /// not reserved ahead, the table grows when it gets there).
    private static func slotCount(for capacity: Int) -> Int {
        var count = 16
        while count <= Swift.min(capacity, 1 << 40) * 2 { count *= 2 }
        return count
    }

    /// The hash of the text's UTF-8, read in place where the string is stored
    /// contiguously (a native string, small or not), otherwise from a copy.
    private static func hash(_ text: String, seed: UInt64) -> UInt64 {
        #if _endian(little)
            if let inline = SmallText.inlineASCII(text) { return hash(inline, seed: seed) }
        #endif
        if let hash = text.utf8.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0), seed: seed) }) { return hash }
        // Unsafe: the array's bytes are valid for the call.
        return Array(text.utf8).withUnsafeBytes { hash($0, seed: seed) }
    }

    /// A 64-bit hash of the bytes: eight at a time, each word mixed in with multiplies
    /// and shifts (splitmix64's finalizer), the length and the process's seed in the
    /// start, so that the low bits (the slot) depend on every byte. The last word of a
    /// text of 8 bytes or more is its last eight bytes (overlapping the word before).
    private static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        var state = seed ^ (UInt64(bytes.count) &* 0x9E37_79B9_7F4A_7C15)
        let count = bytes.count
        if count >= 8 {
            var offset = 0
            while offset + 8 < count {
                state = mix(state ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                offset += 8
            }
            state = mix(state ^ bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
        } else if count > 0 {
            var tail: UInt64 = 0
            for offset in 0..<count { tail |= UInt64(bytes[offset]) << UInt64(8 * offset) }
            state = mix(state ^ tail)
        }
        return mix(state)
    }

    /// `hash(_:seed:)` of a short ASCII text's bytes, read from the string's two words
    /// (`SmallText.inlineASCII`): on a little-endian machine the words are the bytes as
    /// the loads above read them, so a text hashes alike however it is stored.
    @inline(__always)
    private static func hash(_ inline: (low: UInt64, high: UInt64, count: Int), seed: UInt64) -> UInt64 {
        let count = inline.count
        var state = seed ^ (UInt64(count) &* 0x9E37_79B9_7F4A_7C15)
        if count > 8 {
            // The first word, then the last eight bytes (overlapping it), as above.
            state = mix(state ^ inline.low)
            let shift = UInt64(8 * (count - 8))
            state = mix(state ^ ((inline.low >> shift) | (inline.high << (64 - shift))))
        } else if count > 0 {
            state = mix(state ^ inline.low)  // (the bytes past the text are zero)
        }
        return mix(state)
    }

    /// splitmix64's finalizer.
    @inline(__always)
    private static func mix(_ value: UInt64) -> UInt64 {
        var mixed = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
