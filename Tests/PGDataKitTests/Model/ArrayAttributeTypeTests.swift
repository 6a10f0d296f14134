import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class UnitShelf: ManagedObject {
    override class var tableName: String { "unit_shelves" }
    @Attribute var tags: [String] = []
    @Attribute var counts: [Int]?
    @Attribute var bigs: [Int64] = [1]
    @Attribute var mids: [Int32]?
    @Attribute var smalls: [Int16]?
    @Attribute var ratios: [Double]?
    @Attribute var floats: [Float]?
    @Attribute var prices: [Decimal]?
    @Attribute var flags: [Bool]?
    @Attribute var dates: [Date]?
    @Attribute var ids: [UUID]?
}

private final class UnitUniqueTags: ManagedObject {
    override class var tableName: String { "unit_unique_tags" }
    @Attribute(unique: true) var tags: [String] = []
}

private final class UnitKeyedTags: ManagedObject {
    override class var tableName: String { "unit_keyed_tags" }
    override class var uniqueKeys: [[String]] { [["code", "tags"]] }
    @Attribute var code: String = ""
    @Attribute var tags: [String] = []
}

/// Array attribute types in the model and its DDL, and their conversions, without a
/// server.
@Suite("Array attributes, without a server")
struct ArrayAttributeTypeTests {
    private func attribute(_ name: String) throws -> AttributeDescription {
        let model = try Model(entities: [UnitShelf.self])
        return try #require(model.entity(for: UnitShelf.self)?.attribute(named: name))
    }

    /// Each array type: its attribute type, SQL type, element type and accepted columns.
    @Test(arguments: [
        ("tags", AttributeType.stringArray, AttributeType.string, "text[]", "_text", false, "[String]"),
        ("counts", .int64Array, .int64, "bigint[]", "_int8", true, "[Int]?"),
        ("bigs", .int64Array, .int64, "bigint[]", "_int4", false, "[Int64]"),
        ("mids", .int32Array, .int32, "integer[]", "_int4", true, "[Int32]?"),
        ("smalls", .int16Array, .int16, "smallint[]", "_int2", true, "[Int16]?"),
        ("ratios", .doubleArray, .double, "double precision[]", "_float8", true, "[Double]?"),
        ("floats", .floatArray, .float, "real[]", "_float4", true, "[Float]?"),
        ("prices", .decimalArray, .decimal, "numeric[]", "_numeric", true, "[Decimal]?"),
        ("flags", .boolArray, .bool, "boolean[]", "_bool", true, "[Bool]?"),
        ("dates", .dateArray, .date, "timestamptz[]", "_timestamptz", true, "[Date]?"),
        ("ids", .uuidArray, .uuid, "uuid[]", "_uuid", true, "[UUID]?"),
    ])
    func theModelDescribesTheArrayType(
        name: String, type: AttributeType, element: AttributeType, sqlType: String, columnType: String, optional: Bool,
        swiftType: String
    ) throws {
        let attribute = try attribute(name)
        #expect(attribute.type == type && attribute.type.isArray && attribute.type.elementType == element)
        #expect(attribute.type.sqlType == sqlType && attribute.type.acceptedColumnTypes.contains(columnType))
        #expect(!attribute.type.acceptedColumnTypes.contains(element.acceptedColumnTypes.first ?? ""))
        #expect(attribute.isOptional == optional && attribute.swiftTypeName == swiftType)
        #expect(element.arrayElementIsNotArray)
    }

    @Test func scalarsAreNotArraysAndTheElementTypesMapToTheirArrayTypes() {
        for type in AttributeType.allCases where !type.isArray { #expect(type.elementType == nil, "\(type)") }
        #expect(String.attributeType == .string && [String].attributeType == .stringArray)
        #expect([Int].attributeType == .int64Array && [Int64].attributeType == .int64Array)
        #expect([UUID].attributeType == .uuidArray && [Date].attributeType == .dateArray)
        #expect(!([String].isOptional) && [String]?.isOptional)
    }

    /// An array in a unique key, alone or with others, is a model problem.
    @Test func arraysCannotBeUniqueKeys() {
        #expect {
            _ = try Model(entities: [UnitUniqueTags.self, UnitKeyedTags.self])
        } throws: { error in
            guard let error = error as? ModelError else { return false }
            let problems = error.problems.filter { $0.code == .arrayInUniqueKey }
            return problems.map(\.entity) == ["UnitUniqueTags", "UnitKeyedTags"] && problems.allSatisfy { $0.attribute == "tags" }
        }
    }

    /// Arrays sit in the shared box; two equal arrays are equal stored values, and a
    /// changed one is not.
    @Test func storedArraysCompareByValue() {
        let a = StoredValue(scalar: ["a", "b"])
        #expect(a == StoredValue(scalar: ["a", "b"]))
        #expect(a != StoredValue(scalar: ["a"]))
        #expect(a != StoredValue(scalar: [1, 2]))
        #expect(StoredValue(scalar: [String]()) != .null)
        #expect(a.scalar(as: [String].self) == ["a", "b"] && a.scalar(as: [Int].self) == nil)
    }

