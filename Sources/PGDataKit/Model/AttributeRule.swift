import Foundation

/// A rule an attribute's value must keep for a save to go ahead, declared with the
/// attribute (`@Attribute(validate: […])`), as Core Data's model editor declares minimum,
/// maximum, length, pattern and "optional".
///
/// For example:
///
/// ```swift
/// final class Member: ManagedObject {
///     override class var tableName: String { "members" }
///     @Attribute(unique: true) var memberID: String = ""
///     @Attribute(validate: [.required, .length(1...80)]) var name: String?
///     @Attribute(validate: [.range(0...150)]) var age: Int?
///     @Attribute(validate: [.pattern("[^@ ]+@[^@ ]+")]) var email: String?
///     @Attribute(validate: [.custom("an even number") { $0 % 2 == 0 }]) var seats: Int = 2
/// }
/// ```
///
/// `save()` checks the rules of every inserted and changed object before it sends
/// anything, and throws one `ObjectValidationError` naming every failure. `nil` passes every
/// rule but `required` (and `custom`, which sees the value as declared, `nil` included).
/// Lengths count Unicode scalars, as PostgreSQL's `char_length` does in a UTF-8 database,
/// so `.length(...80)` agrees with a `varchar(80)` column.
public struct AttributeRule<Value: AttributeValue>: Sendable {
    /// How a value is checked.
    enum Test: Sendable {
        /// Fails on `nil`.
        case required
        /// Checks a value that is not `nil` (`nil` passes).
        case scalar(@Sendable (Value.Scalar) -> Bool)
        /// Checks the value as declared, `nil` included.
        case value(@Sendable (Value) -> Bool)
    }

    /// Which kind of rule, as failures name it.
    let rule: ValidationFailure.Rule
    /// What the value must be, completing "must …" (`be at most 150`).
    let requirement: String
    /// The check.
    let test: Test
    /// Why the rule cannot be used (a pattern that does not compile): the model refuses
    /// it (`ModelError.Problem.Code.invalidRule`).
    let problem: String?

    init(_ rule: ValidationFailure.Rule, _ requirement: String, _ test: Test, problem: String? = nil) {
        (self.rule, self.requirement, self.test, self.problem) = (rule, requirement, test, problem)
    }

    /// The value must not be `nil` (Core Data's non-optional attribute, for a Swift
    /// property that is optional because the value arrives later: checked at save).
    public static var required: AttributeRule { AttributeRule(.required, "have a value", .required) }

    /// A named check of the value as declared (`nil` included for an optional
    /// attribute): `isValid` answers whether the value may be saved. The name completes
    /// the failure's message ("must be an even number" for `"an even number"`).
    ///
    /// - Parameters:
    ///   - name: What a valid value is, for messages.
    ///   - isValid: Whether the value passes; it runs on the context's queue and must
    ///     not touch managed objects.
    public static func custom(_ name: String, _ isValid: @escaping @Sendable (Value) -> Bool) -> AttributeRule {
        AttributeRule(.custom, "be \(name)", .value(isValid))
    }

    /// A value that may be saved: every check but `required` on a value that is `nil`
    /// passes; `custom` sees `nil` too.
    func passes(_ stored: StoredValue) -> Bool {
        switch test {
        case .required:
            if case .null = stored { return false }
            return true
        case .scalar(let check):
            guard let scalar = stored.scalar(as: Value.Scalar.self) else { return true }
            return check(scalar)
        case .value(let check):
            guard let value = Value.fromScalar(stored.scalar(as: Value.Scalar.self)) else { return true }
            return check(value)
        }
    }
}

extension AttributeRule where Value.Scalar: Comparable {
    /// The value must be at least `minimum`.
    public static func minimum(_ minimum: Value.Scalar) -> AttributeRule {
        AttributeRule(.minimum, "be at least \(minimum)", .scalar { $0 >= minimum })
    }

    /// The value must be at most `maximum`.
    public static func maximum(_ maximum: Value.Scalar) -> AttributeRule {
        AttributeRule(.maximum, "be at most \(maximum)", .scalar { $0 <= maximum })
    }

    /// The value must lie in `range` (both ends included).
    public static func range(_ range: ClosedRange<Value.Scalar>) -> AttributeRule {
        AttributeRule(
            .range, "be between \(range.lowerBound) and \(range.upperBound)", .scalar { range.contains($0) })
    }
}

