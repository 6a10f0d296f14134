import Foundation

/// The checks of a comparison's constants that hold in SQL and in memory alike.
extension ComparisonPlanner {
    /// Strings, NaN and variables that no engine can compare: a string with NUL (which
    /// PostgreSQL text cannot hold) is an error rather than a server error, NaN is an
    /// error rather than PostgreSQL's NaN-is-largest order.
    func checkConstants(_ comparison: FetchPredicate.Comparison) throws {
        // On the right of these a string with NUL simply matches no stored string (as
        // `NSPredicate` answers); elsewhere (an order, a pattern, a substring of it) it
        // is an error.
        let nulMatchesNothing = Self.nulMatchesNothing(comparison)
        let symmetric = comparison.operator == .equal || comparison.operator == .notEqual
        var pending = [(comparison.left, symmetric), (comparison.right, nulMatchesNothing)]
        while let (expression, nulAllowed) = pending.popLast() {
            if case .list(let items) = expression {
                // Each item in place; only lists within lists wait (no copy of a long list).
                for item in items {
                    if case .list = item {
                        pending.append((item, nulAllowed))
                    } else {
                        try checkConstant(item, nulAllowed, comparison)
                    }
                }
            } else {
                try checkConstant(expression, nulAllowed, comparison)
            }
        }
    }

    /// `checkConstants` for one expression that is not a list.
    func checkConstant(
        _ expression: FetchPredicate.Expression, _ nulAllowed: Bool, _ comparison: FetchPredicate.Comparison
    ) throws {
        switch expression {
        case .value(.string(let text)) where !nulAllowed && Self.holdsNUL(text):
            throw error("a string in a predicate cannot contain NUL (U+0000) here: PostgreSQL text cannot "
                        + "hold it", Self.keyPath(of: comparison))
        case .value(.double(let number)) where number.isNaN:
            throw error("NaN cannot be compared", Self.keyPath(of: comparison))
        case .value(.decimal(let number)) where number.isNaN:
            throw error("NaN cannot be compared", Self.keyPath(of: comparison))
        default: break
        }
    }

    /// Whether a string holds NUL (U+0000). (`memchr` over contiguous UTF-8: an `IN`
    /// list checks every element, and the generic `contains` costs several times more.)
    static func holdsNUL(_ text: String) -> Bool {
        let found = text.utf8.withContiguousStorageIfAvailable { bytes in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, 0, bytes.count) != nil
        }
        return found ?? text.utf8.contains(0)
    }

    /// Whether an operator compares text with text (its constant must be a string).
    static func comparesText(_ op: FetchPredicate.Operator) -> Bool {
        switch op {
        case .contains, .beginsWith, .endsWith, .like, .matches: return true
        case .equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual, .between, .in: return false
        }
    }

    /// Whether a string constant with NUL on the right of the comparison just matches
    /// nothing: `==`, `!=`, `CONTAINS`, `BEGINSWITH`, `ENDSWITH`, `LIKE` and `IN` a list.
    static func nulMatchesNothing(_ comparison: FetchPredicate.Comparison) -> Bool {
        switch comparison.operator {
        case .equal, .notEqual, .contains, .beginsWith, .endsWith, .like: return true
        case .in: if case .list = comparison.right { return true } else { return false }
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual, .between, .matches: return false
        }
    }

    /// The key path a comparison's messages point at.
    static func keyPath(of comparison: FetchPredicate.Comparison) -> FetchPredicate.KeyPath? {
        for expression in [comparison.left, comparison.right] {
            switch expression {
            case .keyPath(let path), .count(let path), .aggregate(_, let path, _): return path
            case .subquery(let subquery): return subquery.collection
            default: continue
            }
        }
        return nil
    }
}
