import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class Gadget: ManagedObject {
    @Attribute var name: String?
    @Attribute var size: Int = 0
}

/// The documented nesting limit (the format parser's).
private let depthLimit = 256

private let sizeIsOne = FetchPredicate.comparison(
    FetchPredicate.Comparison(.keyPath(FetchPredicate.KeyPath(["size"])), .equal, .value(.integer(1))))

/// `NOT NOT … p`, `count` times.
private func negated(_ predicate: FetchPredicate, _ count: Int) -> FetchPredicate {
    var result = predicate
    for _ in 0..<count { result = .not(result) }
    return result
}

/// `p AND (p OR (p AND (p OR …)))`: every OR inside an AND is a parenthesised group,
/// one level each, as in the format string.
private func alternating(_ levels: Int) -> FetchPredicate {
    var result = sizeIsOne
    for _ in 0..<levels { result = .and([sizeIsOne, .or([sizeIsOne, result])]) }
    return result
}

/// Whether compiling throws the depth error.
private func compileFailsForDepth(_ predicate: FetchPredicate, model: Model) throws -> Bool {
    let entity = try #require(model.entity(for: Gadget.self))
    var compiler = PredicateSQLCompiler(model: model)
    do {
        _ = try compiler.compile(predicate, entity: entity, alias: "t")
        return false
    } catch let error as FetchPredicateError {
        #expect(error.message.contains("nested more than \(depthLimit) levels"), "\(error)")
        return true
    }
}

/// Whether evaluating throws the depth error.
private func evaluationFailsForDepth(_ predicate: FetchPredicate, model: Model) throws -> Bool {
    let gadget = Gadget()
    gadget.size = 1
    do {
        _ = try PredicateEvaluator(model: model).evaluate(predicate, on: gadget)
        return false
    } catch let error as FetchPredicateError {
        #expect(error.message.contains("nested more than \(depthLimit) levels"), "\(error)")
        return true
    }
}

@Suite("Predicate depth limits without a server")
struct PredicateDepthTests {
    @Test func deeplyNestedPredicatesAreReleasedWithoutRecursion() {
        for count in [100_000, 1_000_000] {
            var predicate: FetchPredicate? = negated(sizeIsOne, count)
            #expect(predicate != nil)
            predicate = nil
            var nested: FetchPredicate? = sizeIsOne
            for index in 0..<count {
                nested = index % 2 == 0 ? .and([nested ?? sizeIsOne]) : .or([nested ?? sizeIsOne, sizeIsOne])
            }
            #expect(nested != nil)
            nested = nil
        }
    }

    @Test func sharedSubpredicatesSurviveTheRelease() {
        let shared = negated(sizeIsOne, 10)
        do {
            let outer = negated(.and([shared, shared]), 100_000)
            #expect(outer != shared)
        }
        #expect(shared == negated(sizeIsOne, 10))
    }

    @Test func deepPredicatesCompareWithoutRecursion() {
        #expect(negated(sizeIsOne, 200_000) == negated(sizeIsOne, 200_000))
        #expect(negated(sizeIsOne, 200_000) != negated(sizeIsOne, 199_999))
        #expect(negated(sizeIsOne, 200_000) != negated(.constant(true), 200_000))
    }

    @Test func tooDeepPredicatesBuiltInCodeThrowWhenCompiledOrEvaluated() throws {
        let model = try Model(entities: [Gadget.self])
        let limit = depthLimit
        #expect(FetchPredicate.maximumDepth == limit)
        for predicate in [negated(sizeIsOne, 100_000), negated(sizeIsOne, limit + 1), alternating(limit + 1)] {
            #expect(try compileFailsForDepth(predicate, model: model))
            #expect(try evaluationFailsForDepth(predicate, model: model))
            #expect(throws: FetchPredicateError.self) { try predicate.substituting([:]) }
        }
        for predicate in [negated(sizeIsOne, limit), alternating(limit)] {
            #expect(try !compileFailsForDepth(predicate, model: model))
            #expect(try !evaluationFailsForDepth(predicate, model: model))
            #expect(try predicate.substituting([:]) == predicate)
        }
    }

    /// A chain of 100,000 `&&` folded left to right is one flat AND, as the parser reads
    /// `a AND b AND c`: it compiles and evaluates without deep recursion.
    @Test func foldedChainsCountAsOneLevel() throws {
        let model = try Model(entities: [Gadget.self])
        let entity = try #require(model.entity(for: Gadget.self))
        var all = sizeIsOne
        var any = FetchPredicate.constant(false)
        for _ in 0..<100_000 {
            all = .and([all, sizeIsOne])
            any = .or([any, .not(sizeIsOne)])
        }
        var compiler = PredicateSQLCompiler(model: model)
        let sql = try compiler.compile(.and([all, .not(any)]), entity: entity, alias: "t")
        #expect(sql.components(separatedBy: " AND ").count == 100_002)
        let gadget = Gadget()
        gadget.size = 1
        let evaluator = PredicateEvaluator(model: model)
        #expect(try evaluator.evaluate(all, on: gadget))
        #expect(try !evaluator.evaluate(any, on: gadget))
        #expect(try all.substituting([:]) == all)
    }

    /// Predicates print in format-string syntax; a too-deep one is summarised (printing
    /// it must not recurse either).
    @Test func descriptionsReadAsFormatStrings() throws {
        let parsed = try FetchPredicate(format: "age > 30 AND (name BEGINSWITH[c] 'a' OR NOT name IN {'b', nil})")
        #expect("\(parsed)" == #"age > 30 AND (name BEGINSWITH[c] "a" OR NOT name IN {"b", nil})"#)
        #expect("\(negated(sizeIsOne, 1_000_000))" == "<predicate nested more than 256 levels deep>")
        var chain = sizeIsOne
        for _ in 0..<100_000 { chain = .and([chain, sizeIsOne]) }
        #expect("\(chain)".hasPrefix("size == 1 AND size == 1 AND"))
    }

    /// Whatever the format parser accepts, compiling accepts too.
    @Test func parsedPredicatesAtTheParserLimitCompile() throws {
        let model = try Model(entities: [Gadget.self])
        var format = "size == 1"
        for level in 0..<depthLimit {
            format = level % 2 == 0 ? "size == 1 AND (size == 2 OR \(format))" : "size == 3 OR (\(format))"
        }
        let predicate = try FetchPredicate(format: format)
        #expect(try !compileFailsForDepth(predicate, model: model))
        #expect(try !evaluationFailsForDepth(predicate, model: model))
    }
}
