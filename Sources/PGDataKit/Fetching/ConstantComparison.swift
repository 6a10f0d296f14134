import Foundation

/// Comparisons of two constants (`1 == 1`, `"a" IN {"a", "b"}`, `2 BETWEEN {1, 3}`),
/// answered before any SQL is written or any object is read, as `NSPredicate` evaluates
/// them: RHManagedObject's examples use `1=1` to match everything. Both engines ask
/// `constantResult(_:)` first, so SQL (`TRUE`/`FALSE`) and memory agree.
extension ComparisonPlanner {
    /// `true` or `false` for a comparison of constants; `nil` when either side reads
    /// the object (or is a variable still to substitute).
    ///
    /// Follows the evaluator's rules: `nil == nil` holds, `nil` is unequal to anything
    /// else and orders with nothing; numbers compare across types (`YES` is 1);
    /// values of types that cannot be compared are unequal and unordered; string
    /// operators need two strings; `[c]`/`[d]` apply to strings.
    ///
    /// - Throws: `FetchPredicateError` for what `plan(_:)` refuses in constants (NUL,
    ///   NaN), a list that is not after `IN`/`BETWEEN`, or a `MATCHES` pattern that is
    ///   not valid.
    func constantResult(_ comparison: FetchPredicate.Comparison) throws -> Bool? {
        guard comparison.quantifier == nil, let left = Self.constant(comparison.left),
            Self.isConstant(comparison.right)
        else { return nil }
        try checkConstants(comparison)
        let options = comparison.options
        switch comparison.operator {
        case .in:
            switch comparison.right {
            case .list(let items):
                for item in items {
                    let value = Self.constant(item)
                    if Self.equal(left, value ?? nil, options) { return true }
                }
                return false
            case .value(.string(let text)):
                // `"Ada" IN "Ada Lovelace"`: a substring test, as in NSPredicate.
                guard let part = left as? String else { return false }
                return ValueComparison.contains(ValueComparison.fold(text, options), ValueComparison.fold(part, options))
            default:
                return Self.equal(left, Self.constant(comparison.right) ?? nil, options)
            }
        case .between:
            guard case .list(let bounds) = comparison.right, bounds.count == 2 else {
                throw FetchPredicateError(message: "BETWEEN needs {low, high}", format: format)
            }
            guard let value = left, let low = Self.constant(bounds[0]) ?? nil, let high = Self.constant(bounds[1]) ?? nil,
                let lower = Self.order(value, low, options), let upper = Self.order(value, high, options)
            else { return false }
            return lower >= 0 && upper <= 0
        default:
            break
        }
        if case .list = comparison.right {
            throw FetchPredicateError(message: "a list is allowed only after IN or BETWEEN", format: format)
        }
        let right = Self.constant(comparison.right) ?? nil
        switch comparison.operator {
        case .equal: return Self.equal(left, right, options)
        case .notEqual: return !Self.equal(left, right, options)
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard let left, let right, let order = Self.order(left, right, options) else { return false }
            return ValueComparison.holds(comparison.operator, order: order)
        case .contains, .beginsWith, .endsWith, .like, .matches:
            guard let text = left as? String, let other = right as? String else { return false }
            do {
                return try ValueComparison.matches(comparison.operator, text, other, options, budget: MatchesBudget())
            } catch var error {
                error.format = format
                throw error
            }
        case .in, .between:
            return false  // answered above
        }
    }

    /// Whether an expression is a constant or a list of constants.
    private static func isConstant(_ expression: FetchPredicate.Expression) -> Bool {
        switch expression {
        case .value: return true
        case .list(let items): return items.allSatisfy { if case .value = $0 { return true } else { return false } }
        case .keyPath, .variable, .count, .aggregate, .subquery: return false
        }
    }

    /// The Swift value of a constant (`.some(nil)` for `nil`); `nil` for anything else.
    private static func constant(_ expression: FetchPredicate.Expression) -> (any Sendable)?? {
        guard case .value(let value) = expression else { return nil }
        switch value {
        case .null: return .some(nil)
        case .string(let text): return text
        case .integer(let number): return number
        case .double(let number): return number
        case .decimal(let number): return number
        case .bool(let flag): return flag
        case .date(let date): return date
        case .uuid(let uuid): return uuid
        case .data(let data): return data
        case .object(let id): return id
        }
    }

    /// Orders two non-`nil` constants; a Boolean beside a number counts as 0 or 1
    /// (`YES == 1`, as `NSNumber` compares them).
    private static func order(_ left: any Sendable, _ right: any Sendable, _ options: FetchPredicate.StringOptions) -> Int? {
        switch (left, right) {
        case (let a as ObjectID, let b as ObjectID): return a == b ? 0 : nil
        case (let a as Bool, let b as Bool): return ValueComparison.compare(a, b)
        case (let a as Bool, _): return ValueComparison.compare(Int64(a ? 1 : 0), right, options: options)
        case (_, let b as Bool): return ValueComparison.compare(left, Int64(b ? 1 : 0), options: options)
        default: return ValueComparison.compare(left, right, options: options)
        }
    }

    /// `==` of two constants: two `nil`s are equal, `nil` equals nothing else.
    private static func equal(_ left: (any Sendable)?, _ right: (any Sendable)?, _ options: FetchPredicate.StringOptions) -> Bool {
        switch (left, right) {
        case (nil, nil): return true
        case (nil, _), (_, nil): return false
        case (let l?, let r?): return order(l, r, options) == 0
        }
    }
}
