import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private typealias Expression = FetchPredicate.Expression

/// A key path expression from dotted text.
private func key(_ path: String) -> Expression {
    .keyPath(FetchPredicate.KeyPath(path.split(separator: ".").map(String.init)))
}

/// A comparison predicate.
private func compare(
    _ left: Expression, _ op: FetchPredicate.Operator, _ right: Expression,
    options: FetchPredicate.StringOptions = [], quantifier: FetchPredicate.Quantifier? = nil
) -> FetchPredicate {
    .comparison(FetchPredicate.Comparison(left, op, right, options: options, quantifier: quantifier))
}

/// Parses a format with an argument array.
private func parse(_ format: String, _ arguments: Any?...) throws -> FetchPredicate {
    try FetchPredicate(format: format, argumentArray: arguments)
}

/// The right side of `x == %@` for one argument.
private func converted(_ argument: Any?) throws -> Expression {
    let predicate = try FetchPredicate(format: "x == %@", argumentArray: [argument])
    guard case .comparison(let comparison) = predicate.kind else {
        Issue.record("not a comparison: \(predicate)")
        return .value(.null)
    }
    return comparison.right
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
        #expect(error.format == format, sourceLocation: sourceLocation)
        #expect(error.position == position, "\(error.message)", sourceLocation: sourceLocation)
        #expect(error.message.contains(fragment), "\(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
}

private final class Note: ManagedObject {}

private struct Opaque {}

@Suite("Predicate format parsing")
struct PredicateParserTests {
    // MARK: - Operators

    @Test(arguments: [
        ("==", .equal), ("=", .equal), ("!=", .notEqual), ("<>", .notEqual),
        ("<", .lessThan), ("<=", .lessThanOrEqual), ("=<", .lessThanOrEqual),
        (">", .greaterThan), (">=", .greaterThanOrEqual), ("=>", .greaterThanOrEqual),
    ] as [(String, FetchPredicate.Operator)])
    func comparisonOperators(_ spelling: String, _ op: FetchPredicate.Operator) throws {
        let expected = compare(key("age"), op, .value(.integer(30)))
        #expect(try parse("age \(spelling) 30") == expected)
        #expect(try parse("age\(spelling)30") == expected)
    }

    @Test(arguments: [
        ("CONTAINS", .contains), ("contains", .contains), ("BEGINSWITH", .beginsWith),
        ("BeginsWith", .beginsWith), ("ENDSWITH", .endsWith), ("endswith", .endsWith),
        ("LIKE", .like), ("like", .like), ("MATCHES", .matches), ("Matches", .matches),
    ] as [(String, FetchPredicate.Operator)])
    func stringOperators(_ spelling: String, _ op: FetchPredicate.Operator) throws {
        #expect(try parse("name \(spelling) 'a*'") == compare(key("name"), op, .value(.string("a*"))))
    }

    @Test(arguments: ["==", "!=", "CONTAINS", "BEGINSWITH", "ENDSWITH", "LIKE", "MATCHES"], [
        ("[c]", .caseInsensitive), ("[d]", .diacriticInsensitive), ("[C]", .caseInsensitive),
        ("[cd]", [.caseInsensitive, .diacriticInsensitive]),
        ("[dc]", [.caseInsensitive, .diacriticInsensitive]),
    ] as [(String, FetchPredicate.StringOptions)])
    func modifiers(_ op: String, _ modifier: (String, FetchPredicate.StringOptions)) throws {
        let expected = try compare(
            key("name"), #require(FetchPredicate.Operator(rawValue: op)), .value(.string("x")),
            options: modifier.1)
        #expect(try parse("name \(op)\(modifier.0) \"x\"") == expected)
        #expect(try parse("name \(op) \(modifier.0) \"x\"") == expected)
    }

    @Test func modifierOnInAndOnListContains() throws {
        let list = Expression.list([.value(.string("a")), .value(.string("b"))])
        let expected = compare(key("name"), .in, list, options: .caseInsensitive)
        #expect(try parse("name IN[c] {'a', 'b'}") == expected)
        #expect(try parse("{'a', 'b'} CONTAINS[c] name") == expected)
    }

