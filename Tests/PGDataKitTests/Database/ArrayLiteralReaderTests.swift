import Testing

@testable import PGDataKitPostgres

/// `ArrayLiteralReader` hands out each element of an array's text form as the server
/// writes it (batch writes answer with one row of arrays, see `returningArrays`).
@Suite("Array literals read element by element")
struct ArrayLiteralReaderTests {
    /// The elements `text` reads as (`nil` when it is refused).
    static func elements(_ text: String) -> [String?]? {
        var bytes = text
        return bytes.withUTF8 { buffer in
            var reader = ArrayLiteralReader()
            var elements: [String?] = []
            let wellFormed = reader.forEachElement(in: buffer) { elements.append($0.map { String(decoding: $0, as: UTF8.self) }) }
            return wellFormed ? elements : nil
        }
    }

    @Test func elementsAsTheServerWritesThem() {
        #expect(Self.elements("{}") == [])
        #expect(Self.elements("{1}") == ["1"])
        #expect(Self.elements("{1,-2,30}") == ["1", "-2", "30"])
        #expect(Self.elements(#"{a,"b c",NULL,"NULL",null,"","q\"x","back\\slash","{x,y}"}"#)
            == ["a", "b c", nil, "NULL", nil, "", "q\"x", "back\\slash", "{x,y}"])
        #expect(Self.elements("[0:2]={7,8,9}") == ["7", "8", "9"])
        #expect(Self.elements(#"{"naïve 東京",t,f}"#) == ["naïve 東京", "t", "f"])
    }

    @Test(arguments: [
        "", "{", "}", "1,2", "{1,2", "{1,,2}", "{,1}", "{1,}", "{{1,2}}", #"{"a}"#, #"{"a\"}"#, #"{a"b}"#,
        #"{"a"b}"#, "[0:1]{1,2}", "[0:1={1,2}", "{1}x",
    ])
    func malformedTextIsRefused(_ text: String) {
        #expect(Self.elements(text) == nil)
    }

    @Test func integersAndBooleans() {
        func read<T>(_ text: String, _ body: (inout ArrayLiteralReader, UnsafeBufferPointer<UInt8>) -> T) -> T {
            var bytes = text
            return bytes.withUTF8 { buffer in
                var reader = ArrayLiteralReader()
                return body(&reader, buffer)
            }
        }
        #expect(read("{1,-2,9223372036854775807,-9223372036854775808}") { $0.int64s(in: $1) }
            == [1, -2, .max, .min])
        #expect(read("{}") { $0.int64s(in: $1) } == [])
        #expect(read("{9223372036854775808}") { $0.int64s(in: $1) } == nil)  // out of range
        #expect(read("{1,NULL}") { $0.int64s(in: $1) } == nil)
        #expect(read("{1,x}") { $0.int64s(in: $1) } == nil)
        #expect(read("{1,2") { $0.int64s(in: $1) } == nil)
        #expect(read("{t,f,t}") { $0.booleans(in: $1) } == [true, false, true])
        #expect(read("{t,NULL}") { $0.booleans(in: $1) } == nil)
        #expect(read("{true}") { $0.booleans(in: $1) } == nil)
    }

    @Test func whatTheBuilderWritesReadsBack() throws {
        // Every element quoted by `ArrayLiteralBuilder`, escapes anywhere, read back by the
        // reader (which copies only the escaped ones).
        var generator = FuzzGenerator(state: 58)
        let alphabet: [Character] = ["a", "{", "}", ",", "\"", "\\", " ", "é", "7", "N", "U", "L"]
        for _ in 0..<200 {
            let texts = (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                String((0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator) ?? "a" })
            }
            var literal = ArrayLiteralBuilder(capacity: 1)
            for text in texts { try literal.append(text) }
            #expect(Self.elements(literal.text()) == texts)
        }
    }
}
