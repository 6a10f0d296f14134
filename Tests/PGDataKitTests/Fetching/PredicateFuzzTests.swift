import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class Widget: ManagedObject {
    @Attribute var name: String?
    @Attribute var size: Int = 0
    @Attribute var price: Double?
    @Attribute var cost: Decimal?
    @Attribute var when: Date?
    @Attribute var flag: Bool = false
    @Attribute var tag: UUID?
    @Attribute var tags: [String] = []
    @Attribute var sizes: [Int]?
    @Relationship(inverse: "widget") var parts: Set<Part>
}

private final class Part: ManagedObject {
    @Attribute var label: String?
    @Relationship(inverse: "parts") var widget: Widget?
}

/// SplitMix64: the same inputs on every run, so a failure can be replayed (the fuzz
/// tests of this target share it).
struct FuzzGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private struct Opaque {}

@Suite("Format-string fuzzing without a server")
struct PredicateFuzzTests {
    static let tokens = [
        "name", "size", "price", "cost", "when", "flag", "tag", "parts", "widget", "label", "parts.label",
        "widget.name", "parts.@count", "tags", "sizes", "tags.@count", "@count", "@sum", ".", "==", "=", "!=", "<>", "<", "<=", ">", ">=", "=>",
        "=<", "BETWEEN", "IN", "CONTAINS", "BEGINSWITH", "ENDSWITH", "LIKE", "MATCHES", "[c]", "[d]", "[cd]",
        "[x]", "[", "]", "AND", "OR", "NOT", "&&", "||", "!", "(", ")", "{", "}", ",", "'", "\"", "%@", "%K",
        "%d", "%f", "%s", "%i", "%%", "%", "%ld", "$X", "$NAME", "$", "#name", "#", "ANY", "ALL", "NONE",
        "SOME", "TRUEPREDICATE", "FALSEPREDICATE", "nil", "NULL", "YES", "NO", "TRUE", "FALSE", "SELF",
        "SUBQUERY", "FUNCTION", "CAST", "0", "1", "-3", "1.5e3", "1e999", "-0.0", "0x1F", "0b101", "0o17",
        "9223372036854775807", "9223372036854775808", "'a*b?'", "'*'", "'?'", "\"(a+)+b\"", "'.*'", "\"[a-\"",
        "'(?i)x'", "'Ada)|(?:.*'", "'\\\\'", "'é'", "\"É\"", "🚀", "日本", "\\", "\u{0}", "'\\u0041'", "\"\\\"\"",
        "@", "..", "\n", "\t", " ", "'\u{301}'", "(\u{301}", "'a\u{300}'", "*", "?", "+", "-", "/",
        "@max", "@avg", ".@min.", "$p", "SUBQUERY(parts, $p, ", ").@count", "%e", "%hi", "%lu", "'\\*'",
    ]

    fileprivate static func argument(using random: inout FuzzGenerator) -> Any? {
        switch Int.random(in: 0..<24, using: &random) {
        case 0: return nil
        case 1: return NSNull()
        case 2: return "name"
        case 3: return "parts.@count"
        case 4: return "widget.name"
        case 5: return "a*"
        case 6: return "(a+)+b"
        case 7: return String(repeating: "*", count: Int.random(in: 0...1_000, using: &random)) + "b"
        case 8: return Int.random(in: Int.min...Int.max, using: &random)
        case 9: return Double.nan
        case 10: return Double.infinity
        case 11: return 2.5
        case 12: return Decimal(string: "123456789012345678901234567890123456789")
        case 13: return Date(timeIntervalSince1970: 1e13)
        case 14: return UUID()
        case 15: return Data([0, 1, 2])
        case 16: return [1, 2, 3]
        case 17: return ["a", "b"]
        case 18: return Set(["x"])
        case 19: return [[1]]
        case 20: return Opaque()
        case 21: return true
        case 22: return Int32(7)
        default: return "Ada)|(?:.*"
        }
    }

