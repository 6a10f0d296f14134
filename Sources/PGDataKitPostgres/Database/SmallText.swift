import Synchronization

/// Short ASCII text (up to 15 bytes: keys, codes, short names) made into a `String`
/// directly: the standard library keeps such a string inline, its bytes in the string's
/// two words and its length and kind in the top byte, and this writes those two words.
/// The library's own ways (`String(decoding:as:)`, `String(unsafeUninitializedCapacity:
/// initializingUTF8With:)`) validate the bytes as UTF-8 and call out per string: about
/// 100 instructions for a cell of a fetched row where this takes about 30 (callgrind).
/// Used where a cell becomes a `String`: `String`'s `PostgresDecodable` decoding,
/// `Row.string(at:)`, `PostgresCell.string`, and the object graph's fetches.
///
/// The layout is the standard library's, not a promise of the language, so it is checked
/// once per process against strings the library made itself, at every length from 0 to
/// 15 (`isLaidOutAsExpected`); where it differs, `string(_:)` answers `nil` and callers
/// take the library's way. Non-ASCII bytes are left to the library too (it validates
/// them and repairs invalid UTF-8).
package enum SmallText {
    /// The top byte of an inline ASCII string of `count` bytes: `0xE0 | count`.
    private static let asciiDiscriminator: UInt64 = 0xE0

    /// The layout check's answer: 0 not checked yet, 1 as expected, 2 not. (An atomic
    /// read per string, not a lazy global's once-check, which is a call.)
    private static let layout = Atomic<UInt8>(0)

    /// Whether this process's standard library lays out an inline ASCII string as
    /// `string(_:)` writes one: checked at every length from 0 to 15, bit for bit, on the
    /// first call (two threads may both check; they find the same).
    package static var isLaidOutAsExpected: Bool {
        switch layout.load(ordering: .relaxed) {
        case 1: return true
        case 2: return false
        default:
            let expected = checkLayout()
            layout.store(expected ? 1 : 2, ordering: .relaxed)
            return expected
        }
    }

    /// Compares the words `words(_:)` writes with those of strings the standard library
    /// makes of the same bytes.
    private static func checkLayout() -> Bool {
        guard MemoryLayout<String>.size == 16, MemoryLayout<(UInt64, UInt64)>.size == 16 else { return false }
        for count in 0...15 {
            // Printable ASCII, different at each position and length.
            let sample = (0..<count).map { UInt8(32 + (($0 * 7 + count * 3) % 95)) }
            let made = String(decoding: sample, as: UTF8.self)
            // Unsafe: the sample's buffer, read inside the call.
            let written = sample.withUnsafeBufferPointer { words($0) }
            // Unsafe: a `String` is two words (checked above); its bits are read, not kept.
            let libraryWords = unsafeBitCast(made, to: (UInt64, UInt64).self)
            guard let written, written == libraryWords else { return false }
        }
        return true
    }

    // Unsafe: `bytes` is borrowed for the call and only read.
    /// The string of `bytes`, or `nil` when they are longer than 15 bytes or not all
    /// ASCII, or when the standard library's layout is not the one expected.
    @inline(__always)
    package static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard bytes.count <= 15, isLaidOutAsExpected, var words = words(bytes) else { return nil }
        // Unsafe: the two words the standard library itself makes for these bytes
        // (checked bit for bit by `isLaidOutAsExpected`), moved out as the string they
        // are (an inline string owns no memory; `words` is not used again).
        return withUnsafeMutablePointer(to: &words) { $0.withMemoryRebound(to: String.self, capacity: 1) { $0.move() } }
    }

    // Unsafe: `bytes` is borrowed for the call and only read, inside its bounds.
    /// The two words of an inline ASCII string of `bytes` (at most 15), or `nil` when a
    /// byte is not ASCII. Read with loads that stay inside the bytes: two overlapping
    /// 8-byte (or 4-byte) loads, byte by byte under 4.
    @inline(__always)
    private static func words(_ bytes: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64)? {
        let count = bytes.count
        guard count > 0, count <= 15, let base = bytes.baseAddress else { return count == 0 ? (0, asciiDiscriminator << 56) : nil }
        // Unsafe: every load below lies within `base..<base + count`.
        let raw = UnsafeRawPointer(base)
        var low: UInt64 = 0
        var high: UInt64 = 0
        if count >= 8 {
            low = UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
            // The last 8 bytes, shifted down past those `low` holds.
            let last = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
            high = count == 8 ? 0 : last >> UInt64((16 - count) * 8)
        } else if count >= 4 {
            let first = UInt64(UInt32(littleEndian: raw.loadUnaligned(as: UInt32.self)))
            let last = UInt64(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)))
            low = first | (last << UInt64((count - 4) * 8))
        } else {
            for index in 0..<count { low |= UInt64(base[index]) << UInt64(index * 8) }
        }
        guard (low | high) & 0x8080_8080_8080_8080 == 0 else { return nil }
        return (low, high | (asciiDiscriminator | UInt64(count)) << 56)
    }

    /// The bytes of a string the standard library keeps inline as ASCII (at most 15
    /// bytes): its two words in memory order (the bytes from the first, the top byte of
    /// the second cleared) and the count; `nil` for any other string, or where the
    /// layout is not the expected one. The inverse of `string(_:)`, for writers that copy
    /// a string's bytes (array literals): no call into the string, no retain.
    @inline(__always)
    package static func inlineASCII(_ string: String) -> (low: UInt64, high: UInt64, count: Int)? {
        guard isLaidOutAsExpected else { return nil }
        // Unsafe: a `String` is two words (`isLaidOutAsExpected` checked the size); its
        // bits are read, not kept, while `string` itself stays alive.
        let words = unsafeBitCast(string, to: (UInt64, UInt64).self)
        let top = words.1 >> 56
        // Only an inline ASCII string has these four bits (immortal, ASCII, small).
        guard top & 0xF0 == asciiDiscriminator else { return nil }
        return (UInt64(littleEndian: words.0), UInt64(littleEndian: words.1) & 0x00FF_FFFF_FFFF_FFFF, Int(top & 0x0F))
    }

    /// One of the two words `inlineASCII(_:)` gives, with the bytes past the string's end
    /// (all but the first `bytes` of the word, which may be none or all) set to `filler`:
    /// so that a scan of the whole word for some byte finds only the string's own.
    @inline(__always)
    package static func padded(_ word: UInt64, keeping bytes: Int, with filler: UInt8) -> UInt64 {
        if bytes >= 8 { return word }
        let kept: UInt64 = bytes <= 0 ? 0 : ~UInt64(0) >> UInt64((8 - bytes) * 8)
        return (word & kept) | (0x0101_0101_0101_0101 &* UInt64(filler) & ~kept)
    }

    /// A cell's text as `String(decoding:as: UTF8.self)` reads it (invalid UTF-8
    /// repaired): up to 15 ASCII bytes written inline (`string(_:)`), the rest decoded.
    @inline(__always)
    package static func decoded(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        string(bytes) ?? String(decoding: bytes, as: UTF8.self)
    }
}
