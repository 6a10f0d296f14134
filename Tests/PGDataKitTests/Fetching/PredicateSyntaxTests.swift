import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private typealias Expression = FetchPredicate.Expression
private typealias KeyPath = FetchPredicate.KeyPath

private func key(_ path: String) -> Expression {
    .keyPath(KeyPath(path.isEmpty ? [] : path.split(separator: ".").map(String.init)))
}

private func compare(
    _ left: Expression, _ op: FetchPredicate.Operator, _ right: Expression,
    options: FetchPredicate.StringOptions = [], quantifier: FetchPredicate.Quantifier? = nil
) -> FetchPredicate {
    .comparison(FetchPredicate.Comparison(left, op, right, options: options, quantifier: quantifier))
}

private func parse(_ format: String, _ arguments: Any?...) throws -> FetchPredicate {
    try FetchPredicate(format: format, argumentArray: arguments)
}

private func subquery(_ collection: String, _ variable: String, _ predicate: FetchPredicate) -> Expression {
    .subquery(FetchPredicate.Subquery(
        collection: KeyPath(collection.split(separator: ".").map(String.init)), variable: variable, predicate: predicate))
}

/// Expects parsing to fail at `position` with a message containing `fragment`.
private func expectError(
    _ format: String, _ arguments: Any?..., at position: Int, _ fragment: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    do {
        let predicate = try FetchPredicate(format: format, argumentArray: arguments)
        Issue.record("parsed \(predicate) instead of failing", sourceLocation: sourceLocation)
    } catch let error as FetchPredicateError {
        #expect(error.position == position, "\(error.message)", sourceLocation: sourceLocation)
        #expect(error.message.contains(fragment), "\(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
}

@Suite("SELF, SUBQUERY, collection operators and specifiers in format strings")
struct PredicateSyntaxTests {
    @Test func selfIsTheEmptyKeyPath() throws {
        let id = ObjectID(entityName: "User", primaryKey: 7)
        #expect(try parse("SELF == %@", id) == compare(key(""), .equal, .value(.object(id))))
        #expect(try parse("self IN %@", [id]) == compare(key(""), .in, .list([.value(.object(id))])))
        #expect(try parse("SELF.name == 'a'") == compare(key("name"), .equal, .value(.string("a"))))
        #expect(try parse("SELF == %@", id).description == "SELF == User/7")
    }

    @Test func subqueries() throws {
        let body = FetchPredicate.and([
            compare(key("title"), .beginsWith, .value(.string("a"))), compare(key("score"), .greaterThan, .value(.integer(3))),
        ])
        #expect(try parse("SUBQUERY(posts, $p, $p.title BEGINSWITH 'a' AND $p.score > 3).@count > 0")
            == compare(subquery("posts", "p", body), .greaterThan, .value(.integer(0))))
        // A bare key path in the body reads the related object too; the variable's name
        // does not matter.
        #expect(try parse("SUBQUERY(posts, $x, title BEGINSWITH 'a' AND score > 3).@count > 0")
            == compare(subquery("posts", "p", body), .greaterThan, .value(.integer(0))))
        #expect(try parse("SUBQUERY(user.posts, $p, $p == %@).@count == 1", ObjectID(entityName: "Post", primaryKey: 1))
            == compare(subquery("user.posts", "p", compare(key(""), .equal, .value(.object(ObjectID(entityName: "Post", primaryKey: 1))))),
                       .equal, .value(.integer(1))))
        #expect(try parse("SUBQUERY(%K, $p, TRUEPREDICATE).@count > 0", "posts")
            == compare(subquery("posts", "p", .constant(true)), .greaterThan, .value(.integer(0))))
        // Nested: the inner collection starts at the outer variable.
        let nested = try parse("SUBQUERY(posts, $p, SUBQUERY($p.user.posts, $q, $q.title == 'z').@count > 0).@count > 0")
        #expect(nested == compare(subquery("posts", "p", compare(
            subquery("user.posts", "q", compare(key("title"), .equal, .value(.string("z")))), .greaterThan, .value(.integer(0)))),
            .greaterThan, .value(.integer(0))))
        #expect(nested.description
            == "SUBQUERY(posts, $p, SUBQUERY(user.posts, $q, title == \"z\").@count > 0).@count > 0")
        // Variables other than the subquery's are substituted inside it.
        let template = try parse("SUBQUERY(posts, $p, $p.title == $TITLE).@count > $MIN")
        #expect(try template.substituting(["TITLE": "x", "MIN": 1])
            == compare(subquery("posts", "p", compare(key("title"), .equal, .value(.string("x")))), .greaterThan, .value(.integer(1))))
    }

    @Test func subqueryErrors() {
        expectError("SUBQUERY(posts, $p, $p.title == 'a') > 0", at: 37, "must be followed by .@count")
        expectError("SUBQUERY(posts, p, title == 'a').@count > 0", at: 16, "expected a variable such as $p")
        expectError("SUBQUERY(1, $p, title == 'a').@count > 0", at: 9, "must be a to-many key path")
        expectError("SUBQUERY posts", at: 9, "expected '(' after SUBQUERY")
        expectError("SUBQUERY(posts $p, x == 1).@count > 0", at: 15, "expected ',' after SUBQUERY's collection")
        expectError("SUBQUERY(posts, $p, x == 1.@count > 0", at: 26, "expected ')' to close the SUBQUERY")
        expectError("SUBQUERY(posts, $p, SUBQUERY($p.tags, $q, $p.name == 'a').@count > 0).@count > 0", at: 42,
                    "$p belongs to an enclosing SUBQUERY")
        expectError("x IN {1, SUBQUERY(posts, $p, TRUEPREDICATE).@count}", at: 9, "SUBQUERY cannot stand in a list")
        let deep = String(repeating: "SUBQUERY(posts, $p, ", count: 300) + "TRUEPREDICATE"
            + String(repeating: ").@count > 0", count: 300)
        do {
            _ = try FetchPredicate(format: deep)
            Issue.record("300 nested subqueries parsed")
        } catch let error as FetchPredicateError {
            #expect(error.message.contains("nested more than 256 levels"), "\(error)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func collectionOperators() throws {
        #expect(try parse("posts.@max.score > 3")
            == compare(.aggregate(.max, KeyPath(["posts"]), KeyPath(["score"])), .greaterThan, .value(.integer(3))))
        #expect(try parse("user.posts.@AVG.score < 2.5")
            == compare(.aggregate(.average, KeyPath(["user", "posts"]), KeyPath(["score"])), .lessThan, .value(.double(2.5))))
        #expect(try parse("posts.@sum.user.age == 1")
            == compare(.aggregate(.sum, KeyPath(["posts"]), KeyPath(["user", "age"])), .equal, .value(.integer(1))))
        #expect(try parse("%K == 1", "posts.@min.score")
            == compare(.aggregate(.min, KeyPath(["posts"]), KeyPath(["score"])), .equal, .value(.integer(1))))
        #expect(try parse("%K.age == 1", "posts.@min.user")
            == compare(.aggregate(.min, KeyPath(["posts"]), KeyPath(["user", "age"])), .equal, .value(.integer(1))))
        #expect(try parse("posts.@max.score > 3").description == "posts.@max.score > 3")
        expectError("%K == 1", "posts.@sum", at: 0, "is not a key path")
        expectError("%K == 1", "posts.@max.@count", at: 0, "is not a key path")
        expectError("SELF.@count > 1", at: 5, "must follow a to-many key path")
    }

    @Test(arguments: [
        ("%e", 1.5), ("%E", 1.5), ("%g", 1.5), ("%G", 1.5), ("%le", 1.5), ("%lg", 1.5), ("%f", 1.5),
    ] as [(String, Double)])
    func floatingPointSpecifiers(_ specifier: String, _ value: Double) throws {
        #expect(try parse("n == \(specifier)", value) == compare(key("n"), .equal, .value(.double(value))))
        #expect(try parse("n == \(specifier)", 2) == compare(key("n"), .equal, .value(.double(2))))
        expectError("n == \(specifier)", "1", at: 5, "must be a number, got String")
    }

    @Test(arguments: ["%hi", "%hd", "%hu", "%hhd", "%hhi", "%hhu", "%qd", "%qi", "%qu", "%u", "%lu", "%lld", "%llu"])
    func integerSpecifiers(_ specifier: String) throws {
        let expected = compare(key("n"), .equal, .value(.integer(5)))
        #expect(try parse("n == \(specifier)", Int16(5)) == expected)
        #expect(try parse("n == \(specifier)", UInt(5)) == expected)
        #expect(try parse("n == \(specifier) AND m == 1", UInt8(5)) == .and([expected, compare(key("m"), .equal, .value(.integer(1)))]))
        expectError("n == \(specifier)", 5.5, at: 5, "must be an integer, got Double")
    }

    @Test func valueArguments() throws {
        let date = Date(timeIntervalSince1970: 12.5)
        let uuid = UUID()
        #expect(try parse("d == %@", date) == compare(key("d"), .equal, .value(.date(date))))
        #expect(try parse("d == %@", NSDate(timeIntervalSince1970: 12.5)) == compare(key("d"), .equal, .value(.date(date))))
        #expect(try parse("u == %@", uuid) == compare(key("u"), .equal, .value(.uuid(uuid))))
        #expect(try parse("b == %@", Data([0, 1])) == compare(key("b"), .equal, .value(.data(Data([0, 1])))))
        let decimal = try #require(Decimal(string: "12.345678901234567890"))
        #expect(try parse("x == %@", decimal) == compare(key("x"), .equal, .value(.decimal(decimal))))
        #expect(try parse("x == %@", NSDecimalNumber(decimal: decimal)) == compare(key("x"), .equal, .value(.decimal(decimal))))
    }

    @Test func inWithAKeyPathOrAStringOnTheRight() throws {
        #expect(try parse("%@ IN posts", ObjectID(entityName: "Post", primaryKey: 2))
            == compare(.value(.object(ObjectID(entityName: "Post", primaryKey: 2))), .in, key("posts")))
        #expect(try parse("'x' IN[c] posts.title") == compare(.value(.string("x")), .in, key("posts.title"), options: .caseInsensitive))
        #expect(try parse("name IN 'Ada Lovelace'") == compare(key("name"), .in, .value(.string("Ada Lovelace"))))
    }

    @Test func descriptionsParseBackToTheSamePredicate() throws {
        for format in [
            "SELF IN {1, 2}", "SUBQUERY(posts, $p, $p.title BEGINSWITH[cd] \"a\" OR NOT $p.score > 3).@count >= 2",
            "posts.@avg.score > 2.5 AND posts.@min.title < \"b\"", "name <[c] \"B\"", "age BETWEEN[c] {1, 2}",
            "\"x\" IN posts.title", "ANY posts IN {1, 2}", "title LIKE \"a\\\\*b\"",
        ] {
            let predicate = try parse(format)
            #expect(try parse(predicate.description) == predicate, "\(format) → \(predicate)")
        }
    }

    @Test func deepSubqueriesBuiltInCodeAreBoundedAndReleasedWithoutRecursion() throws {
        func nested(_ levels: Int) -> FetchPredicate {
            var predicate = FetchPredicate.constant(true)
            for _ in 0..<levels {
                predicate = compare(subquery("posts", "p", predicate), .greaterThan, .value(.integer(0)))
            }
            return predicate
        }
        #expect(throws: FetchPredicateError.self) { try nested(257).checkDepth() }
        try nested(256).checkDepth()
        #expect(nested(300).description.contains("nested more than 256"))
        // Equality and release of 100,000 levels: worklists, no recursion.
        let a = nested(100_000)
        let b = nested(100_000)
        #expect(a == b)
        #expect(a != nested(99_999))
    }
}
