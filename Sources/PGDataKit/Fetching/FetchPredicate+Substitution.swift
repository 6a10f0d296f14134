import Foundation

extension FetchPredicate {
    /// Replaces every `$NAME` variable with a value, converted as a `%@` argument is.
    ///
    /// For example:
    ///
    /// ```swift
    /// let template = try FetchPredicate(format: "age > $MIN AND name IN $NAMES")
    /// let predicate = try template.substituting(["MIN": 18, "NAMES": ["Ada", "Alan"]])
    /// ```
    ///
    /// - Parameter variables: Values by variable name (without `$`); `nil` means `nil`.
    /// - Returns: The predicate without variables.
    /// - Throws: `FetchPredicateError` when a variable has no value or a value cannot be used
    ///   where the variable stands (an array after `==`, a single value after `IN`), or
    ///   when the predicate nests deeper than `maximumDepth`.
    public func substituting(_ variables: [String: Any?]) throws -> FetchPredicate {
        try checkDepth()
        return try substitutingUnchecked(variables)
    }

    /// `substituting(_:)` without the depth check (done once, for subqueries too).
    fileprivate func substitutingUnchecked(_ variables: [String: Any?]) throws(FetchPredicateError) -> FetchPredicate {
        try mapComparisons { comparison throws(FetchPredicateError) in
            var comparison = comparison
            comparison.left = try comparison.left.substituting(variables)
            comparison.right = try comparison.right.substituting(variables)
            do throws(FetchPredicateError) {
                return try comparison.checked(leftPosition: nil, rightPosition: nil)
            } catch {
                // A variable's value stands where it cannot (an array after `==`).
                throw FetchPredicateError(code: .invalidArgument, message: error.message)
            }
        }
    }
}

extension FetchPredicate.Expression {
    fileprivate func substituting(_ variables: [String: Any?]) throws(FetchPredicateError) -> Self {
        switch self {
        case .keyPath, .value, .count, .aggregate: return self
        case .subquery(var subquery):
            // Bounded: `substituting(_:)` checked the depth, subqueries included.
            subquery.predicate = try subquery.predicate.substitutingUnchecked(variables)
            return .subquery(subquery)
        case .list(let elements):
            return .list(try elements.map { element throws(FetchPredicateError) in
                // Checked before substituting, so lists nested in code never recurse.
                if case .list = element {
                    throw FetchPredicateError(code: .invalidArgument, message: "nested lists are not supported")
                }
                let substituted = try element.substituting(variables)
                if case .list = substituted {
                    throw FetchPredicateError(code: .invalidArgument, message: "nested lists are not supported")
                }
                return substituted
            })
        case .variable(let name):
            guard let value = variables[name] else {
                throw FetchPredicateError(code: .invalidArgument, message: "no value for variable $\(name)")
            }
            do {
                return try Self(argument: value)
            } catch {
                throw FetchPredicateError(code: .invalidArgument, message: "variable $\(name): \(error.message)")
            }
        }
    }
}

extension FetchPredicate.Comparison {
    /// Moves a list on the left of `CONTAINS` to the right of `IN`, and checks that lists
    /// stand only where a list belongs.
    func checked(
        leftPosition: Int?, rightPosition: Int?
    ) throws(FetchPredicateError) -> Self {
        if case .list = left {
            guard self.operator == .contains, quantifier == nil else {
                throw FetchPredicateError(
                    message: "a list can only stand on the left of CONTAINS",
                    position: leftPosition)
            }
            return try Self(right, .in, left, options: options)
                .checked(leftPosition: rightPosition, rightPosition: leftPosition)
        }
        switch (self.operator, right) {
        case (.in, .keyPath), (.in, .value(.string)):
            // A collection on the right (`%@ IN posts`) or a string (a substring test).
            return self
        case (.between, .list(let bounds)) where bounds.count != 2:
            throw FetchPredicateError(
                message: "BETWEEN needs a list of two values {low, high}, found \(bounds.count)",
                position: rightPosition)
        case (.between, .list), (.between, .variable), (.in, .list), (.in, .variable):
            return self
        case (.between, _), (.in, _):
            throw FetchPredicateError(
                message: "expected a list {…} or an array argument after "
                    + self.operator.rawValue,
                position: rightPosition)
        case (_, .list):
            throw FetchPredicateError(
                message: "a list is only allowed after IN or BETWEEN, not after "
                    + self.operator.rawValue,
                position: rightPosition)
        default:
            return self
        }
    }
}
