import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class Label: ManagedObject {
    @Attribute var text: String?
}

private let model = Result { try Model(entities: [Label.self]) }

/// `text MATCHES pattern` on an unsaved object, through the in-memory evaluator.
private func matches(_ text: String, _ pattern: String, options: FetchPredicate.StringOptions = []) throws -> Bool {
    let label = Label()
    label.text = text
    let predicate = FetchPredicate.comparison(
        FetchPredicate.Comparison(.keyPath(FetchPredicate.KeyPath(["text"])), .matches, .value(.string(pattern)), options: options))
    return try PredicateEvaluator(model: try model.get()).evaluate(predicate, on: label)
}

/// Compiles `text MATCHES pattern` to SQL.
private func compile(_ pattern: String) throws -> String {
    let model = try model.get()
    let entity = try #require(model.entity(for: Label.self))
    var compiler = PredicateSQLCompiler(model: model)
    return try compiler.compile(try FetchPredicate(format: "text MATCHES %@", pattern), entity: entity, alias: "t")
}

@Suite("MATCHES without a server")
struct RegexMatchTests {
    @Test(arguments: [
        ("Ada", "A.a", true), ("Ada", "A", false), ("Ada", "[a-c].*", false), ("bob", "[a-c].*", true),
        ("a\nb", "a.b", true), ("a\nb", "a.*", true), ("ab\n", "ab", false), ("ab", "ab|cd", true),
        ("cd", "ab|cd", true), ("abcd", "ab|cd", false), ("x", "", false), ("", "", true),
    ] as [(String, String, Bool)])
    func wholeStringMatches(_ text: String, _ pattern: String, _ expected: Bool) throws {
        #expect(try matches(text, pattern) == expected, "\(text.debugDescription) MATCHES \(pattern.debugDescription)")
    }

    @Test(arguments: [
        "(", "a)", "[", "a{2,1}", "Ada)|(?:.*", ").*|(", "*a", "(?<", "\\", "(?i)a", "a{256}", "\\Qa\\E", "[[a]]",
        "\\bx", "a*+", "(?<name>a)", "(?>a)", "(?#c)a", "[a&&b]",
    ])
    func invalidOrUnbalancedPatternsAreTypedErrorsInBothPaths(_ pattern: String) throws {
        #expect(throws: FetchPredicateError.self) { try matches("Bob", pattern) }
        #expect(throws: FetchPredicateError.self) { try compile(pattern) }
    }

    /// `(a+)+b` against forty `a`s backtracks for seconds per object: the in-memory
    /// evaluation stops at its budget with a typed error instead.
    @Test func catastrophicBacktrackingStopsAtTheBudget() throws {
        let start = ContinuousClock.now
        do {
            _ = try matches(String(repeating: "a", count: 40), "(a+)+b")
            Issue.record("expected the regular expression budget to run out")
        } catch let error as FetchPredicateError {
            #expect(error.message.contains("MATCHES"), "\(error)")
        }
        // About a third of a second when the machine is idle; the full suite on two
        // cores once took 1.04 s, and the same budget in FetchHardeningTests 3.4 s with CPU
        // burners beside it. Unbounded, the backtracking runs for hours.
        #expect(ContinuousClock.now - start < .seconds(60))
        // An ordinary pattern over a long text stays within the budget.
        #expect(try matches(String(repeating: "ab", count: 100_000), "(ab)*"))
    }
}