    /// `coerce` takes arrays of the element type and of integers that fit, nothing else.
    @Test func coercionTakesArraysElementByElement() throws {
        let tags = try attribute("tags")
        #expect(tags.coerce(["a"]) == StoredValue(scalar: ["a"]))
        #expect(tags.coerce(["a"] as [Any]) == StoredValue(scalar: ["a"]))
        #expect(tags.coerce("a") == nil && tags.coerce([1]) == nil && tags.coerce(nil) == nil)
        let smalls = try attribute("smalls")
        #expect(smalls.coerce([Int64(3)]) == StoredValue(scalar: [Int16(3)]))
        #expect(smalls.coerce([40_000]) == nil && smalls.coerce(nil) == .null)
        let counts = try attribute("counts")
        #expect(counts.coerce([Int16(3)]) == StoredValue(scalar: [3]))
        #expect(counts.coerce([1.5]) == nil)
        #expect(try attribute("bigs").defaultValue == StoredValue(scalar: [Int64(1)]))
    }

    /// Reading a column: one-dimensional arrays (any lower bound); a `NULL` element or a
    /// second dimension is a `PostgresValueError`, which fetches name as
    /// `invalidStoredValue`.
    @Test(arguments: [
        ("{1,2}", [1, 2] as [Int]?), ("{}", []), ("[0:1]={3,4}", [3, 4]), ("{1,NULL}", nil), ("{{1,2},{3,4}}", nil),
        ("{1,x}", nil), ("{1,2", nil),
    ])
    func decodingRefusesNullElementsAndDimensions(text: String, expected: [Int]?) throws {
        let attribute = try attribute("counts")
        var bytes = Array(text.utf8)
        let decoded = bytes.withUnsafeMutableBufferPointer { buffer in
            Result { try attribute.decode(PostgresCell(bytes: UnsafeBufferPointer(buffer), typeOID: 0, columnName: "counts", rowIndex: 0)) }
        }
        switch (decoded, expected) {
        case (.success(let value), let expected?): #expect(value == StoredValue(scalar: expected))
        case (.failure(let error), nil): #expect(error is PostgresValueError, "\(error)")
        default: Issue.record("\(text) gave \(decoded)")
        }
    }

    /// 20,000 seeded cells (or five seconds) — valid literals of every array type,
    /// mutated, truncated, nested, with `NULL`s, quotes, backslashes, bounds and random
    /// bytes — decoded as every array attribute: nothing may crash, and every failure
    /// must be a `PostgresValueError` (which fetches name as `invalidStoredValue`).
    @Test func decodingFuzzedArraysNeverCrashes() throws {
        let model = try Model(entities: [UnitShelf.self])
        let attributes = try #require(model.entity(for: UnitShelf.self)).attributes
        let seeds = [
            "{}", "{a,b}", #"{"a b","c\"d","e\\f",NULL}"#, "{1,2,3}", "{-32768,32767}", "{9223372036854775807}",
            "{1.5,NaN,Infinity,-Infinity}", "{12345678901234567890.123456789}", "{t,f}",
            #"{"2023-11-14 22:13:20.123456+00","infinity"}"#, "{00010203-0405-0607-0809-0a0b0c0d0eff}",
            "[0:1]={1,2}", "{{1,2},{3,4}}", "{NULL}", #"{""}"#, "{,}", #"{"}"#, "{", "}", "", "[=", "{a,{b}}",
        ]
        let pieces = ["{", "}", ",", "\"", "\\", "NULL", "[", "]", "=", ":", " ", "-", "1", "e", "x", "\u{0}", "é"]
        var random = FuzzGenerator(state: 45)
        let deadline = ContinuousClock.now + .seconds(5)
        var cells = 0
        while cells < 20_000 && ContinuousClock.now < deadline {
            cells += 1
            var bytes = Array((seeds.randomElement(using: &random) ?? "{}").utf8)
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                let at = Int.random(in: 0...bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes.insert(contentsOf: (pieces.randomElement(using: &random) ?? "").utf8, at: at)
                case 1: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...3, using: &random)))
                case 2: bytes.insert(UInt8.random(in: 0...255, using: &random), at: at)
                default: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + 6)], at: at)
                }
            }
            for attribute in attributes {
                bytes.withUnsafeBufferPointer { buffer in
                    do {
                        _ = try attribute.decode(PostgresCell(bytes: buffer, columnName: attribute.columnName, rowIndex: 0))
                    } catch is PostgresValueError {
                    } catch {
                        Issue.record("\(attribute.name) threw \(type(of: error)) for \(String(decoding: bytes, as: UTF8.self).debugDescription)")
                    }
                }
            }
        }
        #expect(cells > 1_000)
    }

    /// A save's column of arrays travels as `text[]` of array literals, one a row, `NULL`
    /// for `nil`; the statement casts each back.
    @Test func aColumnOfArraysTravelsAsLiteralsOfLiterals() throws {
        let tags = try attribute("tags")
        let column = try tags.encodeColumn([StoredValue(scalar: [#"a"b"#, "c"]), StoredValue(scalar: [String]()), .null])
        #expect(try column.postgresText() == #"{"{\"a\\\"b\",\"c\"}","{}",NULL}"#)
        #expect(StoreCoordinator.unnestList(["bigint", "text[]"]) == "$1::bigint[], $2::text[]")
        #expect(StoreCoordinator.selectFromUnnest(["bigint", "text"]) == "* FROM unnest($1::bigint[], $2::text[])")
        #expect(StoreCoordinator.selectFromUnnest(["bigint", "uuid[]"])
            == "v.c0, (v.c1)::uuid[] FROM unnest($1::bigint[], $2::text[]) AS v(c0, c1)")
    }
}

extension AttributeType {
    /// Element types are scalars.
    fileprivate var arrayElementIsNotArray: Bool { !isArray }
}

