import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Decodes `text` as `T` the way a result column would be.
private func decode<T: PostgresDecodable>(_ type: T.Type, from text: String?) throws -> T {
    guard var text else { return try T.decode(from: PostgresCell(bytes: nil)) }
    return try text.withUTF8 { try T.decode(from: PostgresCell(bytes: $0)) }
}

@Suite("Value encoding without a server")
struct ValueEncodingTests {
    @Test func integersParseAndRejectOverflow() throws {
        #expect(try decode(Int.self, from: "-9223372036854775808") == Int.min)
        #expect(try decode(Int16.self, from: "32767") == Int16.max)
        #expect(throws: PostgresValueError.self) { try decode(Int16.self, from: "32768") }
        #expect(throws: PostgresValueError.self) { try decode(Int.self, from: "12a") }
        #expect(throws: PostgresValueError.self) { try decode(Int.self, from: "") }
        #expect(throws: PostgresValueError.self) { try decode(Int.self, from: nil) }
        #expect(try decode(Int?.self, from: nil) == nil)
    }

    /// `Row.decimal`, the fast path of every integer cell the object graph reads (keys,
    /// versions, integer attributes): each length up to 20 digits and past it, both signs,
    /// the limits and one past them, leading zeros, and what is no decimal.
    @Test func decimalsOfEveryLengthParseAndOverflowIsRefused() {
        func decimal(_ text: String) -> Int64? {
            var text = text
            return text.withUTF8 { Row.decimal($0) }
        }
        var magnitude: Int64 = 0
        for digits in 1...18 {
            magnitude = magnitude * 10 + Int64(digits % 10)
            #expect(decimal(String(magnitude)) == magnitude, "\(digits) digits")
            #expect(decimal("-" + String(magnitude)) == -magnitude, "\(digits) digits, negative")
        }
        #expect(decimal("9223372036854775807") == .max)
        #expect(decimal("-9223372036854775808") == .min)
        #expect(decimal("9223372036854775808") == nil)
        #expect(decimal("-9223372036854775809") == nil)
        #expect(decimal("99999999999999999999") == nil)
        #expect(decimal("00000000000000000000042") == 42)
        #expect(decimal("-0") == 0)
        #expect(decimal("0") == 0)
        for text in ["", "-", "+1", "1-", "12a", "1 ", " 1", "--1", "１", "1.0", "123456789012345678x"] {
            #expect(decimal(text) == nil, "\(text)")
        }
    }

    @Test(arguments: [
        ("2024-02-29 13:45:01.5+00", 1_709_214_301_500_000),
        ("2024-02-29 19:15:01.5+05:30", 1_709_214_301_500_000),
        ("2024-02-29 10:15:01.500000-03:30", 1_709_214_301_500_000),
        ("1970-01-01 00:00:00+00", 0),
        ("1969-12-31 23:59:59.999999+00", -1),
        ("2000-01-01", 946_684_800_000_000),
        ("1900-01-01 00:00:00-00:17:30", -2_208_987_750_000_000),
    ] as [(String, Int64)])
    func timestampsParse(_ text: String, _ micros: Int64) throws {
        var text = text
        #expect(text.withUTF8 { TimestampText.parse($0) } == micros)
    }

    @Test func timestampsFormatAndReparse() {
        for micros: Int64 in [0, -1, 1_709_214_301_500_000, -62_135_596_800_000_000 - 86_400_000_000, 253_402_300_799_999_999] {
            var text = TimestampText.format(microsecondsSince1970: micros)
            #expect(text.withUTF8 { TimestampText.parse($0) } == micros, "\(text)")
        }
        #expect(TimestampText.format(microsecondsSince1970: 0) == "1970-01-01 00:00:00.000000+00")
        #expect(TimestampText.format(microsecondsSince1970: -62_135_596_800_000_000 - 86_400_000_000).hasSuffix(" BC"))
    }

    @Test func malformedTimestampsAreRejected() {
        for bad in ["", "2024", "2024-13-01", "2024-01-01 25", "yesterday", "2024-01-01 10:00:00 AD"] {
            var text = bad
            #expect(text.withUTF8 { TimestampText.parse($0) } == nil, "\(bad)")
        }
    }