    @Test func modifiersOnOrderingOperators() throws {
        #expect(try parse("name <[c] 'b'") == compare(key("name"), .lessThan, .value(.string("b")), options: .caseInsensitive))
        #expect(try parse("name BETWEEN[cd] {'a', 'b'}")
            == compare(key("name"), .between, .list([.value(.string("a")), .value(.string("b"))]),
                       options: [.caseInsensitive, .diacriticInsensitive]))
    }

    @Test func badModifiers() {
        expectError("name CONTAINS[x] 'a'", at: 13, "unknown modifier '[x]'")
        expectError("name CONTAINS[cc] 'a'", at: 13, "unknown modifier '[cc]'")
        expectError("name CONTAINS[] 'a'", at: 13, "empty modifier")
        expectError("name CONTAINS[c 'a'", at: 13, "expected a modifier such as [c]")
    }

    // MARK: - Literals

    @Test(arguments: [
        ("nil", .null), ("NULL", .null), ("Nil", .null), ("null", .null),
        ("YES", .bool(true)), ("yes", .bool(true)), ("TRUE", .bool(true)), ("true", .bool(true)),
        ("NO", .bool(false)), ("no", .bool(false)), ("FALSE", .bool(false)), ("False", .bool(false)),
    ] as [(String, FetchPredicate.Value)])
    func keywordValues(_ spelling: String, _ value: FetchPredicate.Value) throws {
        #expect(try parse("flag == \(spelling)") == compare(key("flag"), .equal, .value(value)))
        #expect(try parse("\(spelling) == flag") == compare(.value(value), .equal, key("flag")))
    }

    @Test func constantPredicates() throws {
        #expect(try parse("TRUEPREDICATE") == .constant(true))
        #expect(try parse("falsepredicate") == .constant(false))
        #expect(try parse("TruePredicate AND age > 1")
            == .and([.constant(true), compare(key("age"), .greaterThan, .value(.integer(1)))]))
        #expect(try parse("NOT FALSEPREDICATE") == .not(.constant(false)))
    }

    @Test(arguments: [
        ("0", .integer(0)), ("42", .integer(42)), ("-7", .integer(-7)),
        ("3.5", .double(3.5)), ("-0.25", .double(-0.25)), ("1e3", .double(1000)),
        ("2.5E-2", .double(0.025)), ("-1E+2", .double(-100)),
        ("9223372036854775807", .integer(.max)), ("-9223372036854775808", .integer(.min)),
    ] as [(String, FetchPredicate.Value)])
    func numbers(_ text: String, _ value: FetchPredicate.Value) throws {
        #expect(try parse("n == \(text)") == compare(key("n"), .equal, .value(value)))
        #expect(try parse("n>\(text)") == compare(key("n"), .greaterThan, .value(value)))
    }

    @Test func badNumbers() {
        expectError("n == 99999999999999999999", at: 5, "does not fit in 64 bits")
        expectError("n == 12abc", at: 5, "invalid number '12abc'")
        expectError("n == 1e", at: 6, "exponent")
        expectError("n == - 3", at: 5, "'-' must be followed by a number")
    }

    @Test(arguments: [
        (#"'plain'"#, "plain"), (#""double""#, "double"), (#""""#, ""),
        (#""it's""#, "it's"), (#"'say "hi"'"#, #"say "hi""#),
        (#""a\"b""#, #"a"b"#), (#"'a\'b'"#, "a'b"), (#""back\\slash""#, #"back\slash"#),
        (#""line\nnext""#, "line\nnext"), (#""tab\there""#, "tab\there"),
        (#""\u00e9t\u00E9""#, "été"), (#""\uD83D\uDE00""#, "😀"), (#""日本 😀""#, "日本 😀"),
        (#""AND == %@ $X #in""#, "AND == %@ $X #in"),
    ])
    func strings(_ literal: String, _ expected: String) throws {
        #expect(try parse("name == \(literal)") == compare(key("name"), .equal, .value(.string(expected))))
    }

    @Test func badStrings() {
        expectError("name == 'abc", at: 8, "unterminated string")
        expectError("name == \"abc\\\"", at: 8, "unterminated string")
        expectError(#"name == "a\qb""#, at: 10, #"unknown escape '\q'"#)
        expectError(#"name == "\u12""#, at: 9, "four hexadecimal digits")
        expectError(#"name == "\uD83D\u0041""#, at: 9, "surrogate")
        expectError(#"name == "\uDE00""#, at: 9, "not a valid Unicode scalar")
    }

    // MARK: - Key paths

    @Test func keyPaths() throws {
        #expect(try parse("user.address.city == 'Oslo'")
            == compare(key("user.address.city"), .equal, .value(.string("Oslo"))))
        #expect(try parse("posts.@count > 2")
            == compare(.count(.init(["posts"])), .greaterThan, .value(.integer(2))))
        #expect(try parse("user.posts.@count == 0")
            == compare(.count(.init(["user", "posts"])), .equal, .value(.integer(0))))
        #expect(try parse("_private_1 == première")
            == compare(key("_private_1"), .equal, key("première")))
    }

    @Test func keyPathPositionsAreCharacterOffsets() throws {
        let predicate = try parse("name == '日本' AND user.name == %K", "other.name")
        guard case .and(let parts) = predicate.kind, parts.count == 2,
            case .comparison(let first) = parts[0].kind, case .comparison(let second) = parts[1].kind,
            case .keyPath(let name) = first.left, case .keyPath(let userName) = second.left,
            case .keyPath(let other) = second.right
        else {
            Issue.record("unexpected shape \(predicate)")
            return
        }
        #expect(name.position == 0)
        #expect(userName.position == 17)
        #expect(other.position == 30)
        #expect(other.components == ["other", "name"])
    }

    @Test func reservedWordsNeedHash() throws {
        #expect(try parse("#in == 3") == compare(key("in"), .equal, .value(.integer(3))))
        #expect(try parse("#AND == #Contains")
            == compare(key("AND"), .equal, key("Contains")))
        #expect(try parse("user.#select.@count > 1")
            == compare(.count(.init(["user", "select"])), .greaterThan, .value(.integer(1))))
        expectError("in == 3", at: 0, "reserved word 'in' (write #in for a key named in)")
        expectError("age == AND", at: 7, "expected a value after '==', found reserved word 'AND'")
        #expect(try parse("#SELF == 1") == compare(key("SELF"), .equal, .value(.integer(1))))
        expectError("# == 3", at: 1, "expected a key after '#'")
    }

    @Test func badKeyPaths() {
        expectError("posts.@sum > 2", at: 6, "@sum needs a key after it")
        expectError("posts.@distinctUnionOfObjects.title == 'a'", at: 6, "unsupported collection operator")
        expectError("posts.@max.@count > 2", at: 11, "only keys can follow @max")
        expectError("@count > 2", at: 0, "must follow a key path")
        expectError("posts.@count.title == 'a'", at: 12, "nothing can follow @count")
        expectError("user. == 'a'", at: 6, "expected a key after '.', found '=='")
        expectError("posts.@ > 1", at: 7, "expected a collection operator")
    }

    // MARK: - Logic

    private let a = compare(key("a"), .equal, .value(.integer(1)))
    private let b = compare(key("b"), .equal, .value(.integer(2)))
    private let c = compare(key("c"), .equal, .value(.integer(3)))

    @Test func andOrNotSpellings() throws {
        #expect(try parse("a == 1 AND b == 2") == .and([a, b]))
        #expect(try parse("a == 1 and b == 2") == .and([a, b]))
        #expect(try parse("a == 1 && b == 2") == .and([a, b]))
        #expect(try parse("a == 1 OR b == 2") == .or([a, b]))
        #expect(try parse("a == 1 Or b == 2") == .or([a, b]))
        #expect(try parse("a == 1 || b == 2") == .or([a, b]))
        #expect(try parse("NOT a == 1") == .not(a))
        #expect(try parse("not a == 1") == .not(a))
        #expect(try parse("!a == 1") == .not(a))
        #expect(try parse("! (a == 1)") == .not(a))
        #expect(try parse("NOT NOT a == 1") == .not(.not(a)))
    }

    @Test func precedenceAndParentheses() throws {
        #expect(try parse("a == 1 AND b == 2 AND c == 3") == .and([a, b, c]))
        #expect(try parse("a == 1 OR b == 2 OR c == 3") == .or([a, b, c]))
        #expect(try parse("a == 1 OR b == 2 AND c == 3") == .or([a, .and([b, c])]))
        #expect(try parse("a == 1 AND b == 2 OR c == 3") == .or([.and([a, b]), c]))
        #expect(try parse("NOT a == 1 AND b == 2") == .and([.not(a), b]))
        #expect(try parse("NOT (a == 1 AND b == 2)") == .not(.and([a, b])))
        #expect(try parse("(a == 1 OR b == 2) AND c == 3") == .and([.or([a, b]), c]))
        #expect(try parse("a == 1 AND (b == 2 AND c == 3)") == .and([a, b, c]))
        #expect(try parse("((a == 1))") == a)
        #expect(try parse("a==1&&(b==2||!c==3)") == .and([a, .or([b, .not(c)])]))
    }

    @Test func deepNestingIsAnErrorNotAStackOverflow() throws {
        let nested = String(repeating: "(", count: 200) + "a == 1" + String(repeating: ")", count: 200)
        #expect(try parse(nested) == a)
        expectError(String(repeating: "(", count: 100_000) + "a == 1", at: 256, "nested more than 256")
        expectError(String(repeating: "NOT ", count: 100_000) + "a == 1", at: 1024, "nested more")
    }

    // MARK: - Quantifiers

    @Test(arguments: [
        ("ANY", .any), ("any", .any), ("SOME", .any), ("Some", .any),
        ("ALL", .all), ("all", .all), ("NONE", .noneOf),
        ("none", .noneOf),
    ] as [(String, FetchPredicate.Quantifier)])
    func quantifiers(_ spelling: String, _ quantifier: FetchPredicate.Quantifier) throws {
        #expect(try parse("\(spelling) posts.title BEGINSWITH[c] 'a'")
            == compare(key("posts.title"), .beginsWith, .value(.string("a")),
                       options: .caseInsensitive, quantifier: quantifier))
        #expect(try parse("\(spelling) %K > %d", "posts.views", 3)
            == compare(key("posts.views"), .greaterThan, .value(.integer(3)), quantifier: quantifier))
    }

    @Test func quantifierNeedsKeyPath() {
        expectError("ANY 3 == 3", at: 4, "expected a key path after 'ANY'")
        expectError("ALL posts.@count > 1", at: 4, "expected a key path after 'ALL'")
        expectError("ANY {1} CONTAINS x", at: 4, "expected a key path after 'ANY'")
    }

    // MARK: - BETWEEN, IN, CONTAINS with lists

    @Test func between() throws {
        let bounds = Expression.list([.value(.integer(18)), .value(.integer(65))])
        let expected = compare(key("age"), .between, bounds)
        #expect(try parse("age BETWEEN {18, 65}") == expected)
        #expect(try parse("age between{18,65}") == expected)
        #expect(try parse("age BETWEEN %@", [18, 65]) == expected)
        #expect(try parse("age BETWEEN {%d, %@}", 18, 65) == expected)
        #expect(try parse("age BETWEEN $RANGE").substituting(["RANGE": [18, 65]]) == expected)
        #expect(try parse("score BETWEEN {-1.5, 2}")
            == compare(key("score"), .between, .list([.value(.double(-1.5)), .value(.integer(2))])))
    }

    @Test func betweenErrors() throws {
        expectError("age BETWEEN {1}", at: 12, "BETWEEN needs a list of two values {low, high}, found 1")
        expectError("age BETWEEN {1, 2, 3}", at: 12, "found 3")
        expectError("age BETWEEN %@", [1, 2, 3], at: 12, "found 3")
        expectError("age BETWEEN 5", at: 12, "expected a list {…} or an array argument after BETWEEN")
        expectError("age BETWEEN %@", 5, at: 12, "expected a list")
        #expect(throws: FetchPredicateError.self) {
            try parse("age BETWEEN $R").substituting(["R": 5])
        }
    }

    @Test func inLists() throws {
        let names = Expression.list([.value(.string("a")), .value(.string("b"))])
        #expect(try parse("name IN {'a', \"b\"}") == compare(key("name"), .in, names))
        #expect(try parse("name in %@", ["a", "b"]) == compare(key("name"), .in, names))
        #expect(try parse("name IN %@", NSArray(array: ["a", "b"])) == compare(key("name"), .in, names))
        #expect(try parse("name IN {}") == compare(key("name"), .in, .list([])))
        #expect(try parse("name IN %@", [String]()) == compare(key("name"), .in, .list([])))
        #expect(try parse("id IN {1, nil, $X}")
            == compare(key("id"), .in, .list([.value(.integer(1)), .value(.null), .variable("X")])))

        let fromSet = try parse("id IN %@", Set([3, 1, 2]))
        guard case .comparison(let comparison) = fromSet.kind, case .list(let elements) = comparison.right
        else {
            Issue.record("unexpected \(fromSet)")
            return
        }
        #expect(elements.count == 3)
        for integer: Int64 in [1, 2, 3] {
            #expect(elements.contains(.value(.integer(integer))))
        }
    }

    @Test func inErrors() {
        expectError("name IN 3", at: 8, "expected a list {…} or an array argument after IN")
        expectError("name IN %@", 3, at: 8, "expected a list")
        expectError("name IN {1, {2}}", at: 12, "nested lists are not supported")
        expectError("name IN %@", [[1], [2]], at: 8, "nested arrays are not supported")
        expectError("name IN {1, 2", at: 13, "expected ',' or '}' in the list opened at position 8")
        expectError("name IN {1 2}", at: 11, "expected ',' or '}'")
        expectError("name IN {1,}", at: 11, "expected a value in the list, found '}'")
    }

    @Test func listContainsBecomesIn() throws {
        let list = Expression.list([.value(.integer(1)), .value(.integer(2))])
        let expected = compare(key("age"), .in, list)
        #expect(try parse("{1, 2} CONTAINS age") == expected)
        #expect(try parse("%@ CONTAINS age", [1, 2]) == expected)
        #expect(try parse("$LIST CONTAINS age").substituting(["LIST": [1, 2]]) == expected)
        #expect(try parse("name CONTAINS 'x'") == compare(key("name"), .contains, .value(.string("x"))))
    }

    @Test func listsOnlyWhereAListBelongs() {
        expectError("{1} == age", at: 0, "a list can only stand on the left of CONTAINS")
        expectError("age == {1, 2}", at: 7, "a list is only allowed after IN or BETWEEN, not after ==")
        expectError("age == %@", [1, 2], at: 7, "not after ==")
        expectError("{1} CONTAINS {2}", at: 13, "a list can only stand on the left of CONTAINS")
    }

    // MARK: - Substitutions

    @Test func objectArgumentsConvert() throws {
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let uuid = UUID()
        let bytes = Data([0, 1, 255])
        let id = ObjectID(entityName: "Note", primaryKey: 42)
        #expect(try converted(nil) == .value(.null))
        #expect(try converted(NSNull()) == .value(.null))
        #expect(try converted(String?.none as Any) == .value(.null))
        #expect(try converted(Int?.some(4) as Any) == .value(.integer(4)))
        #expect(try converted("text") == .value(.string("text")))
        #expect(try converted(Substring("sub")) == .value(.string("sub")))
        #expect(try converted(NSString(string: "ns")) == .value(.string("ns")))
        #expect(try converted(true) == .value(.bool(true)))
        #expect(try converted(false) == .value(.bool(false)))
        #expect(try converted(7) == .value(.integer(7)))
        #expect(try converted(Int8(-8)) == .value(.integer(-8)))
        #expect(try converted(UInt64(9)) == .value(.integer(9)))
        #expect(try converted(Int64.min) == .value(.integer(.min)))
        #expect(try converted(2.5) == .value(.double(2.5)))
        #expect(try converted(Float(0.5)) == .value(.double(0.5)))
        #expect(try converted(Decimal(string: "12.34")) == .value(.decimal(Decimal(string: "12.34") ?? 0)))
        #expect(try converted(date) == .value(.date(date)))
        #expect(try converted(uuid) == .value(.uuid(uuid)))
        #expect(try converted(bytes) == .value(.data(bytes)))
        #expect(try converted(id) == .value(.object(id)))
        #expect(try converted(NSNumber(value: true)) == .value(.bool(true)))
        #expect(try converted(NSNumber(value: 5)) == .value(.integer(5)))
        #expect(try converted(NSNumber(value: Int8(1))) == .value(.integer(1)))
        #expect(try converted(NSNumber(value: 1.25)) == .value(.double(1.25)))
        let mixed: [Any?] = ["a", nil, Int?.none as Any, 1]
        #expect(try FetchPredicate(format: "x IN %@", argumentArray: [mixed])
            == compare(key("x"), .in, .list([
                .value(.string("a")), .value(.null), .value(.null), .value(.integer(1)),
            ])))
    }

    @Test func managedObjectArguments() throws {
        let note = Note()
        expectError("note == %@", note, at: 8, "object must be saved")
        note.objectID = ObjectID(entityName: "Note", primaryKey: 7)
        #expect(try parse("note == %@", note)
            == compare(key("note"), .equal, .value(.object(ObjectID(entityName: "Note", primaryKey: 7)))))
        #expect(try parse("note IN %@", [note])
            == compare(key("note"), .in, .list([.value(.object(note.objectID))])))
    }

    /// Typed arrays and sets (converted without a cast per element) give the lists their
    /// elements give one by one, `nil` elements included; nested lists are still refused.
    @Test func typedListArgumentsConvertLikeTheirElements() throws {
        let uuid = UUID()
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let lists: [(Any, [Expression])] = [
            (["a", "b"], [.value(.string("a")), .value(.string("b"))]),
            (["a", nil] as [String?], [.value(.string("a")), .value(.null)]),
            ([1, -2], [.value(.integer(1)), .value(.integer(-2))]),
            ([Int64.min], [.value(.integer(.min))]),
            ([Int32(3)], [.value(.integer(3))]),
            ([4, nil] as [Int?], [.value(.integer(4)), .value(.null)]),
            ([true], [.value(.bool(true))]),
            ([0.5], [.value(.double(0.5))]),
            ([uuid], [.value(.uuid(uuid))]),
            ([date], [.value(.date(date))]),
            (Set(["only"]), [.value(.string("only"))]),
            (Set([Int64(9)]), [.value(.integer(9))]),
            ([Any]([Substring("s"), NSNumber(value: 2), "t"]), [.value(.string("s")), .value(.integer(2)), .value(.string("t"))]),
        ]
        for (argument, elements) in lists {
            #expect(try parse("x IN %@", argument) == compare(key("x"), .in, .list(elements)), "\(type(of: argument))")
        }
        expectError("x IN %@", [["nested"]], at: 5, "nested arrays are not supported")
        expectError("x IN %@", [UInt64.max], at: 5, "does not fit in 64 bits")
    }

    @Test func unsupportedArguments() {
        expectError("x == %@", Opaque(), at: 5, "argument 1 for %@: cannot use a value of type Opaque")
        expectError("x == %@", JSONValue.string("a"), at: 5, "JSONValue arguments are not supported")
        expectError("x == %@", UInt64.max, at: 5, "an integer argument of type UInt64 does not fit in 64 bits")
        expectError("x == %@ AND y IN %@", 1, [Opaque()], at: 17, "argument 2 for %@")
    }

    @Test func keyPathArguments() throws {
        #expect(try parse("%K == %@", "name", "Ada") == compare(key("name"), .equal, .value(.string("Ada"))))
        #expect(try parse("%K == %K", "user.first_name", "in")
            == compare(key("user.first_name"), .equal, key("in")))
        #expect(try parse("%K > 1", "posts.@count") == compare(.count(.init(["posts"])), .greaterThan, .value(.integer(1))))
        #expect(try parse("%K.name == 'x'", "user") == compare(key("user.name"), .equal, .value(.string("x"))))
        #expect(try parse("%K.@count > 1", "posts") == compare(.count(.init(["posts"])), .greaterThan, .value(.integer(1))))
        expectError("%K == 1", 5, at: 0, "argument 1 for %K must be a key path string, got Int")
        expectError("%K == 1", nil, at: 0, "got nil")
    }

    @Test(arguments: [
        "", "name; DROP TABLE users", "name == 1 OR 1 == 1", "a b", "\"name\"", "'name'",
        "a..b", ".a", "a.", "1abc", "@count", "a.@count.b", "name--", "a'b", "a)", "$X", "%@",
        "name\n", "a.@sum", "#in",
    ])
    func keyPathArgumentsCannotInjectSyntax(_ argument: String) {
        expectError("%K == 1", argument, at: 0, "argument 1 for %K is not a key path")
        expectError("age > 1 AND ANY %K == 1", argument, at: 16, "is not a key path")
    }

    @Test(arguments: ["%d", "%i", "%u", "%ld", "%li", "%lu", "%lld", "%lli", "%llu"])
    func integerSpecifiers(_ specifier: String) throws {
        let expected = compare(key("n"), .equal, .value(.integer(5)))
        #expect(try parse("n == \(specifier)", 5) == expected)
        #expect(try parse("n == \(specifier)", Int32(5)) == expected)
        #expect(try parse("n == \(specifier)", UInt8(5)) == expected)
        expectError("n == \(specifier)", "5", at: 5, "must be an integer, got String")
        expectError("n == \(specifier)", 5.0, at: 5, "must be an integer, got Double")
        expectError("n == \(specifier)", true, at: 5, "must be an integer, got Bool")
        expectError("n == \(specifier)", nil, at: 5, "must be an integer, got nil")
    }

    @Test(arguments: ["%f", "%lf"])
    func floatingPointSpecifiers(_ specifier: String) throws {
        #expect(try parse("n == \(specifier)", 1.5) == compare(key("n"), .equal, .value(.double(1.5))))
        #expect(try parse("n == \(specifier)", Float(0.25)) == compare(key("n"), .equal, .value(.double(0.25))))
        #expect(try parse("n == \(specifier)", 3) == compare(key("n"), .equal, .value(.double(3))))
        expectError("n == \(specifier)", "1.5", at: 5, "must be a number, got String")
    }

    @Test func stringSpecifier() throws {
        #expect(try parse("name == %s", "Ada") == compare(key("name"), .equal, .value(.string("Ada"))))
        expectError("name == %s", 3, at: 8, "argument 1 for %s must be a string, got Int")
    }

    @Test func variadicAndArrayInitialisersAgree() throws {
        let variadic = try FetchPredicate(format: "a == %@ AND b IN %@ AND %K > %d", "x", [1, 2], "c", 3)
        let array = try FetchPredicate(
            format: "a == %@ AND b IN %@ AND %K > %d", argumentArray: ["x", [1, 2], "c", 3])
        #expect(variadic == array)
        #expect(try FetchPredicate(format: "a == %@", nil) == compare(key("a"), .equal, .value(.null)))
    }

    @Test func variadicArgumentsSpreadAnArrayOfAny() throws {
        // Swift passes an `[Any?]` given to `Any?...` as the whole argument list, so such
        // an array needs `argumentArray:`; typed arrays (`[Int]`) stay one argument.
        let anys: [Any?] = [1, 2]
        #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "x IN %@", anys) }
        #expect(try FetchPredicate(format: "x IN %@", argumentArray: [anys])
            == compare(key("x"), .in, .list([.value(.integer(1)), .value(.integer(2))])))
        #expect(try FetchPredicate(format: "x IN %@", [1, 2])
            == compare(key("x"), .in, .list([.value(.integer(1)), .value(.integer(2))])))
    }

    @Test func argumentCounts() {
        expectError("a == %@ AND b == %@", "x", at: 17, "missing argument for %@: only 1 argument was given")
        expectError("a == %d", at: 5, "only 0 arguments were given")
        expectError("a == %@", "x", "y", at: 7, "too many arguments: the format uses 1 but 2 were given")
        expectError("a == 'x'", "y", at: 8, "too many arguments: the format uses 0 but 1 were given")
    }

    @Test func badSpecifiers() {
        expectError("a == %%", at: 5, "'%%' has no meaning outside a string")
        expectError("a == %x", 1, at: 5, "unknown format specifier '%x'")
        expectError("%k == 1", "a", at: 0, "unknown format specifier '%k'")
        expectError("a == % 1", at: 5, "unknown format specifier '%'")
    }

    // MARK: - Variables

    @Test func variables() throws {
        let template = try parse("name == $NAME AND age IN {$MIN, 99} OR NOT $FLAG == flag")
        #expect(template == .or([
            .and([
                compare(key("name"), .equal, .variable("NAME")),
                compare(key("age"), .in, .list([.variable("MIN"), .value(.integer(99))])),
            ]),
            .not(compare(.variable("FLAG"), .equal, key("flag"))),
        ]))
        let substituted = try template.substituting(["NAME": "Ada", "MIN": 18, "FLAG": nil])
        #expect(substituted == .or([
            .and([
                compare(key("name"), .equal, .value(.string("Ada"))),
                compare(key("age"), .in, .list([.value(.integer(18)), .value(.integer(99))])),
            ]),
            .not(compare(.value(.null), .equal, key("flag"))),
        ]))
        #expect(try parse("id IN $IDS").substituting(["IDS": [1, 2]])
            == compare(key("id"), .in, .list([.value(.integer(1)), .value(.integer(2))])))
        #expect(try parse("TRUEPREDICATE").substituting([:]) == .constant(true))
    }

    @Test func variableErrors() throws {
        let template = try parse("name == $NAME")
        let missing = #expect(throws: FetchPredicateError.self) { try template.substituting(["OTHER": 1]) }
        #expect(missing?.message == "no value for variable $NAME")
        let opaque = #expect(throws: FetchPredicateError.self) { try template.substituting(["NAME": Opaque()]) }
        #expect(opaque?.message.contains("variable $NAME: cannot use a value of type Opaque") == true)
        #expect(throws: FetchPredicateError.self) { try template.substituting(["NAME": ["a", "b"]]) }
        #expect(throws: FetchPredicateError.self) { try parse("id IN $IDS").substituting(["IDS": 3]) }
        #expect(throws: FetchPredicateError.self) {
            try parse("id IN {$A}").substituting(["A": [1, 2]])
        }
        expectError("name == $", at: 9, "expected a variable name after '$', found end of string")
        expectError("name == $1", at: 9, "expected a variable name")
    }

    // MARK: - Data stays data

    @Test func quotedTextIsNeverInterpreted() throws {
        #expect(try parse("name == \"%@\"") == compare(key("name"), .equal, .value(.string("%@"))))
        #expect(try parse("name == '%K' OR name == '$X' OR name == '%%'") == .or([
            compare(key("name"), .equal, .value(.string("%K"))),
            compare(key("name"), .equal, .value(.string("$X"))),
            compare(key("name"), .equal, .value(.string("%%"))),
        ]))
    }

    @Test(arguments: [
        "' OR 1=1 --", "\" OR \"1\"=\"1", "'); DROP TABLE users; --", "%@ %K $X", "a\\'b",
        "name == 'x' OR TRUEPREDICATE", "\u{0}", "} OR {",
    ])
    func injectionThroughValuesStaysOneString(_ payload: String) throws {
        let expected = compare(key("name"), .equal, .value(.string(payload)))
        #expect(try parse("name == %@", payload) == expected)
        #expect(try parse("name == %s", payload) == expected)
        #expect(try parse("name == $V").substituting(["V": payload]) == expected)
        #expect(try parse("name IN %@", [payload]) == compare(key("name"), .in, .list([.value(.string(payload))])))
    }

    // MARK: - Malformed strings

    @Test(arguments: [
        ("", 0, "expected a key path, a value or '(', found end of string"),
        ("(age > 1", 8, "expected ')' to close the '(' at position 0, found end of string"),
        ("((age > 1) AND b == 2", 21, "expected ')' to close the '(' at position 0"),
        ("age > 1)", 7, "unexpected ')' without a matching '('"),
        ("()", 1, "expected a key path, a value or '(', found ')'"),
        ("age ==", 6, "expected a value after '==', found end of string"),
        ("age =< AND b == 1", 7, "expected a value after '=<', found reserved word 'AND'"),
        ("name BEGINSWITH", 15, "expected a value after 'BEGINSWITH', found end of string"),
        ("age", 3, "expected an operator such as ==, <, IN or CONTAINS after 'age', found end of string"),
        ("user.age 3", 9, "after 'user.age', found '3'"),
        ("age EQUALS 3", 4, "after 'age', found 'EQUALS'"),
        ("age ~ 3", 4, "unexpected character '~'"),
        ("age === 3", 6, "expected a value after '==', found '='"),
        ("a == 1 & b == 2", 7, "unexpected character '&' (did you mean '&&'?)"),
        ("a == 1 | b == 2", 7, "did you mean '||'?"),
        ("a == 1 b == 2", 7, "expected AND, OR or end of string, found 'b'"),
        ("a == 1 AND", 10, "expected a key path, a value or '(', found end of string"),
        ("a == 1 OR OR b == 2", 10, "found reserved word 'OR'"),
        ("NOT", 3, "found end of string"),
        ("== 1", 0, "expected a key path, a value or '(', found '=='"),
        ("a == b == c", 7, "expected AND, OR or end of string, found '=='"),
        ("name == 'a' \"b\"", 12, "expected AND, OR or end of string, found the string \"b\""),
        ("name == 'x' AND 日本 ~ 1", 19, "unexpected character '~'"),
    ] as [(String, Int, String)])
    func malformedStrings(_ format: String, _ position: Int, _ message: String) {
        expectError(format, at: position, message)
    }

    @Test func errorDescriptionPointsAtThePosition() {
        let error = #expect(throws: FetchPredicateError.self) { try parse("age >= ") }
        #expect(error?.description == """
            invalid predicate at position 7: expected a value after '>=', found end of string
              age >= \("")
                     ^
            """)
        #expect(error?.message == "expected a value after '>=', found end of string")
    }
}
