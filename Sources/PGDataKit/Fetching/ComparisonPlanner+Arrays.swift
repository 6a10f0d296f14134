import Foundation

/// Comparisons over array attributes: each element with `ANY`/`ALL`/`NONE`, `IN` and
/// `CONTAINS`, and the whole array with `==`/`!=` only.
extension ComparisonPlanner {
    /// The array attribute a key path reaches through to-one relationships (an
    /// `.attribute` key), or `nil` when it reaches something else.
    func arrayAttribute(_ path: FetchPredicate.KeyPath) -> PlannedKey? {
        guard let resolved = try? resolve(path), resolved.toManyIndex == nil, let attribute = resolved.attribute,
            attribute.type.isArray
        else { return nil }
        return .attribute(resolved, attribute)
    }

    /// A comparison over the elements of an array attribute (`array`, an `.attribute`
    /// key): each element compared with `right` as a value of the element type would be.
    func elementPlan(
        _ array: PlannedKey, _ quantifier: FetchPredicate.Quantifier, _ op: FetchPredicate.Operator,
        _ right: FetchPredicate.Expression, _ options: FetchPredicate.StringOptions, _ path: FetchPredicate.KeyPath?
    ) throws -> ComparisonPlan {
        guard case .attribute(let resolved, let attribute) = array else { throw error("expected an array attribute", path) }
        let element = PlannedKey.element(resolved, attribute)
        var plan: ComparisonPlan
        if op == .in, right.isKeyPath || right.isString {
            // `ANY tags IN name`: each element is a substring of the name.
            plan = try combine(try rawSide(right), .contains, .key(element, onMember: true), options, path)
        } else {
            plan = try combine(.key(element, onMember: true), op, try rawSide(right), options, path)
        }
        plan.elements = ComparisonPlan.Elements(quantifier: quantifier, array: array)
        return plan
    }

    /// A comparison of a whole array attribute: `==` and `!=` with `nil`, with another
    /// attribute of its type, or with a list of constants of the element type (in a
    /// predicate built in code: format strings refuse a list after `==`), elements in
    /// order; nothing else (arrays have no order, and their elements are compared with
    /// `ANY`, `ALL`, `NONE`, `IN` and `@count`).
    func arrayComparison(
        _ left: RawSide, _ op: FetchPredicate.Operator, _ right: RawSide, type: AttributeType, subject: PlannedKey,
        _ path: FetchPredicate.KeyPath?
    ) throws -> ComparisonPlan {
        guard op == .equal || op == .notEqual else {
            throw error("\(op.rawValue) cannot compare the array \(describe(subject)); compare its elements with "
                        + "ANY, ALL or NONE (ANY \(path?.description ?? "key") \(op.rawValue) …), or its count with .@count",
                        path)
        }
        func planned(_ raw: RawSide) throws -> PlannedSide {
            switch raw {
            case .key(let key, let onMember):
                guard key.type == .value(type) else {
                    throw error("cannot compare \(describe(subject)) with \(describe(key))", path)
                }
                return .key(key, onMember: onMember)
            case .value(.null): return .constant(nil)
            case .value(let value):
                throw error("cannot compare the array \(describe(subject)) with \(PredicateValues.describe(value)); "
                            + "to test for an element use ANY, IN or CONTAINS", path)
            case .list(let items):
                guard let array = PredicateValues.array(items, of: type) else {
                    throw error("cannot compare \(describe(subject)) with this list: its items must be constants "
                                + "of the element type", path)
                }
                return .constant(array)
            }
        }
        return ComparisonPlan(
            quantified: nil, left: try planned(left), operator: op, right: try planned(right), options: [], type: .value(type))
    }
}
