import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A scalar type of a caller's own, kept in a box.
private struct Celsius: AttributeScalar, Hashable {
    let degrees: Int
    static var attributeType: AttributeType { .int64 }
    static var postgresType: PostgresType { Int.postgresType }
    func postgresText() throws -> String? { String(degrees) }
    static func decode(from cell: PostgresCell) throws -> Celsius { Celsius(degrees: try Int.decode(from: cell)) }
}

/// Reads through a generic function the optimizer does not specialize, as the model's
/// closures built for an attribute type at run time do.
@inline(never)
private func unspecializedRead<Scalar>(_ value: StoredValue, as type: Scalar.Type) -> Scalar? {
    value.scalar(as: Scalar.self)
}

@inline(never)
private func unspecializedStore<Scalar: AttributeScalar>(_ value: Scalar?) -> StoredValue {
    StoredValue(value)
}

@Suite("Stored values: one case per scalar type the model knows, no layout tricks")
struct StoredValueTests {
    @Test func eachScalarTypeHasItsCaseAndReadsBackAsItself() {
        func check<T: AttributeScalar>(_ value: T, _ matches: (StoredValue) -> Bool, sourceLocation: SourceLocation = #_sourceLocation) {
            let stored = StoredValue(scalar: value)
            #expect(matches(stored), "\(value) stored as \(stored)", sourceLocation: sourceLocation)
            #expect(stored.scalar(as: T.self) == value, sourceLocation: sourceLocation)
            #expect(unspecializedRead(stored, as: T.self) == value, sourceLocation: sourceLocation)
            #expect(unspecializedStore(value) == stored, sourceLocation: sourceLocation)
            #expect((stored.anyValue as? T) == value, sourceLocation: sourceLocation)
            #expect(!stored.isNull, sourceLocation: sourceLocation)
        }
        check("a string well past fifteen bytes, stored on the heap") { if case .string = $0 { true } else { false } }
        check("") { if case .string = $0 { true } else { false } }
        check(Int.min) { if case .int = $0 { true } else { false } }
        check(Int64.max) { if case .int64 = $0 { true } else { false } }
        check(Int32(-3)) { if case .int32 = $0 { true } else { false } }
        check(Int16(7)) { if case .int16 = $0 { true } else { false } }
        check(true) { if case .bool = $0 { true } else { false } }
        check(2.5) { if case .double = $0 { true } else { false } }
        check(Float(1.25)) { if case .float = $0 { true } else { false } }
        check(Date(timeIntervalSince1970: 5)) { if case .date = $0 { true } else { false } }
        check(UUID()) { if case .uuid = $0 { true } else { false } }
        check(Data([0, 1, 2])) { if case .data = $0 { true } else { false } }
        check(JSONValue.object(["a": .array([.number(1), .null])])) { if case .json = $0 { true } else { false } }
        check(Decimal(string: "12.345") ?? 0) { if case .other = $0 { true } else { false } }
        check(Celsius(degrees: -4)) { if case .other = $0 { true } else { false } }
    }

    @Test func aValueReadAsAnotherTypeIsNilAndNullIsNil() {
        let values: [StoredValue] = [.string("1"), .int(1), .int64(1), .int32(1), .bool(true), .double(1), .other(StoredBox(Decimal(1)))]
        for value in values {
            let matches = [
                value.scalar(as: String.self) != nil, value.scalar(as: Int.self) != nil, value.scalar(as: Int64.self) != nil,
                value.scalar(as: Int32.self) != nil, value.scalar(as: Bool.self) != nil, value.scalar(as: Double.self) != nil,
                value.scalar(as: Decimal.self) != nil,
            ]
            #expect(matches.filter { $0 }.count == 1, "\(value) reads as exactly its own type")
            #expect(unspecializedRead(value, as: Int16.self) == nil)
        }
        #expect(StoredValue.null.scalar(as: String.self) == nil)
        #expect(StoredValue(String?.none) == .null)
        let none = unspecializedStore(Int?.none)
        #expect(none == .null)
        #expect(StoredValue.null.anyValue == nil)
    }

    @Test func equalityIsPerCaseAndBoxesCompareByValue() {
        #expect(StoredValue.null == .null)
        #expect(StoredValue.string("a") == .string("a"))
        #expect(StoredValue.string("a") != .string("b"))
        #expect(StoredValue.string("1") != .int(1))
        #expect(StoredValue.int(1) != .int64(1), "an attribute holds one type: different types never meet")
        #expect(StoredValue.int(1) != .null)
        #expect(StoredValue.double(.nan) != .double(.nan), "as Double's own ==")
        #expect(StoredValue(scalar: Decimal(string: "1.50") ?? 0) == StoredValue(scalar: Decimal(string: "1.5") ?? 0))
        #expect(StoredValue(scalar: Decimal(1)) != StoredValue(scalar: Decimal(2)))
        #expect(StoredValue(scalar: Celsius(degrees: 3)) == StoredValue(scalar: Celsius(degrees: 3)))
        #expect(StoredValue(scalar: Celsius(degrees: 3)) != StoredValue(scalar: Decimal(3)))
    }

    @Test func aValueTakesThreeWords() {
        // An optional `any Sendable` (the representation before) takes four.
        #expect(MemoryLayout<StoredValue>.stride <= 3 * MemoryLayout<Int>.stride)
    }
}
