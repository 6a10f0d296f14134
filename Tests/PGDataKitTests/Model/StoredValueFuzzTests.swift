import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// An attribute of every storable kind: the scalars, enums of each raw type, `Codable`,
/// arrays.
private final class FuzzSpecimen: ManagedObject {
    @Attribute var text: String = ""
    @Attribute var small: Int16 = 0
    @Attribute var medium: Int32 = 0
    @Attribute var large: Int = 0
    @Attribute var wide: Int64?
    @Attribute var real: Float = 0
    @Attribute var double: Double?
    @Attribute var decimal: Decimal = 0
    @Attribute var flag: Bool = false
    @Attribute var when: Date?
    @Attribute var tag: UUID?
    @Attribute var blob: Data = Data()
    @Attribute var json: JSONValue?
    @Attribute var status: UnitStatus = .draft
    @Attribute var priority: UnitPriority?
    @Attribute var size: UnitSize = .small
    @Attribute var level: UnitLevel?
    @Attribute var address: UnitAddress?
    @Attribute var tags: [String] = []
    @Attribute var scores: [Int]?
    @Attribute var moments: [Date] = []
}

/// Cells a server (or a proxy, or a corrupted row) could hand the decoders: every
/// attribute's decoding — the fetch fast path, the decode closure and the check of the
/// narrower types — either reads a value or throws a typed error. Nothing traps. (Array
/// literals are fuzzed further in `ArrayAttributeTypeTests`.)
@Suite("Stored-value fuzzing without a server")
struct StoredValueFuzzTests {
    /// Texts the server writes for the attribute types, to mutate.
    static let seeds: [String] = [
        "", "0", "-1", "32767", "-32768", "2147483648", "9223372036854775807", "-9223372036854775808",
        "99999999999999999999", "1.5", "-0", "1e308", "1e-400", "NaN", "Infinity", "-Infinity", "t", "f",
        "true", "2024-05-01 12:00:00.25+00", "2024-05-01 12:00:00+05:30", "4714-11-24 00:00:00+00 BC",
        "294276-12-31 23:59:59.999999+00", "infinity", "-infinity", "2024-02-30 00:00:00+00",
        "123e4567-e89b-12d3-a456-426614174000", "123E4567E89B12D3A456426614174000", "\\x", "\\xdeadbeef",
        "\\x0", "\\xzz", "null", "{}", "[]", "[1,2,[3,{\"a\":null}]]", "{\"city\":\"Oslo\",\"zip\":\"0150\"}",
        "{\"city\":5}", "\"draft\"", "draft", "published", "1", "2", "3", "{\"a\":\"\\ud800\"}", "1e999",
        String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        String(repeating: "{\"a\":", count: 300) + "1" + String(repeating: "}", count: 300),
        String(repeating: "9", count: 60), "0." + String(repeating: "0", count: 200) + "1",
        "{\"a\",\"b\",NULL}", "{{1,2},{3,4}}", "[0:1]={1,2}", "é", "日本🚀",
    ]