    static let keyPaths = [
        "name", "size", "price", "cost", "when", "flag", "tag", "parts.label", "widget.name", "parts.@count",
        "label", "widget", "parts", "widget.size", "nosuchkey", "#name", "name.length", "tags", "sizes",
        "tags.@count", "widget.tags", "parts.widget.sizes", "tags.@max.x",
        "SELF", "parts.@max.label", "parts.@avg.label", "widget.parts.@count", "widget.parts.@sum.widget.size",
        "SUBQUERY(parts, $p, $p.label LIKE 'a*' OR $p.widget.size > 2).@count",
        "SUBQUERY(widget.parts, $p, SUBQUERY($p.widget.parts, $q, $q == $p).@count > 0).@count",
    ]
    static let operators = [
        "==", "=", "!=", "<>", "<", "<=", ">", ">=", "=>", "=<", "BETWEEN", "IN", "CONTAINS", "BEGINSWITH",
        "ENDSWITH", "LIKE", "MATCHES", "like", "matches",
    ]
    static let patterns = [
        "'a*'", "'*a*b*'", "'?'", "'A.a'", "'(a+)+b'", "'.*'", "'[a-c].*'", "'a{2,3}'", "'a{256}'", "'(?i)ada'",
        "'Ada)|(?:.*'", "'\\\\bx'", "'[[:alpha:]]+'", "'(a|b)*'", "'a*+'", "'[a&&b]'", "'\\\\u0041'", "'é.'",
        "'(?<=a)b'", "'(a)\\\\1'", "''", "'('", "'['", "'\\\\'",
    ]

    /// A mostly well-formed predicate, with `%` specifiers whose arguments are appended
    /// to `arguments`.
    fileprivate static func predicateText(
        depth: Int, arguments: inout [Any?], using random: inout FuzzGenerator
    ) -> String {
        let roll = Int.random(in: 0..<10, using: &random)
        if depth < 6 && roll < 3 {
            let left = predicateText(depth: depth + 1, arguments: &arguments, using: &random)
            let right = predicateText(depth: depth + 1, arguments: &arguments, using: &random)
            let joiner = ["AND", "OR", "&&", "||", "and"].randomElement(using: &random) ?? "AND"
            return "(\(left) \(joiner) \(right))"
        }
        if depth < 6 && roll == 3 {
            return (Bool.random(using: &random) ? "NOT " : "!")
                + predicateText(depth: depth + 1, arguments: &arguments, using: &random)
        }
        if roll == 4 { return Bool.random(using: &random) ? "TRUEPREDICATE" : "FALSEPREDICATE" }
        var text = ""
        if Int.random(in: 0..<5, using: &random) == 0 {
            text += (["ANY ", "ALL ", "NONE ", "SOME "].randomElement(using: &random) ?? "")
        }
        if Int.random(in: 0..<6, using: &random) == 0 {
            text += "%K"
            arguments.append(keyPaths.randomElement(using: &random))
        } else {
            text += keyPaths.randomElement(using: &random) ?? "name"
        }
        let op = operators.randomElement(using: &random) ?? "=="
        text += " " + op
        if Int.random(in: 0..<4, using: &random) == 0 {
            text += ["[c]", "[d]", "[cd]", "[x]"].randomElement(using: &random) ?? ""
        }
        text += " "
        switch Int.random(in: 0..<12, using: &random) {
        case 0, 1: text += patterns.randomElement(using: &random) ?? "''"
        case 2: text += String(Int.random(in: -100...100, using: &random))
        case 3: text += ["nil", "YES", "NO", "1.5", "1e999", "-0.0", "9223372036854775807"].randomElement(using: &random) ?? ""
        case 4: text += "{1, 'a', nil}"
        case 5: text += "{" + String(Int.random(in: 0...5, using: &random)) + ", 10}"
        case 6, 7:
            text += "%@"
            arguments.append(argument(using: &random))
        case 8:
            text += "%d"
            arguments.append(Int.random(in: -5...5, using: &random))
        case 9: text += "$X"
        case 10: text += keyPaths.randomElement(using: &random) ?? "size"
        default: text += "\"" + String(repeating: "a", count: Int.random(in: 0...45, using: &random)) + "\""
        }
        return text
    }

    /// One input: a mostly well-formed predicate, perhaps mutated, or token soup.
    fileprivate static func input(using random: inout FuzzGenerator) -> (String, [Any?]) {
        var arguments: [Any?] = []
        var text: String
        switch Int.random(in: 0..<8, using: &random) {
        case 0:
            text = soup(using: &random)
            arguments = (0..<Int.random(in: 0...4, using: &random)).map { _ in argument(using: &random) }
        case 1:
            // Deep nesting around a predicate, over or under the parser's limit.
            let levels = Int.random(in: 200...400, using: &random)
            let inner = predicateText(depth: 0, arguments: &arguments, using: &random)
            text = Bool.random(using: &random)
                ? String(repeating: "(", count: levels) + inner + String(repeating: ")", count: levels)
                : String(repeating: "NOT ", count: levels) + inner
        default:
            text = predicateText(depth: 0, arguments: &arguments, using: &random)
        }
        if Int.random(in: 0..<4, using: &random) == 0 {
            // Mutate: insert a token, drop a piece, or repeat a piece.
            var scalars = Array(text.unicodeScalars)
            let at = Int.random(in: 0...scalars.count, using: &random)
            switch Int.random(in: 0..<3, using: &random) {
            case 0: scalars.insert(contentsOf: (tokens.randomElement(using: &random) ?? "").unicodeScalars, at: at)
            case 1: scalars.removeSubrange(at..<min(scalars.count, at + Int.random(in: 1...4, using: &random)))
            default: scalars.insert(contentsOf: scalars[at..<min(scalars.count, at + 8)], at: at)
            }
            text = String(String.UnicodeScalarView(scalars))
        }
        if Int.random(in: 0..<50, using: &random) == 0 {
            text += " AND name LIKE '" + String(repeating: "*", count: 100_000) + "'"
        }
        return (text, arguments)
    }

