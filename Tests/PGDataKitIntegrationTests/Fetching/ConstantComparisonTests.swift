import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Comparisons of two constants are answered as `NSPredicate` answers them, the same in
/// SQL (saved rows) and in memory (unsaved objects): RHManagedObject's examples match
/// everything with `1=1`, which used to be refused ("needs a key path on one side").
@Suite("Predicates comparing two constants")
struct ConstantComparisonTests {
    @Test func constantComparisonsFoldToTrueOrFalseInBothEngines() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada", "bob"], manager: manager, context: context)
            try context.performAndWait { () throws in
                let cases: [(String, [Any?], Bool)] = [
                    ("1=1", [], true), ("1 == 2", [], false), ("1 != 2", [], true), ("2 > 1", [], true),
                    ("2 <= 1", [], false), ("1 == 1.0", [], true), ("YES == 1", [], true), ("NO == 1", [], false),
                    ("'a' == 'a'", [], true), ("'a' ==[c] 'A'", [], true), ("'a' == 'A'", [], false),
                    ("'abc' BEGINSWITH[c] 'AB'", [], true), ("'abc' ENDSWITH 'bc'", [], true),
                    ("'abc' CONTAINS 'd'", [], false), ("'abc' LIKE 'a*'", [], true), ("'abc' MATCHES 'a.c'", [], true),
                    ("'é' ==[d] 'e'", [], true), ("'a' IN {'a', 'b'}", [], true), ("'c' IN {'a', 'b'}", [], false),
                    ("'Ada' IN 'Ada Lovelace'", [], true), ("2 BETWEEN {1, 3}", [], true), ("5 BETWEEN {1, 3}", [], false),
                    ("nil == nil", [], true), ("nil != 1", [], true), ("nil < 1", [], false), ("1 < 'a'", [], false),
                    ("1 == 'a'", [], false), ("%@ == %@", [7, 7], true), ("%@ == %@", ["x", nil], false),
                    ("NOT (1 = 2)", [], true), ("TRUEPREDICATE", [], true), ("FALSEPREDICATE", [], false),
                    ("1 = 1 AND name == 'Ada'", [], false), ("1 = 2 OR name == 'Ada'", [], false),
                ]
                for (format, arguments, matchesAll) in cases {
                    let predicate = try FetchPredicate(format: format, argumentArray: arguments)
                    let found = try matchingIndexes(predicate, in: context)
                    let expected = matchesAll ? [0, 1] : []
                    if format.contains("name") {
                        // Only Ada (index 0) for the AND; likewise for the OR.
                        #expect(found.saved == [0] && found.unsaved == [0], "\(format)")
                    } else {
                        #expect(found.saved == expected, "SQL: \(format)")
                        #expect(found.unsaved == expected, "memory: \(format)")
                        #expect(try context.count(for: FetchRequest<User>(predicate: predicate)) == expected.count * 2, "\(format)")
                    }
                }
                // In a SUBQUERY and under ANY nothing changes: constants still fold.
                let sub = try FetchPredicate(format: "SUBQUERY(posts, $p, 1 == 1).@count == 0")
                let none = try matchingIndexes(sub, in: context)
                #expect(none.saved == [0, 1] && none.unsaved == [0, 1])
            }
        }
    }

    /// What cannot be compared at all stays an error, named the same in both engines.
    @Test func invalidConstantComparisonsStillThrow() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada"], manager: manager, context: context)
            try context.performAndWait { () throws in
                // The format parser refuses the last two itself; built in code they reach
                // the engines.
                let one = FetchPredicate.Expression.value(.integer(1))
                let predicates: [FetchPredicate] = [
                    try FetchPredicate(format: "'a' MATCHES '('"),
                    .comparison(.init(one, .equal, .list([one, .value(.integer(2))]))),
                    .comparison(.init(one, .between, .list([one]))),
                ]
                for predicate in predicates {
                    for pending in [true, false] {
                        var request = FetchRequest<User>(predicate: predicate)
                        request.includesPendingChanges = pending
                        #expect(throws: FetchPredicateError.self, "\(predicate)") { try context.fetch(request) }
                    }
                }
            }
        }
    }
}

