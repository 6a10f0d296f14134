import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Predicates over array attributes test elements (`ANY`, `ALL`, `NONE`, `IN`,
/// `CONTAINS`) and counts (`@count`, 0 for `nil`), in SQL and in memory alike; arrays
/// compare whole only for equality; anything else is a `FetchPredicateError`.
@Suite("Predicates over array attributes")
struct ArrayPredicateTests {
    /// The shelves: code, tags, counts, bigs, ratios.
    static let rows: [(String, [String], [Int], [Int64]?, [Double]?)] = [
        ("p1", ["red", "green"], [1, 2, 3], nil, [1.5]),
        ("p2", [], [], [], nil),
        ("p3", ["Blue", "red"], [10], [7], [-1, 2.5]),
        ("p4", ["green"], [5, 5], [1, 2], []),
    ]

    static func insert(prefix: String, into context: ManagedObjectContext) {
        for (code, tags, counts, bigs, ratios) in rows {
            let shelf = Shelf(context: context)
            shelf.code = prefix + code
            shelf.tags = tags
            shelf.counts = counts
            shelf.bigs = bigs
            shelf.ratios = ratios
        }
    }

    /// Checks that `predicate` selects the shelves `expected` in SQL over saved rows, in
    /// memory over the same objects, and in one fetch over saved rows and unsaved copies.
    static func check(
        _ predicate: FetchPredicate, _ expected: [String], in manager: ContextManager,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try PredicateAgreement.check(
            predicate, expected, of: Shelf.self, code: \.code, in: manager, insert: { insert(prefix: $0, into: $1) },
            sourceLocation: sourceLocation)
    }

    static func withShelves(_ body: (ContextManager) throws -> Void) throws {
        try ShelfSchema.withManager { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                insert(prefix: "s:", into: context)
                try context.save()
            }
            try body(manager)
        }
    }

    @Test func formatStringsTestElementsAndCounts() throws {
        try Self.withShelves { manager in
            let cases: [(String, [Any?], [String])] = [
                ("ANY tags == 'red'", [], ["p1", "p3"]),
                ("ANY tags == %@", ["green"], ["p1", "p4"]),
                ("'red' IN tags", [], ["p1", "p3"]),
                ("%@ IN tags", ["green"], ["p1", "p4"]),
                ("tags CONTAINS 'green'", [], ["p1", "p4"]),
                ("ANY tags ==[c] 'blue'", [], ["p3"]),
                ("'BLUE' IN[c] tags", [], ["p3"]),
                ("ANY tags BEGINSWITH 'gr'", [], ["p1", "p4"]),
                ("ANY tags IN %@", [["Blue", "green"]], ["p1", "p3", "p4"]),
                ("NONE tags == 'red'", [], ["p2", "p4"]),
                ("NOT (ANY tags == 'red')", [], ["p2", "p4"]),
                ("NOT ('red' IN tags)", [], ["p2", "p4"]),
                ("ALL counts > 2", [], ["p2", "p3", "p4"]),
                ("ALL ratios > 0", [], ["p1", "p2", "p4"]),
                ("ANY counts > 4", [], ["p3", "p4"]),
                ("ANY counts BETWEEN {2, 5}", [], ["p1", "p4"]),
                ("ANY counts == 10.0", [], ["p3"]),
                ("ANY bigs == 7", [], ["p3"]),
                ("NOT (ANY bigs == 7)", [], ["p1", "p2", "p4"]),
                ("ANY ratios == 1.5", [], ["p1"]),
                ("ANY ratios < 0", [], ["p3"]),
                ("ANY tags == %@", ["nul\u{0}"], []),
                ("tags.@count == 0", [], ["p2"]),
                ("tags.@count >= 2", [], ["p1", "p3"]),
                ("bigs.@count == 0", [], ["p1", "p2"]),
                ("bigs.@count > 1", [], ["p4"]),
                ("NOT (bigs.@count > 1)", [], ["p1", "p2", "p3"]),
                ("bigs == nil", [], ["p1"]),
                ("bigs != nil", [], ["p2", "p3", "p4"]),
                ("code ENDSWITH 'p1' AND 'green' IN tags", [], ["p1"]),
            ]
            for (format, arguments, expected) in cases {
                try Self.check(try FetchPredicate(format: format, argumentArray: arguments), expected, in: manager)
            }
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                #expect(try Shelf.count(in: context, where: "%@ IN tags", "red") == 2)
            }
        }
    }

    /// `key == list` in a predicate built in code (format strings refuse a list after
    /// `==`): the whole array, elements in order.
    static func equal(_ key: String, _ items: [FetchPredicate.Value], negated: Bool = false) -> FetchPredicate {
        .comparison(.init(.keyPath(.init([key])), negated ? .notEqual : .equal, .list(items.map { .value($0) })))
    }

    @Test func wholeArraysCompareForEqualityInPredicatesBuiltInCode() throws {
        try Self.withShelves { manager in
            try Self.check(Self.equal("tags", [.string("red"), .string("green")]), ["p1"], in: manager)
            try Self.check(Self.equal("tags", [.string("green"), .string("red")]), [], in: manager)
            try Self.check(Self.equal("tags", [.string("red"), .string("green")], negated: true), ["p2", "p3", "p4"], in: manager)
            try Self.check(Self.equal("tags", []), ["p2"], in: manager)
            try Self.check(Self.equal("counts", [.integer(5), .integer(5)]), ["p4"], in: manager)
            try Self.check(Self.equal("bigs", [.integer(7)]), ["p3"], in: manager)
            try Self.check(Self.equal("ratios", [.integer(-1), .double(2.5)]), ["p3"], in: manager)
            try Self.check(try FetchPredicate(format: "tags == tags AND bigs != nil"), ["p2", "p3", "p4"], in: manager)
        }
    }

    @Test func foundationPredicatesTestElementsAndCounts() throws {
        try Self.withShelves { manager in
            let red = "red"
            try Self.check(try FetchPredicate(#Predicate<Shelf> { $0.tags.contains("green") }), ["p1", "p4"], in: manager)
            try Self.check(try FetchPredicate(#Predicate<Shelf> { !$0.tags.contains(red) }), ["p2", "p4"], in: manager)
            try Self.check(try FetchPredicate(#Predicate<Shelf> { $0.counts.contains(10) }), ["p3"], in: manager)
            try Self.check(try FetchPredicate(#Predicate<Shelf> { $0.tags.count > 1 }), ["p1", "p3"], in: manager)
            try Self.check(try FetchPredicate(#Predicate<Shelf> { $0.tags.isEmpty }), ["p2"], in: manager)
        }
    }

    /// Orders, string operators and scalar values of whole arrays, and lists that are
    /// not arrays of the element type, are predicate errors in SQL and in memory; so is
    /// sorting by an array.
    @Test(arguments: [
        "tags < 'x'", "tags BEGINSWITH 'x'", "tags == 'x'", "tags IN {'a', 'b'}", "tags BETWEEN {'a', 'b'}",
        "counts > 1", "tags == counts", "ANY tags > 3", "tags.@count > 'a'", "'x' IN code.tags",
        // Lists that are not arrays of the element type (built in code):
        "counts == [1, 2.5]", "smalls == [1, 100000]", "tags == [1]",
    ])
    func unsupportedComparisonsArePredicateErrors(format: String) throws {
        try ShelfSchema.withManager { manager, _ in
            let predicate: FetchPredicate
            if let bracket = format.firstIndex(of: "[") {
                let key = String(format.prefix { $0 != " " })
                let items = format[format.index(after: bracket)...].dropLast().split(separator: ",").map {
                    let text = $0.trimmingCharacters(in: .whitespaces)
                    return Int64(text).map(FetchPredicate.Value.integer) ?? .double(Double(text) ?? 0)
                }
                predicate = Self.equal(key, items)
            } else {
                predicate = try FetchPredicate(format: format)
            }
            let evaluator = PredicateEvaluator(model: manager.coordinator.model)
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                #expect(throws: FetchPredicateError.self, "SQL: \(format)") {
                    _ = try context.fetch(FetchRequest<Shelf>(predicate: predicate))
                }
                let shelf = Shelf(context: context)
                #expect(throws: FetchPredicateError.self, "memory: \(format)") {
                    _ = try evaluator.evaluate(predicate, on: shelf)
                }
            }
        }
    }

    /// `ANY tags == x` is `x = ANY(tags)`; other element tests run over `unnest`; a count
    /// is the array's `cardinality`, 0 for `NULL`.
    @Test func elementTestsCompileToAnyUnnestAndCardinality() throws {
        let model = try Model(entities: [Shelf.self])
        let entity = try #require(model.entity(named: "Shelf"))
        func sql(_ format: String) throws -> String {
            var compiler = PredicateSQLCompiler(model: model)
            return try compiler.compile(try FetchPredicate(format: format), entity: entity, alias: "t")
        }
        #expect(try sql("ANY tags == 'x'") == #"$1::text = ANY(t."tags")"#)
        #expect(try sql("'x' IN tags") == #"$1::text = ANY(t."tags")"#)
        #expect(try sql("NOT (ANY tags == 'x')") == #"NOT (COALESCE($1::text = ANY(t."tags"), false))"#)
        #expect(try sql("tags.@count > 2") == #"COALESCE(cardinality(t."tags"), 0) > $1"#)
        #expect(try sql("ANY counts > 2") == #"EXISTS (SELECT 1 FROM unnest(t."counts") AS a1(v) WHERE a1.v > $1)"#)
        #expect(try sql("ALL counts > 2") == #"NOT EXISTS (SELECT 1 FROM unnest(t."counts") AS a1(v) WHERE NOT (COALESCE(a1.v > $1, false)))"#)
    }

    @Test func sortingByAnArrayIsAPredicateError() throws {
        try ShelfSchema.withManager { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                var request = FetchRequest<Shelf>()
                request.sortDescriptors = [FetchSortDescriptor("tags")]
                #expect(throws: FetchPredicateError.self) { _ = try context.fetch(request) }
            }
        }
    }
}
