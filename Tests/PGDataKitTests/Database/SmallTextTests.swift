import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// `SmallText` writes an inline ASCII string's two words itself; these check that what
/// it makes is, bit for bit and in use, the string the standard library makes.
@Suite("Short ASCII text written as inline strings")
struct SmallTextTests {
    /// The standard library's string and the written one, for the same bytes.
    func both(_ bytes: [UInt8]) -> (library: String, written: String?) {
        (String(decoding: bytes, as: UTF8.self), bytes.withUnsafeBufferPointer { SmallText.string($0) })
    }

    /// A string's two words.
    func words(_ string: String) -> (UInt64, UInt64) {
        // Unsafe: a `String` is two words; its bits are read, not kept.
        unsafeBitCast(string, to: (UInt64, UInt64).self)
    }

    @Test func theLayoutIsTheOneExpectedOn64BitLinux() {
        // Where it is not, the fast path is off (and fetches take the library's way):
        // this test says so rather than letting it go unnoticed.
        #expect(SmallText.isLaidOutAsExpected)
    }

    @Test func everyLengthUpTo15IsTheLibrarysStringBitForBit() throws {
        var generator = SystemRandomNumberGenerator()
        for count in 0...15 {
            for _ in 0..<200 {
                // Any ASCII byte, NUL and DEL included.
                let bytes = (0..<count).map { _ in UInt8.random(in: 0...127, using: &generator) }
                let (library, written) = both(bytes)
                let string = try #require(written, "\(bytes)")
                #expect(words(string) == words(library), "\(bytes)")
                #expect(string == library)
                #expect(string.hashValue == library.hashValue)
                #expect(Array(string.utf8) == bytes)
                #expect(string.count == library.count)
            }
        }
    }

    @Test func theStringsWorkAsAnyOther() throws {
        let written = try #require(Array("user-0001234".utf8).withUnsafeBufferPointer { SmallText.string($0) })
        var grown = written
        grown += "-and-some-more-text-past-fifteen-bytes"
        #expect(grown == "user-0001234-and-some-more-text-past-fifteen-bytes")
        #expect(written == "user-0001234")
        #expect(written.uppercased() == "USER-0001234")
        #expect(written.hasPrefix("user-") && written.hasSuffix("1234"))
        #expect(Set([written, "user-0001234"]).count == 1)
        #expect((written as NSString).length == 12)
        #expect(written.split(separator: "-").map(String.init) == ["user", "0001234"])
        #expect(written < "user-0001235" && "user-0001233" < written)
    }

    @Test func nonASCIIAndLongerTextIsLeftToTheLibrary() {
        for bytes: [UInt8] in [
            Array("Grüße".utf8), Array("東京".utf8), [0x61, 0xFF, 0x62], [0x80], [0x7F, 0x80],
            Array(repeating: 0x61, count: 14) + [0xC3], Array("sixteen bytes!!!".utf8), Array(repeating: 0x61, count: 300),
        ] {
            #expect(both(bytes).written == nil, "\(bytes)")
        }
    }

    @Test func decodedCellsReadTheSameThroughEitherWay() {
        // `AttributeDecoding.text` (fetches) and `SmallText.decoded` (a `Connection`'s
        // `String` decoding, `Row.string(at:)`, `PostgresCell.string`) take this way for
        // ASCII up to 15 bytes and the library's for the rest; a cell reads the same
        // either way, invalid UTF-8 repaired as `String(decoding:as:)` repairs it.
        let samples: [[UInt8]] = ["", "a", "id-7", "fifteen bytes!!", "sixteen bytes!!!", "Grüße", "a\u{0}b"].map { Array($0.utf8) }
            + [[0x61, 0xFF, 0x62], [0xE6, 0x9D], Array(repeating: 0x80, count: 15)]
        for bytes in samples {
            let expected = String(decoding: bytes, as: UTF8.self)
            #expect(bytes.withUnsafeBufferPointer { AttributeDecoding.text($0) } == expected)
            #expect(bytes.withUnsafeBufferPointer { SmallText.decoded($0) } == expected)
        }
    }
}