    /// A seed, changed a few times: bytes flipped, inserted, removed, duplicated, cut.
    private static func mutated(_ seed: String, using random: inout FuzzGenerator) -> [UInt8] {
        var bytes = Array(seed.utf8)
        let alphabet = Array("0123456789+-.eE:{}[],\"\\ \u{0}tfnulTxaAZ".utf8) + [0xFF, 0xC3, 0x80, 0xED, 0xA0]
        for _ in 0..<Int.random(in: 0...4, using: &random) {
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where !bytes.isEmpty:
                bytes[Int.random(in: 0..<bytes.count, using: &random)] = alphabet.randomElement(using: &random) ?? 0
            case 1:
                bytes.insert(alphabet.randomElement(using: &random) ?? 0, at: Int.random(in: 0...bytes.count, using: &random))
            case 2 where !bytes.isEmpty:
                bytes.remove(at: Int.random(in: 0..<bytes.count, using: &random))
            case 3 where !bytes.isEmpty:
                let start = Int.random(in: 0..<bytes.count, using: &random)
                bytes.insert(contentsOf: bytes[start...], at: start)
            case 4 where !bytes.isEmpty:
                bytes.removeLast(Int.random(in: 0...bytes.count, using: &random))
            default:
                break
            }
        }
        return bytes
    }

    /// Decodes `bytes` as `attribute` every way a fetch does; returns whether a value was
    /// read, and records an issue for an error that is not one of the typed ones.
    private static func decode(_ bytes: [UInt8], as attribute: AttributeDescription) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            _ = attribute.decoding.decode(buffer)
            do {
                let value = try attribute.decode(PostgresCell(bytes: buffer, columnName: attribute.columnName))
                if let problem = attribute.storedValueProblem?(value) {
                    #expect(!problem.isEmpty)
                    return false
                }
                return true
            } catch is PostgresValueError {
                return false
            } catch {
                Issue.record("\(attribute.name): \(type(of: error)) is not a typed value error: \(error)")
                return false
            }
        }
    }

    @Test func mutatedTextsOfEveryKindReadOrThrowTypedErrors() throws {
        let entity = try #require(try Model(entities: [FuzzSpecimen.self]).entity(for: FuzzSpecimen.self))
        var random = FuzzGenerator(state: 0x5EED_0045)
        var read = 0
        var refused = 0
        for _ in 0..<3_000 {
            let bytes = Self.mutated(Self.seeds.randomElement(using: &random) ?? "", using: &random)
            for attribute in entity.attributes {
                if Self.decode(bytes, as: attribute) { read += 1 } else { refused += 1 }
            }
        }
        // Both outcomes happen for a good share of the inputs: the fuzzing reaches the
        // decoders' success paths and their error paths alike.
        #expect(read > 5_000 && refused > 5_000, "read \(read), refused \(refused)")
    }

    @Test func randomBytesReadOrThrowTypedErrors() throws {
        let entity = try #require(try Model(entities: [FuzzSpecimen.self]).entity(for: FuzzSpecimen.self))
        var random = FuzzGenerator(state: 0xB17E_5045)
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            for attribute in entity.attributes { _ = Self.decode(bytes, as: attribute) }
        }
    }

    /// What each narrower type holds, read from the texts the server writes: the fuzzing
    /// above checks that nothing traps; these check that the decoders say yes and no
    /// where they should.
    @Test(arguments: [
        ("status", "draft", true), ("status", "secret", false), ("status", "", false),
        ("priority", "2", true), ("priority", "9", false), ("priority", "x", false),
        ("size", "1", true), ("size", "40000", false), ("level", "2", true), ("level", "0", false),
        ("address", #"{"city":"Oslo","zip":"0150"}"#, true), ("address", #"{"city":5}"#, false),
        ("address", "null", false), ("address", "[]", false),
        ("json", String(repeating: "[", count: 512) + String(repeating: "]", count: 512), true),
        ("json", String(repeating: "[", count: 513) + String(repeating: "]", count: 513), false),
        ("decimal", String(repeating: "9", count: 38), true), ("decimal", String(repeating: "9", count: 39), false),
        ("decimal", "Infinity", false), ("when", "infinity", true), ("when", "2024-13-01 00:00:00+00", false),
        ("small", "32768", false), ("blob", "\\xzz", false), ("tag", "123e4567", false),
        ("tags", #"{"a","b,c",NULL}"#, false), ("tags", #"{"a","b,c"}"#, true), ("scores", "{{1,2},{3,4}}", false),
        ("scores", "{1,-2}", true), ("moments", "{infinity}", true), ("moments", "{2024-13-01}", false),
    ])
    func theNarrowerTypesSayYesAndNoWhereTheyShould(name: String, text: String, holds: Bool) throws {
        let entity = try #require(try Model(entities: [FuzzSpecimen.self]).entity(for: FuzzSpecimen.self))
        let attribute = try #require(entity.attribute(named: name))
        #expect(Self.decode(Array(text.utf8), as: attribute) == holds)
    }
}
