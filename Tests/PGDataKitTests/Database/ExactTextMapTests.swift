import Foundation
import Testing

@testable import PGDataKitPostgres

@Suite struct ExactTextMapTests {
    @Test func keepsTheFirstValueOfEachText() {
        var map = ExactTextMap()
        #expect(map.value(for: "a", inserting: 0) == 0)
        #expect(map.value(for: "b", inserting: 1) == 1)
        #expect(map.value(for: "a", inserting: 2) == 0)
        #expect(map.value(for: "a") == 0)
        #expect(map.value(for: "b") == 1)
        #expect(map.value(for: "c") == nil)
        #expect(map.count == 2)
    }

    @Test func textsAreTheirBytesNotCanonicalEquivalents() {
        var map = ExactTextMap()
        map.value(for: "caf\u{E9}", inserting: 1)
        #expect(map.value(for: "cafe\u{301}") == nil)  // equal as Swift `String`s
        #expect(map.value(for: "cafe\u{301}", inserting: 2) == 2)
        #expect(map.value(for: "caf\u{E9}") == 1)
        // The empty text, a NUL, and prefixes of one another are all different texts.
        for (value, text) in ["", "\u{0}", "\u{0}\u{0}", "abcdefgh", "abcdefghi", "abcdefg"].enumerated() {
            #expect(map.value(for: text, inserting: 10 + value) == 10 + value)
        }
        #expect(map.value(for: "") == 10)
        #expect(map.value(for: "abcdefgh") == 13)
        #expect(map.value(for: "abcdefghi") == 14)
        #expect(map.count == 8)
    }

    @Test func agreesWithADictionaryOfExactTextsAsItGrows() {
        // Texts of every length around the hash's 8-byte words, many sharing prefixes,
        // with repeats: the map starts small and grows several times.
        var generator = SystemRandomNumberGenerator()
        let pieces = ["user-", "0", "1", "42", "\u{E9}", "e\u{301}", "\u{1F600}", "abcdefgh", ""]
        var map = ExactTextMap(minimumCapacity: 2)
        var reference: [ExactText: Int] = [:]
        for value in 0..<5_000 {
            let text = (0..<Int.random(in: 0...6, using: &generator))
                .map { _ in pieces.randomElement(using: &generator) ?? "" }.joined()
            let expected = reference[ExactText(text)] ?? value
            reference[ExactText(text)] = expected
            #expect(map.value(for: text, inserting: value) == expected)
        }
        #expect(map.count == reference.count)
        for (text, value) in reference { #expect(map.value(for: text.text) == value) }
        #expect(map.value(for: "not among them \u{1F600}") == nil)
    }

    @Test("A short ASCII text is found whether it is stored inline or in a buffer of its own")
    func inlineTextIsFoundAsBufferedText() throws {
        // Inline strings (up to 15 ASCII bytes) are hashed from their two words; the same
        // bytes in a string with a buffer of its own must hash and compare alike.
        var generator = SystemRandomNumberGenerator()
        for length in 0...15 {
            for _ in 0..<100 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...127, using: &generator) }
                let inline = String(decoding: bytes, as: UTF8.self)
                #expect(SmallText.inlineASCII(inline) != nil)
                var buffered = String()
                buffered.reserveCapacity(64)
                buffered += inline
                #expect(SmallText.inlineASCII(buffered) == nil, "a buffered string: \(bytes)")
                var map = ExactTextMap(minimumCapacity: 2)
                map.value(for: inline, inserting: 1)
                #expect(map.value(for: buffered) == 1, "\(bytes)")
                var other = ExactTextMap(minimumCapacity: 2)
                other.value(for: buffered, inserting: 2)
                #expect(other.value(for: inline) == 2, "\(bytes)")
            }
        }
    }

    @Test func bridgedTextIsFoundAsNativeText() {
        var map = ExactTextMap()
        map.value(for: "caf\u{E9} au lait, a long enough text", inserting: 7)
        let bridged = NSString(string: "caf\u{E9} au lait, a long enough text") as String
        #expect(map.value(for: bridged) == 7)
    }
}