    @Test func arrayLiteralsQuoteEverything() throws {
        #expect(try ["a", "b\"c", "d\\e"].postgresText() == #"{"a","b\"c","d\\e"}"#)
        #expect(try ([1, nil, 3] as [Int?]).postgresText() == #"{"1",NULL,"3"}"#)
        #expect(try ([] as [Int]).postgresText() == "{}")
        #expect([Int].postgresType.oid == PostgresType.int8.arrayOID)
    }

    /// A type with only the protocol's required members: its arrays take the default path.
    struct Tag: PostgresEncodable {
        var name: String
        static var postgresType: PostgresType { .unknown }
        func postgresText() throws -> String? { name.isEmpty ? nil : "#" + name }
    }

    @Test func everyElementTypeWritesTheSameLiteral() throws {
        // Each element type's own writer, against the text of each element quoted by hand.
        func expected(_ texts: [String?]) -> String {
            "{" + texts.map { text in
                text.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
                    ?? "NULL"
            }.joined(separator: ",") + "}"
        }
        let strings = ["", "a\"b", "c\\d", "東京"]
        #expect(try strings.postgresText() == expected(strings))
        #expect(try (strings + [nil] as [String?]).postgresText() == expected(strings + [nil]))
        #expect(try ([Int.min, 0, Int.max] as [Int]).postgresText() == expected(["\(Int.min)", "0", "\(Int.max)"]))
        #expect(try ([Int64.min, nil] as [Int64?]).postgresText() == expected(["\(Int64.min)", nil]))
        #expect(try ([Int32.min, 7] as [Int32]).postgresText() == expected(["\(Int32.min)", "7"]))
        #expect(try ([nil, Int16.max] as [Int16?]).postgresText() == expected([nil, "\(Int16.max)"]))
        #expect(try ([1.5, -0.25] as [Double]).postgresText() == expected(["1.5", "-0.25"]))
        #expect(try [Tag(name: "x\"y"), Tag(name: "")].postgresText() == expected(["#x\"y", nil]))
        #expect(try ([Tag(name: "z"), nil] as [Tag?]).postgresText() == expected(["#z", nil]))
        #expect(throws: PostgresValueError.self) { try ["a\u{0}b"].postgresText() }
        #expect(throws: PostgresValueError.self) { try (["a\u{0}b", nil] as [String?]).postgresText() }
    }

