import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("Fetch fast path: decoding attribute text without generic dispatch")
struct AttributeDecodingTests {
    func decode(_ decoding: AttributeDecoding, _ text: String) -> StoredValue? {
        Array(text.utf8).withUnsafeBufferPointer { decoding.decode($0) }
    }

    @Test(arguments: [
        ("0", 0), ("42", 42), ("-42", -42), ("9223372036854775807", Int.max),
        ("-9223372036854775808", Int.min),
    ])
    func integersInRange(_ text: String, _ expected: Int) {
        #expect(decode(.int, text).flatMap { $0.scalar(as: Int.self) } == expected)
        #expect(decode(.int64, text).flatMap { $0.scalar(as: Int64.self) } == Int64(expected))
    }

    @Test(arguments: ["", "-", "+1", " 1", "1 ", "1.5", "9223372036854775808", "-9223372036854775809", "12a"])
    func anythingElseIsLeftToTheClosure(_ text: String) {
        #expect(decode(.int, text) == nil)
    }

    @Test func narrowIntegersMustFit() {
        #expect(decode(.int32, "2147483647").flatMap { $0.scalar(as: Int32.self) } == Int32.max)
        #expect(decode(.int32, "2147483648") == nil)
        #expect(decode(.int16, "-32768").flatMap { $0.scalar(as: Int16.self) } == Int16.min)
        #expect(decode(.int16, "32768") == nil)
    }

    @Test func textReadsAsDecodingDoesAtEveryLength() {
        // Up to 15 bytes go straight into a small string; longer text is validated. Both
        // read as `String(decoding:as:)` does, invalid UTF-8 repaired.
        let samples: [[UInt8]] = [
            [], Array("a".utf8), Array("user-0001234".utf8), Array("fifteen bytes!!".utf8),
            Array("sixteen bytes!!!".utf8), Array("Grüße".utf8), Array("東京".utf8),
            [0x61, 0xFF, 0x62], [0xE6, 0x9D], Array(repeating: 0x80, count: 15), Array(repeating: 0x80, count: 16),
        ]
        for bytes in samples {
            let expected = String(decoding: bytes, as: UTF8.self)
            #expect(bytes.withUnsafeBufferPointer { AttributeDecoding.text($0) } == expected)
            #expect(bytes.withUnsafeBufferPointer { decodedText(.string, $0) } == expected)
        }
    }

    func decodedText(_ decoding: AttributeDecoding, _ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        decoding.decode(bytes).flatMap { $0.scalar(as: String.self) }
    }

    @Test func booleansStringsAndTheRest() {
        #expect(decode(.bool, "t").flatMap { $0.scalar(as: Bool.self) } == true)
        #expect(decode(.bool, "f").flatMap { $0.scalar(as: Bool.self) } == false)
        #expect(decode(.bool, "true") == nil)
        #expect(decode(.string, "Grüße 👋").flatMap { $0.scalar(as: String.self) } == "Grüße 👋")
        #expect(decode(.string, "").flatMap { $0.scalar(as: String.self) } == "")
        #expect(decode(.generic, "1") == nil)
    }

    @Test func theKindFollowsTheScalarType() {
        #expect(AttributeDecoding(String.self) == .string)
        #expect(AttributeDecoding(Int.self) == .int)
        #expect(AttributeDecoding(Int64.self) == .int64)
        #expect(AttributeDecoding(Int32.self) == .int32)
        #expect(AttributeDecoding(Int16.self) == .int16)
        #expect(AttributeDecoding(Bool.self) == .bool)
        #expect(AttributeDecoding(Double.self) == .generic)
        #expect(AttributeDecoding(Decimal.self) == .generic)
    }
}