/// Inputs that mean nothing or cannot be stored: answered as Core Data answers them or
/// refused with a typed error, never a server error.
@Suite("Key paths with empty components and strings with NUL in predicates")
struct PredicateInputTests {
    /// A string with NUL matches no stored string (PostgreSQL text cannot hold it), as
    /// `NSPredicate` answers: `CONTAINS`, `==`, `LIKE`… are false, `!=` true, the same in
    /// SQL and in memory, under `ANY`/`NONE` too; it used to throw.
    @Test func aStringWithNULMatchesNothing() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada", "bob"], manager: manager, context: context)
            try context.performAndWait { () throws in
                let nul = "a\u{0}"
                let cases: [(String, Bool)] = [
                    ("name CONTAINS %@", false), ("name CONTAINS[cd] %@", false), ("name BEGINSWITH %@", false),
                    ("name ENDSWITH %@", false), ("name LIKE %@", false), ("name == %@", false), ("name != %@", true),
                    ("%@ == name", false), ("name IN {%@}", false), ("NOT (name CONTAINS %@)", true),
                    ("ANY posts.title CONTAINS %@", false), ("NONE posts.title CONTAINS %@", true),
                ]
                for (format, matchesAll) in cases {
                    let found = try matchingIndexes(try FetchPredicate(format: format, nul), in: context)
                    let expected = matchesAll ? [0, 1] : []
                    #expect(found.saved == expected, "SQL: \(format)")
                    #expect(found.unsaved == expected, "memory: \(format)")
                }
                for predicate in [
                    try FetchPredicate(format: "name == $N").substituting(["N": nul]),
                    try FetchPredicate(format: "SUBQUERY(posts, $p, $p.title == %@).@count > 0", nul),
                    try FetchPredicate(format: "name == 'a\\0'"),
                ] {
                    let found = try matchingIndexes(predicate, in: context)
                    #expect(found.saved.isEmpty && found.unsaved.isEmpty, "\(predicate)")
                }
                let some = try matchingIndexes(try FetchPredicate(format: "name IN %@", [nul, "bob"]), in: context)
                #expect(some.saved == [1] && some.unsaved == [1])
                // Where it cannot simply match nothing (an order, a pattern), it stays a
                // typed error.
                for format in ["name < %@", "name MATCHES %@"] {
                    #expect(throws: FetchPredicateError.self, "\(format)") {
                        try context.fetch(FetchRequest<User>(predicate: try FetchPredicate(format: format, nul)))
                    }
                }
            }
        }
    }

    /// `"age."`, `".age"`, `"a..b"` and `""` name nothing: sorting, aggregating, fetching
    /// dictionaries or prefetching by them is a typed error (they used to be read as
    /// `age`, or as the object itself).
    @Test func keyPathsWithEmptyComponentsAreRefused() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada"], manager: manager, context: context)
            try context.performAndWait { () throws in
                for key in ["age.", ".age", "..age", "user..name", ""] {
                    for pending in [true, false] {
                        var request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor(key)])
                        request.includesPendingChanges = pending
                        #expect(throws: FetchPredicateError.self, "sort \(key)") { try context.fetch(request) }
                    }
                    #expect(throws: FetchPredicateError.self, "aggregate \(key)") {
                        try User.aggregate(.max, of: key, as: Int.self, in: context)
                    }
                    var dictionaries = FetchRequest<User>()
                    dictionaries.propertiesToFetch = [key]
                    #expect(throws: FetchPredicateError.self, "dictionary \(key)") { try context.fetchDictionaries(dictionaries) }
                    var prefetching = FetchRequest<User>()
                    prefetching.relationshipKeyPathsForPrefetching = [key.replacingOccurrences(of: "age", with: "posts")]
                    #expect(throws: FetchPredicateError.self, "prefetch \(key)") { try context.fetch(prefetching) }
                }
                // The same keys without the empty parts work.
                #expect(try User.aggregate(.max, of: "age", as: Int.self, in: context) == nil)
            }
        }
    }
}