    @Test func arrayLiteralBuilderWritesEveryElementAndGrows() throws {
        let integers: [Int64] = [Int64.min, -1_000_000_000_000_000_000, -10, -9, -1, 0, 1, 9, 10, 99, 100, 999_999_999_999_999_999, Int64.max]
        var literal = ArrayLiteralBuilder(capacity: 1)
        for value in integers { literal.append(value) }
        literal.appendNull()
        #expect(literal.text() == "{" + (integers.map { "\"\($0)\"" } + ["NULL"]).joined(separator: ",") + "}")
        for value in integers {
            var bytes: [UInt8] = []
            appendDecimal(value, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == String(value))
        }

        // Long, escaped and non-ASCII texts, far past the room the builder starts with.
        let texts = ["", "plain", "q\"uote", "back\\slash\\", "\"\\\"", "naïve 東京 🚀", String(repeating: "x\"", count: 5_000)]
        var strings = ArrayLiteralBuilder(capacity: 2)
        for text in texts { try strings.append(text) }
        let escaped = texts.map { text in
            "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        let written = strings.text()
        #expect(written == "{" + escaped.joined(separator: ",") + "}")
        var bytes = written
        #expect(bytes.withUTF8 { ArrayLiteralParser.parse($0) } == texts)

        var refused = ArrayLiteralBuilder(capacity: 4)
        try refused.append("a")
        #expect(throws: PostgresValueError.self) { try refused.append("nul\u{0}inside") }
        for text in ["\u{0}", "\u{0}first", "last\u{0}", "q\"\\\u{0}"] {
            #expect(throws: PostgresValueError.self) { try refused.append(text) }
        }
        try refused.append(" !#[]^~\u{1}")  // (bytes around the escaped ones, kept as they are)
        #expect(refused.text() == "{\"a\",\" !#[]^~\u{1}\"}")
    }

    @Test func arrayLiteralBuilderFindsEveryByteToEscapeWherever() throws {
        // The scan reads eight bytes at a time, then one by one: each special byte at each
        // position of texts shorter and longer than a word or two.
        for length in 1...19 {
            for position in 0..<length {
                for special in ["\"", "\\", "\u{0}"] {
                    var characters = Array(repeating: "a", count: length)
                    characters[position] = special
                    let text = characters.joined()
                    var literal = ArrayLiteralBuilder(capacity: 1)
                    if special == "\u{0}" {
                        #expect(throws: PostgresValueError.self) { try literal.append(text) }
                        #expect(literal.text() == "{}")
                    } else {
                        try literal.append(text)
                        #expect(literal.text() == "{\"" + text.replacingOccurrences(of: special, with: "\\" + special) + "\"}")
                    }
                }
            }
        }
    }

    @Test("Short ASCII strings, written from their two words, read back as written: every length, every ASCII byte")
    func arrayLiteralBuilderWritesShortStringsFromTheirWords() throws {
        // A string the standard library keeps inline (up to 15 ASCII bytes) is copied from
        // its words (`SmallText.inlineASCII`); one holding `"`, `\` or NUL takes the
        // escaping way, which escapes it or refuses it.
        var generator = SystemRandomNumberGenerator()
        for length in 0...15 {
            for round in 0..<300 {
                // Printable ASCII with the special bytes now and then, NUL in some rounds.
                let bytes = (0..<length).map { _ -> UInt8 in
                    switch UInt8.random(in: 0...40, using: &generator) {
                    case 0: return UInt8(ascii: "\"")
                    case 1: return UInt8(ascii: "\\")
                    case 2: return round % 10 == 0 ? 0 : UInt8(ascii: "a")
                    default: return UInt8.random(in: 32...126, using: &generator)
                    }
                }
                let text = String(decoding: bytes, as: UTF8.self)
                let inline = try #require(SmallText.inlineASCII(text), "\(bytes)")
                #expect(inline.count == length)
                var builder = ArrayLiteralBuilder(capacity: 1)
                try builder.append("x")
                if bytes.contains(0) {
                    #expect(throws: PostgresValueError.self) { try builder.append(text) }
                    try builder.append("y")
                    #expect(builder.text() == "{\"x\",\"y\"}")
                    continue
                }
                try builder.append(text)
                try builder.append("y")
                let escaped = text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                let written = builder.text()
                #expect(written == "{\"x\",\"" + escaped + "\",\"y\"}", "\(bytes)")
                var parsed = written
                #expect(parsed.withUTF8 { ArrayLiteralParser.parse($0) } == ["x", text, "y"])
            }
        }
        // Anything else is not read from its words: longer texts, non-ASCII ones.
        for text in ["sixteen bytes!!!", "é", "naïve", "東京", String(repeating: "a", count: 100)] {
            #expect(SmallText.inlineASCII(text) == nil, "\(text)")
        }
    }

    @Test func arrayLiteralBuilderEscapesTextsDenseWithQuotes() throws {
        // JSON-like texts (a quote every few bytes), runs of plain bytes around them, and
        // a NUL after escaped bytes, which refuses the whole element.
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Character] = ["a", "b", "{", ":", ",", "\"", "\\", " ", "é", "7"]
        for length in [1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 300, 1_000] {
            for _ in 0..<20 {
                let text = String((0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
                var literal = ArrayLiteralBuilder(capacity: 1)
                try literal.append("first")
                try literal.append(text)
                let escaped = text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                let written = literal.text()
                #expect(written == "{\"first\",\"" + escaped + "\"}")
                var bytes = written
                #expect(bytes.withUTF8 { ArrayLiteralParser.parse($0) } == ["first", text])
                var refused = ArrayLiteralBuilder(capacity: 1)
                try refused.append("kept")
                #expect(throws: PostgresValueError.self) { try refused.append(text + "\u{0}" + text) }
                #expect(refused.text() == "{\"kept\"}")
            }
        }
    }

    @Test func arrayLiteralsParse() throws {
        #expect(try decode([String?].self, from: #"{a,"b c",NULL,"NULL","q\"x"}"#) == ["a", "b c", nil, "NULL", "q\"x"])
        #expect(try decode([Int].self, from: "[0:1]={7,8}") == [7, 8])
        #expect(try decode([Int].self, from: "{}") == [])
        #expect(throws: PostgresValueError.self) { try decode([Int].self, from: "{{1,2},{3,4}}") }
        #expect(throws: PostgresValueError.self) { try decode([Int].self, from: "{1,NULL}") }
        #expect(throws: PostgresValueError.self) { try decode([Int].self, from: "1,2") }
    }

    @Test func byteaHex() throws {
        #expect(try Data([0x00, 0xAB, 0xFF]).postgresText() == "\\x00abff")
        #expect(try decode(Data.self, from: "\\x00ABff") == Data([0x00, 0xAB, 0xFF]))
        #expect(throws: PostgresValueError.self) { try decode(Data.self, from: "\\x0g") }
        #expect(throws: PostgresValueError.self) { try decode(Data.self, from: "plain") }
    }

    @Test func doublesUseShortestRoundTripText() throws {
        #expect(try 0.1.postgresText() == "0.1")
        #expect(try Double.infinity.postgresText() == "Infinity")
        #expect(try (-Double.infinity).postgresText() == "-Infinity")
        #expect(try Double.nan.postgresText() == "NaN")
        #expect(try decode(Double.self, from: "-Infinity") == -.infinity)
    }

    @Test func jsonTextIsCompactAndSorted() throws {
        let value: JSONValue = ["b": [1, 2.5, nil], "a": "x\"\n\u{1}", "c": true]
        #expect(value.jsonText == #"{"a":"x\"\n\u0001","b":[1,2.5,null],"c":true}"#)
        #expect(try JSONValue(parsing: value.jsonText) == value)
        #expect(throws: PostgresValueError.self) { try decode(JSONValue.self, from: "{not json") }
    }

    @Test func errorsNameColumnRowAndType() {
        let error = PostgresValueError(
            code: .invalidText, swiftType: "Int", column: "age", row: 3, typeOID: 25, text: "abc")
        #expect(error.description.contains("\"age\""))
        #expect(error.description.contains("row 3"))
        #expect(error.description.contains("Int"))
    }

    @Test("A statement's parameters become C strings in one block: each text whole, NULL as nil, an unencodable one thrown")
    func parametersAreEncodedIntoOneBlock() throws {
        let long = String(repeating: "é", count: 40)
        let parameters: [(any PostgresEncodable)?] = [nil, "abc", Int64(-42), "", long, true, nil]
        let (encoded, storage) = try Connection.encode(parameters)
        defer { free(storage) }
        let texts = encoded.values
        #expect(texts.count == parameters.count)
        #expect(encoded.types == [0, 0, 20, 0, 0, 16, 0])  // (text goes untyped: the server infers it)
        #expect(!encoded.hasBinary)  // (all text: libpq gets nil lengths and formats)
        #expect(encoded.lengthsAndFormats.lengths.isEmpty && encoded.lengthsAndFormats.formats.isEmpty)
        let strings = texts.map { $0.map { String(cString: $0) } }
        #expect(strings == [nil, "abc", "-42", "", long, "t", nil])
        // One after another in the block the caller frees, after a pointer, a length and
        // a format each.
        let first = try #require(texts[1])
        #expect(UnsafeMutableRawPointer(first) == storage.map { $0 + 7 * 16 })
        #expect(texts[2] == first + 4)
        let allNull = try Connection.encode([nil, nil])
        defer { free(allNull.storage) }
        #expect(Array(allNull.parameters.values) == [nil, nil])
        let none = try Connection.encode([])
        #expect(none.storage == nil && none.parameters.values.isEmpty)
        #expect(throws: PostgresValueError.self) {
            _ = try Connection.encode(["fine", "nul\u{0}inside"])
        }
    }

    @Test("An integer array goes into the block in binary, beside texts; every parameter then has a length and a format")
    func binaryParametersAreEncodedBesideTexts() throws {
        let parameters: [(any PostgresEncodable)?] = ["ab", [Int64(1), -2] as [Int64], nil, [] as [Int]]
        let (encoded, storage) = try Connection.encode(parameters)
        defer { free(storage) }
        #expect(encoded.types == [0, 1016, 0, 1016])
        #expect(Array(encoded.lengthsAndFormats.formats) == [0, 1, 0, 1])
        #expect(Array(encoded.lengthsAndFormats.lengths) == [2, 20 + 2 * 12, 0, 12])
        let text = try #require(encoded.values[0])
        #expect(String(cString: text) == "ab")
        let array = try #require(encoded.values[1])
        #expect(array == text + 3)  // (after the text and its NUL)
        let bytes = UnsafeRawBufferPointer(start: array, count: 44).map { $0 }
        // One dimension, no NULL, element type 20 (bigint), 2 elements from 1; then each
        // element's length and big-endian bytes.
        #expect(Array(bytes[0..<20]) == [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 2, 0, 0, 0, 1])
        #expect(Array(bytes[20..<32]) == [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1])
        #expect(Array(bytes[32..<44]) == [0, 0, 0, 8, 255, 255, 255, 255, 255, 255, 255, 254])
        #expect(encoded.values[2] == nil)
        // An empty array has no dimension: 12 bytes, the element type last.
        let empty = try #require(encoded.values[3])
        #expect(empty == array + 44)
        #expect(UnsafeRawBufferPointer(start: empty, count: 12).map { $0 } == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20])
    }

    @Test("A transaction's BEGIN names its isolation level and read-only mode")
    func beginStatementsNameTheirModes() {
        for isolation in [nil] + IsolationLevel.allCases {
            for readOnly in [false, true] {
                let expected = "BEGIN" + (isolation.map { " ISOLATION LEVEL \($0.rawValue)" } ?? "")
                    + (readOnly ? " READ ONLY" : "")
                #expect(Connection.beginSQL(isolation: isolation, readOnly: readOnly) == expected)
            }
        }
    }

    @Test("A literal array parameter has the type of an array of its element")
    func arrayLiteralsHaveTheirArrayType() {
        #expect(ArrayLiteral<Int64>.postgresType == [Int64?].postgresType)
        #expect(ArrayLiteral<Int64>.postgresType.oid == 1016)
        #expect(ArrayLiteral<String>.postgresType == [String?].postgresType)
        #expect(ArrayLiteral<UUID>.postgresType.oid == 2951)
        #expect(ArrayLiteral<Bool>.postgresType.oid == 1000)
    }

    @Test("A JSON string is quoted byte for byte as JSON wants: every control character, quote and backslash escaped, the rest as it is")
    func jsonStringsAreQuotedExactly() {
        // The reference, scalar by scalar.
        func reference(_ string: String) -> String {
            var text = "\""
            for scalar in string.unicodeScalars {
                switch scalar {
                case "\"": text += "\\\""
                case "\\": text += "\\\\"
                case "\n": text += "\\n"
                case "\r": text += "\\r"
                case "\t": text += "\\t"
                case _ where scalar.value < 0x20: text += String(format: "\\u%04x", scalar.value)
                default: text.unicodeScalars.append(scalar)
                }
            }
            return text + "\""
        }
        let controls = String(String.UnicodeScalarView((1..<0x20).compactMap(Unicode.Scalar.init)))
        let samples = [
            "", "plain", "x\"y", "back\\slash", controls, "Café 日本 😀", "\u{7F}\u{80}\u{FFFF}", String(repeating: "ab\"", count: 300),
        ]
        for sample in samples {
            #expect(JSONValue.string(sample).jsonText == reference(sample), "\(sample.debugDescription)")
            var bytes: [UInt8] = [1]
            JSONValue.appendQuoted(sample, to: &bytes)
            #expect(bytes == [1] + Array(reference(sample).utf8))
        }
    }
}