extension AttributeRule where Value.Scalar == String {
    /// The text's length, in Unicode scalars, must lie in `range`.
    public static func length(_ range: ClosedRange<Int>) -> AttributeRule {
        let requirement = "be \(range.lowerBound) to \(range.upperBound) characters long"
        return AttributeRule(.length, requirement, .scalar { range.contains($0.unicodeScalars.count) })
    }

    /// The text must be at least `range.lowerBound` Unicode scalars long.
    public static func length(_ range: PartialRangeFrom<Int>) -> AttributeRule {
        AttributeRule(
            .length, "be at least \(range.lowerBound) characters long",
            .scalar { $0.unicodeScalars.count >= range.lowerBound })
    }

    /// The text must be at most `range.upperBound` Unicode scalars long.
    public static func length(_ range: PartialRangeThrough<Int>) -> AttributeRule {
        AttributeRule(
            .length, "be at most \(range.upperBound) characters long",
            .scalar { $0.unicodeScalars.count <= range.upperBound })
    }

    /// The whole text must match the regular expression `pattern` (ICU syntax, as
    /// `NSRegularExpression` reads it; `.` matches a newline). A pattern that does not
    /// compile makes the model refuse the entity (`ModelError`); a match that takes more
    /// than `WholeMatch.steps` steps of the engine (nested repetition backtracking on a
    /// long text) fails the rule rather than stall the save.
    public static func pattern(_ pattern: String) -> AttributeRule {
        let requirement = "match the pattern \(pattern)"
        guard let whole = WholeMatch(pattern) else {
            return AttributeRule(
                .pattern, requirement, .scalar { _ in false },
                problem: "the pattern \(pattern) is not a valid regular expression")
        }
        return AttributeRule(.pattern, requirement, .scalar { whole.matches($0, budget: WholeMatch.Budget()) == true })
    }
}

/// One attribute's rule as the model keeps it: the attribute's type erased, so an
/// `AttributeDescription` holds its rules whatever its type.
struct AttributeCheck: Sendable {
    /// Which kind of rule.
    let rule: ValidationFailure.Rule
    /// What the value must be, completing "must …".
    let requirement: String
    /// Whether a stored value passes.
    let passes: @Sendable (StoredValue) -> Bool
    /// Why the rule cannot be used, or `nil`.
    let problem: String?

    init<Value>(_ rule: AttributeRule<Value>) {
        self.rule = rule.rule
        self.requirement = rule.requirement
        self.passes = { rule.passes($0) }
        self.problem = rule.problem
    }
}

/// A regular expression matched against a whole text, with a bound on the engine's work.
///
/// ICU reports progress about every ten thousand steps of its matcher; after
/// `Budget.steps` such reports the match stops with no answer instead of backtracking
/// for seconds.
struct WholeMatch: @unchecked Sendable {
    // Unchecked: `NSRegularExpression` is immutable once made and documented as safe to
    // use from several threads; it is not marked `Sendable` on Linux.

    /// The pattern anchored (`\A(?:…)\z`), `.` matching newlines.
    let regex: NSRegularExpression

    /// Progress reports one budget allows (roughly a third of a second of matching).
    static let steps = 2_000

    /// Steps left for a match, or for all the matches of one evaluation.
    final class Budget {
        private(set) var remaining = WholeMatch.steps
        /// Takes one step; `false` when none are left.
        func spendStep() -> Bool {
            remaining -= 1
            return remaining > 0
        }
    }

    /// Compiles a pattern to match whole texts, or `nil` when it does not compile (or
    /// its parentheses do not balance on their own, so it could close the anchoring
    /// group and match less than the whole text).
    init?(_ pattern: String) {
        do {
            // On its own first: a pattern that compiles alone has balanced groups. (ICU
            // refuses an empty pattern, which is balanced and fine anchored.)
            if !pattern.isEmpty {
                _ = try NSRegularExpression(pattern: pattern, options: [.dotMatchesLineSeparators])
            }
            regex = try NSRegularExpression(pattern: "\\A(?:" + pattern + ")\\z", options: [.dotMatchesLineSeparators])
        } catch {
            return nil
        }
    }

    /// Whether the whole text matches, spending the budget's steps; `nil` when they ran
    /// out before an answer.
    func matches(_ text: String, budget: Budget) -> Bool? {
        var found = false
        var exhausted = false
        let range = NSRange(text.startIndex..., in: text)
        regex.enumerateMatches(in: text, options: [.reportProgress], range: range) { result, _, stop in
            if result != nil {
                found = true
                stop.pointee = true
            } else if budget.spendStep() == false {
                exhausted = true
                stop.pointee = true
            }
        }
        return exhausted && !found ? nil : found
    }
}
