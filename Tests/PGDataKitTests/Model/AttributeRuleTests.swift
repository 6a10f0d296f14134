import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class RuledPerson: ManagedObject {
    override class var tableName: String { "ruled_people" }
    @Attribute(validate: [.required, .length(1...5)]) var name: String?
    @Attribute(validate: [.range(0...150)]) var age: Int?
    @Attribute(validate: [.minimum(1), .maximum(9)]) var level: Int = 1
    @Attribute(validate: [.pattern("[a-z]+@[a-z]+")]) var email: String?
    @Attribute(validate: [.length(2...), .length(...4)]) var code: String = "ab"
    @Attribute(validate: [.custom("an even number") { $0 % 2 == 0 }]) var seats: Int = 2
    @Attribute(validate: [.custom("set or absent, never empty") { $0 != "" }]) var nickname: String?
    @Attribute(validate: [.pattern("(a+)+b")]) var slow: String?
    @Attribute var free: String?
}

private final class BadPattern: ManagedObject {
    override class var tableName: String { "bad_patterns" }
    @Attribute(validate: [.pattern("(unclosed")]) var text: String?
}

/// The rules of `@Attribute(validate:)`, checked through `validateValue(_:forKey:)` (no
/// context, no server): what passes, what fails, and how failures read.
@Suite("Attribute rules, without a server")
struct AttributeRuleTests {
    /// The rules a value breaks, by kind (none when it passes).
    private func broken(_ value: Any?, _ key: String) throws -> [ValidationFailure.Rule] {
        do {
            try RuledPerson().validateValue(value, forKey: key)
            return []
        } catch let error as ObjectValidationError {
            return error.failures.map(\.rule)
        }
    }

    @Test func requiredRefusesNilAndNothingElse() throws {
        #expect(try broken(nil, "name") == [.required])
        #expect(try broken("Ann", "name") == [])
        // `nil` passes every other rule of an optional attribute.
        #expect(try broken(nil, "age") == [])
        #expect(try broken(nil, "email") == [])
    }

    @Test func lengthCountsUnicodeScalarsBothEnds() throws {
        #expect(try broken("", "name") == [.length])
        #expect(try broken("abcdef", "name") == [.length])
        // Five scalars, more UTF-8 bytes (and UTF-16 units): within 1...5, as
        // PostgreSQL's char_length counts.
        #expect(try broken("ÅÄÖ😀é", "name") == [])
        #expect(try broken("a", "code") == [.length])
        #expect(try broken("abcde", "code") == [.length])
        #expect(try broken("abcd", "code") == [])
    }

    @Test func rangeMinimumAndMaximumIncludeTheirEnds() throws {
        #expect(try broken(0, "age") == [])
        #expect(try broken(150, "age") == [])
        #expect(try broken(151, "age") == [.range])
        #expect(try broken(-1, "age") == [.range])
        #expect(try broken(0, "level") == [.minimum])
        #expect(try broken(10, "level") == [.maximum])
        #expect(try broken(Int64(5), "level") == [])  // converted as setValue converts
    }

    @Test func patternMatchesTheWholeText() throws {
        #expect(try broken("ann@example", "email") == [])
        #expect(try broken("Ann@example", "email") == [.pattern])
        #expect(try broken("x ann@example", "email") == [.pattern])  // a part matching is not enough
        #expect(try broken("ann@example\n", "email") == [.pattern])
    }

    @Test func aPatternThatBacktracksTooLongFailsInsteadOfStalling() throws {
        let start = ContinuousClock.now
        #expect(try broken(String(repeating: "a", count: 40) + "c", "slow") == [.pattern])
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(try broken("aab", "slow") == [])
    }

    @Test func customSeesTheValueAsDeclared() throws {
        #expect(try broken(3, "seats") == [.custom])
        #expect(try broken(4, "seats") == [])
        #expect(try broken("", "nickname") == [.custom])
        #expect(try broken(nil, "nickname") == [])
        #expect(try broken("Al", "nickname") == [])
    }

    @Test func typeAndKeyProblemsAreTheSetterErrors() throws {
        #expect(throws: ManagedObjectError.self) { try RuledPerson().validateValue("old", forKey: "age") }
        #expect(throws: ManagedObjectError.self) { try RuledPerson().validateValue(1, forKey: "nope") }
        #expect(try broken("anything", "free") == [])
    }

    /// A failure names entity, attribute and what the rule asks, never the value.
    @Test func failuresNameTheRuleNotTheValue() throws {
        let person = RuledPerson()
        do {
            try person.validateValue("secret-value-xyz", forKey: "name")
            Issue.record("a six-letter name passed 1...5")
        } catch let error as ObjectValidationError {
            #expect(error.code == .invalidObjects)
            #expect(ObjectValidationError.Code.invalidObjects ~= error)
            let failure = try #require(error.failures.first)
            #expect(failure.entity == "RuledPerson" && failure.attribute == "name")
            #expect(failure.objectID == person.objectID)
            #expect(failure.requirement == "be 1 to 5 characters long")
            #expect(failure.message.hasSuffix(": RuledPerson.name must be 1 to 5 characters long"))
            #expect(error.message == "1 object is not valid: \(failure.message)")
            for text in [error.description, error.debugDescription, failure.description] {
                #expect(!text.contains("secret-value-xyz"))
            }
        }
    }

    /// A pattern that does not compile is a model problem, found when the model is made.
    @Test func aBadPatternIsRefusedByTheModel() throws {
        do {
            _ = try Model(entities: [BadPattern.self])
            Issue.record("the model took a pattern that does not compile")
        } catch let error as ModelError {
            let problem = try #require(error.problems.first)
            #expect(problem.code == .invalidRule)
            #expect(problem.entity == "BadPattern" && problem.attribute == "text")
        }
        #expect(throws: Never.self) { _ = try Model(entities: [RuledPerson.self]) }
    }
}
