import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite struct ExactTextTests {
    @Test func equalityIsByteForByteNotCanonical() {
        let composed = ExactText("caf\u{E9}")
        let decomposed = ExactText("cafe\u{301}")
        #expect(composed.text == decomposed.text)  // Swift's String
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed, ExactText("caf\u{E9}")]).count == 2)
    }

    @Test func orderIsTheBytesOrderWithPrefixesFirst() {
        let texts = ["b", "a", "ab", "", "\u{E9}", "e\u{301}", "Z"].map(ExactText.init)
        // UTF-8: "" < "Z" (5A) < "a" < "ab" < "b" < "e\u{301}" (65 CC 81) < "é" (C3 A9)
        #expect(texts.sorted().map(\.text) == ["", "Z", "a", "ab", "b", "e\u{301}", "\u{E9}"])
        #expect(ExactText.compare("a", "a") == 0)
        #expect(ExactText.compare("a", "ab") < 0)
        #expect(ExactText.compare("ab", "a") > 0)
    }

    @Test func bridgedTextComparesLikeNativeText() {
        let bridged = NSString(string: "caf\u{E9} au lait") as String
        #expect(ExactText(bridged) == ExactText("caf\u{E9} au lait"))
        #expect(ExactText(bridged).hashValue == ExactText("caf\u{E9} au lait").hashValue)
        #expect(ExactText.compare(bridged, "cafe\u{301} au lait") > 0)
    }

    @Test func packedTextsSortAndCompareInExactTextOrder() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["", "a", "ab", "b", "Z", "\u{E9}", "e\u{301}", "\u{1F600}", "a\u{0}", "zz"]
        let texts = (0..<500).map { _ in
            (0..<Int.random(in: 0...3, using: &generator)).map { _ in pieces.randomElement(using: &generator) ?? "" }.joined()
        }
        let packed = PackedTexts(texts)
        #expect(packed.count == texts.count)
        let order = packed.sortedIndices()
        #expect(Set(order).count == texts.count)
        for (earlier, later) in zip(order, order.dropFirst()) {
            #expect(ExactText.compare(texts[earlier], texts[later]) <= 0)
            #expect(packed.equal(earlier, later) == (ExactText.compare(texts[earlier], texts[later]) == 0))
        }
        #expect(PackedTexts([]).sortedIndices().isEmpty)
        #expect(PackedTexts(["only"]).sortedIndices() == [0])
    }

    @Test func packedTextsSortPastASharedPrefix() {
        // Keys as imports have them (a long shared prefix), and texts equal in their first
        // eight bytes past it, shorter ones, NULs and all-empty batches.
        var texts = (0..<300).map { "user-" + String(1_000_000 - $0 * 7919 % 1_000_000) }
        texts += ["user-1", "user-", "user-123456789012", "user-123456789011", "user-12345678901", "user-1\u{0}", "user-1\u{0}\u{0}"]
        texts += ["user-99999999\u{E9}", "user-99999999e\u{301}", "user-99999999"]
        texts.shuffle()
        let order = PackedTexts(texts).sortedIndices()
        #expect(order.map { ExactText(texts[$0]) } == texts.map(ExactText.init).sorted())
        #expect(PackedTexts(["", "", ""]).sortedIndices().count == 3)
        #expect(PackedTexts(["same", "same"]).sortedIndices().sorted() == [0, 1])
    }

    @Test("Texts in order, each after the one before, are known all different; equal neighbours or another order are not")
    func sortedIndicesTellsWhenOrderedTextsAreDistinct() {
        let ordered = (0..<100).map { "user-" + String(format: "%07d", $0) }
        var distinct = false
        #expect(PackedTexts(ordered).sortedIndices(distinct: &distinct) == Array(ordered.indices))
        #expect(distinct)
        #expect(PackedTexts(ordered + ordered.suffix(1)).sortedIndices(distinct: &distinct) == Array(0...ordered.count))
        #expect(!distinct)
        // Equal past the eight bytes after the shared prefix, in order: not distinct.
        #expect(PackedTexts(["key-123456789a", "key-123456789a", "key-123456789b"]).sortedIndices(distinct: &distinct) == [0, 1, 2])
        #expect(!distinct)
        #expect(PackedTexts(Array(ordered.reversed())).sortedIndices(distinct: &distinct) == Array(ordered.indices.reversed()))
        #expect(!distinct)
        #expect(PackedTexts(["only"]).sortedIndices(distinct: &distinct) == [0])
        #expect(distinct)
    }

    @Test("A short ASCII text packs the same bytes whether it is stored inline or in a buffer of its own")
    func packedTextsOfInlineAndBufferedStringsAgree() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...20 {
            for _ in 0..<50 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...127, using: &generator) }
                let inline = String(decoding: bytes, as: UTF8.self)
                var buffered = String()
                buffered.reserveCapacity(64)
                buffered += inline
                let packed = PackedTexts([inline, buffered, "after"])
                #expect(packed.equal(0, 1), "\(bytes)")
                #expect(bytes.withUnsafeBufferPointer { packed.compare(0, with: $0) } == 0, "\(bytes)")
                #expect(bytes.withUnsafeBufferPointer { packed.compare(1, with: $0) } == 0, "\(bytes)")
                #expect(!packed.equal(1, 2) || length == 5 && inline == "after")
            }
        }
    }

    @Test func packedTextsInOrderAlreadyStayAndAlmostOrderedOnesSort() {
        // In order, with neighbours equal in the eight bytes past the shared prefix.
        let ordered = (0..<200).map { "key-" + String(format: "%012d", $0 / 2) + ($0 % 2 == 0 ? "a" : "b") }
        #expect(PackedTexts(ordered).sortedIndices() == Array(ordered.indices))
        #expect(PackedTexts(ordered + ordered.suffix(1)).sortedIndices() == Array(0...ordered.count))
        // One pair out of order only past those eight bytes, then one at the very start.
        var swapped = ordered
        swapped.swapAt(150, 151)
        #expect(PackedTexts(swapped).sortedIndices().map { swapped[$0] } == ordered)
        swapped = ordered
        swapped.swapAt(0, 1)
        #expect(PackedTexts(swapped).sortedIndices().map { swapped[$0] } == ordered)
    }
}
