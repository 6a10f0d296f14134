import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The byte encoding of controller sort keys orders values as PostgreSQL's `ORDER BY`
/// does for the fetch (`NULLS FIRST` ascending, `NULLS LAST` descending, strings by code
/// point, ties by primary key).
@Suite("Controller sort keys")
struct ControllerSortKeyTests {
    static func key(_ value: (any Sendable)?, ascending: Bool = true, caseInsensitive: Bool = false, id: Int64 = 0)
        -> ControllerSortKey
    {
        var builder = ControllerSortKeyBuilder()
        builder.append(value, ascending: ascending, caseInsensitive: caseInsensitive)
        builder.appendTiebreak(primaryKey: id)
        return builder.key
    }

    /// Whether the values, encoded, sort strictly in the order given.
    static func ascendingOrder(_ values: [(any Sendable)?], ascending: Bool = true, caseInsensitive: Bool = false) -> Bool {
        let keys = values.map { key($0, ascending: ascending, caseInsensitive: caseInsensitive) }
        return zip(keys, keys.dropFirst()).allSatisfy { ControllerSortKey.compare($0, $1) < 0 }
    }

    @Test func integersAndBooleans() {
        #expect(Self.ascendingOrder([nil, Int.min, -1_000, -1, 0, 1, 42, Int.max]))
        #expect(Self.ascendingOrder([nil, Int16(-3), Int16(7)]))
        #expect(Self.ascendingOrder([false, true]))
        #expect(Self.ascendingOrder([Int.max, 3, -3, nil], ascending: false), "descending: nil last")
    }

    @Test func floatingPointAndDates() {
        #expect(Self.ascendingOrder([nil, -Double.infinity, -1e300, -2.5, -1e-300, 0.0, 1e-300, 3.25, 1e300, Double.infinity, Double.nan]))
        #expect(ControllerSortKey.compare(Self.key(-0.0), Self.key(0.0)) == 0)
        #expect(Self.ascendingOrder([Date(timeIntervalSince1970: -5), Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 0.000_001)]))
        #expect(Self.ascendingOrder([Float(-1.5), Float(0), Float(2)]))
    }

    @Test func stringsByCodePointWithPrefixesFirst() {
        // "é" composed (U+00E9) sorts after "z"; decomposed ("e" + U+0301) right after "e".
        #expect(Self.ascendingOrder([nil, "", "A", "Z", "a", "ab", "abc", "b", "e", "e\u{301}", "z", "\u{E9}", "\u{1F600}"]))
        #expect(ControllerSortKey.compare(Self.key("e\u{301}"), Self.key("\u{E9}")) != 0, "canonically equivalent, not equal")
        #expect(Self.ascendingOrder(["a\u{0}", "a\u{0}a", "a\u{1}"]), "NUL is escaped")
        #expect(Self.ascendingOrder(["a", "B", "A"], ascending: false))
        #expect(ControllerSortKey.compare(Self.key("ABC", caseInsensitive: true), Self.key("abc", caseInsensitive: true)) == 0)
        #expect(Self.ascendingOrder(["abc", "ab", "a", ""], ascending: false))
        // Past the 16 bytes compared inline.
        let long = String(repeating: "x", count: 30)
        #expect(Self.ascendingOrder([long, long + "\u{0}", long + "a", long + "b", long + "ba"]))
        #expect(Self.ascendingOrder([long + "b", long + "a", long], ascending: false))
    }

    @Test func uuidsDataAndDecimals() {
        let low = UUID(uuidString: "00000000-0000-0000-0000-000000000001")
        let high = UUID(uuidString: "F0000000-0000-0000-0000-000000000000")
        #expect(Self.ascendingOrder([low, high]))
        #expect(Self.ascendingOrder([Data(), Data([0]), Data([0, 0]), Data([0, 1]), Data([1])]))
        let decimals = ["-1000", "-12.5", "-12.25", "-0.001", "0", "0.000001", "0.1", "0.12", "1", "9.99", "10", "123456789012345678901234567890"]
            .compactMap { Decimal(string: $0) }
        #expect(decimals.count == 12)
        #expect(Self.ascendingOrder(decimals))
        #expect(ControllerSortKey.compare(Self.key(Decimal(string: "1.50")), Self.key(Decimal(string: "1.5"))) == 0)
    }

    @Test func tiesAreBrokenByPrimaryKeyAndUnsavedObjectsComeLast() {
        #expect(ControllerSortKey.compare(Self.key(5, id: 1), Self.key(5, id: 2)) < 0)
        #expect(ControllerSortKey.compare(Self.key(5, id: -1), Self.key(5, id: 1)) < 0)
        var unsaved = ControllerSortKeyBuilder()
        unsaved.append(5, ascending: true, caseInsensitive: false)
        unsaved.appendTiebreak(temporary: "User/t1")
        #expect(ControllerSortKey.compare(Self.key(5, id: Int64.max), unsaved.key) < 0)
        #expect(ControllerSortKey.compare(unsaved.key, Self.key(6, id: 1)) < 0)
        #expect(ControllerSortKey.sameFirstTerm(Self.key(5, id: 1), Self.key(5, id: 9)))
        #expect(!ControllerSortKey.sameFirstTerm(Self.key(5, id: 1), Self.key(6, id: 1)))
        #expect(ControllerSortKey.compare(.position(2), .position(10)) < 0)
    }
}