    fileprivate static func soup(using random: inout FuzzGenerator) -> String {
        var text = ""
        for _ in 0..<Int.random(in: 1...14, using: &random) {
            if Int.random(in: 0..<12, using: &random) == 0 {
                // A random scalar anywhere in Unicode.
                let value = UInt32.random(in: 0...0x10FFFF, using: &random)
                if let scalar = Unicode.Scalar(value) { text.unicodeScalars.append(scalar) }
            } else {
                text += tokens.randomElement(using: &random) ?? ""
            }
            if Bool.random(using: &random) { text += " " }
        }
        return text
    }

    /// 20,000 seeded inputs (or five seconds, whichever comes first) — predicates that
    /// are mostly well formed, mutated ones, token soup, deep nesting, huge strings,
    /// random Unicode — through the parser, `substituting(_:)`, the SQL compiler and the
    /// in-memory evaluator (on unsaved objects, no server): nothing may crash, and every
    /// failure must be a `FetchPredicateError`.
    @Test func formatStringsNeverCrashAndFailWithTypedErrors() throws {
        let model = try Model(entities: [Widget.self, Part.self])
        let widgetEntity = try #require(model.entity(for: Widget.self))
        let partEntity = try #require(model.entity(for: Part.self))
        let widgets = [Widget(), Widget(), Widget()]
        widgets[0].name = "Ada"
        widgets[0].size = 3
        widgets[0].price = 2.5
        widgets[0].cost = Decimal(string: "1.25")
        widgets[0].when = Date(timeIntervalSince1970: 0)
        widgets[0].tag = UUID()
        widgets[0].tags = ["Ada", "é"]
        widgets[0].sizes = [1, -2]
        widgets[1].sizes = []
        widgets[1].name = String(repeating: "a", count: 40)
        widgets[1].flag = true
        widgets[2].name = "é\n🚀"
        let part = Part()
        part.label = "first"
        part.widget = widgets[0]

        var random = FuzzGenerator(state: 9_2026)
        var failures = 0
        func unexpected(_ error: any Error, _ stage: String, _ format: String) {
            failures += 1
            if failures <= 10 {
                Issue.record("\(stage) threw \(type(of: error)) \(error) for \(format.prefix(200).debugDescription)")
            }
        }
        let deadline = ContinuousClock.now + .seconds(5)
        var inputs = 0
        while inputs < 20_000 && ContinuousClock.now < deadline {
            inputs += 1
            let (format, arguments) = Self.input(using: &random)
            var predicate: FetchPredicate
            do {
                predicate = try FetchPredicate(format: format, argumentArray: arguments)
            } catch is FetchPredicateError {
                continue
            } catch {
                unexpected(error, "parsing", format)
                continue
            }
            if Bool.random(using: &random) {
                do {
                    predicate = try predicate.substituting([
                        "X": Self.argument(using: &random), "NAME": Self.argument(using: &random),
                    ])
                } catch is FetchPredicateError {
                    continue
                } catch {
                    unexpected(error, "substituting", format)
                    continue
                }
            }
            for entity in [widgetEntity, partEntity] {
                var compiler = PredicateSQLCompiler(model: model)
                do {
                    _ = try compiler.compile(predicate, entity: entity, alias: "t")
                } catch is FetchPredicateError {
                } catch {
                    unexpected(error, "compiling", format)
                }
            }
            let evaluator = PredicateEvaluator(model: model)
            for object in widgets + [part] {
                do {
                    _ = try evaluator.evaluate(predicate, on: object)
                } catch is FetchPredicateError {
                } catch {
                    unexpected(error, "evaluating", format)
                }
            }
        }
        #expect(failures == 0, "\(failures) of \(inputs) inputs failed with an untyped error")
        #expect(inputs > 100)
    }
}
