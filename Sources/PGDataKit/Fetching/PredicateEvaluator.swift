import Foundation

/// Evaluates predicates against objects in memory with the same answers as the SQL the
/// compiler emits (two-valued comparisons, scalar string order, the same folding).
struct PredicateEvaluator {
    let model: Model
    /// The regular-expression work this evaluator (one fetch) may still do.
    let matchesBudget = MatchesBudget()

    /// Whether the object matches; a predicate nested deeper than
    /// `FetchPredicate.maximumDepth` throws before anything is evaluated.
    func evaluate(_ predicate: FetchPredicate, on object: ManagedObject) throws -> Bool {
        try predicate.checkDepth()
        return try evaluateNode(predicate, on: object)
    }

    /// Recurses only where the operator changes (nested ANDs and ORs are flattened), so
    /// the depth check bounds the recursion.
    private func evaluateNode(_ predicate: FetchPredicate, on object: ManagedObject) throws -> Bool {
        switch predicate.kind {
        case .constant(let value): return value
        case .not(let inner): return !(try evaluateNode(inner, on: object))
        case .and(let parts):
            for part in FetchPredicate.flattened(parts, and: true) where !(try evaluateNode(part, on: object)) {
                return false
            }
            return true
        case .or(let parts):
            for part in FetchPredicate.flattened(parts, and: false) where try evaluateNode(part, on: object) {
                return true
            }
            return false
        case .comparison(let comparison):
            return try evaluate(comparison, on: object)
        }
    }

    private func evaluate(_ original: FetchPredicate.Comparison, on object: ManagedObject) throws -> Bool {
        let entity = object.entity
        let comparison = try original.keyPathFirst()
        switch comparison.left {
        case .count(let path):
            let resolved = try model.resolve(path, from: entity, counting: true)
            let count = values(of: resolved, from: object, hopsFrom: 0).count
            return try compare(.some(count), type: .int64, attribute: nil, comparison, object: object)
        case .keyPath(let path):
            let resolved = try model.resolve(path, from: entity)
            if let toMany = resolved.toManyIndex {
                let owners = walk(resolved.hops[..<toMany], from: object)
                let members = owners.flatMap { $0.relatedObjects(at: resolved.hops[toMany].relationship.index) }
                    .filter { !$0.isDeleted }
                let remaining = ResolvedKeyPath(hops: Array(resolved.hops[(toMany + 1)...]), end: resolved.end, path: resolved.path)
                let matches = try members.map { member -> Bool in
                    try compareResolved(Self.reach(remaining, from: member), remaining, comparison, object: member)
                }
                switch comparison.quantifier ?? .any {
                case .any: return matches.contains(true)
                case .all: return !matches.contains(false)
                case .noneOf: return !matches.contains(true)
                }
            }
            guard comparison.quantifier == nil else {
                throw FetchPredicateError(message: "\(comparison.quantifier?.rawValue ?? "") needs a key path through a to-many relationship", position: path.position)
            }
            return try compareResolved(Self.reach(resolved, from: object), resolved, comparison, object: object)
        default:
            throw FetchPredicateError(message: "the left side of \(comparison.operator.rawValue) must be a key path")
        }
    }

    private func walk(_ hops: ArraySlice<ResolvedKeyPath.Hop>, from object: ManagedObject) -> [ManagedObject] {
        var current: [ManagedObject] = [object]
        for hop in hops {
            current = current.flatMap { $0.relatedObjects(at: hop.relationship.index) }
        }
        return current
    }

    private func values(of resolved: ResolvedKeyPath, from object: ManagedObject, hopsFrom start: Int) -> [ManagedObject] {
        walk(resolved.hops[start...], from: object).filter { !$0.isDeleted }
    }

    /// What a key path without to-many hops reaches: the related object (for `.toOne`)
    /// or a stored scalar (`nil` for `NULL` or a missing hop).
    static func reach(_ resolved: ResolvedKeyPath, from object: ManagedObject) -> (object: ManagedObject?, scalar: StoredValue) {
        var current: ManagedObject? = object
        for hop in resolved.hops {
            current = current?.relatedObjects(at: hop.relationship.index).first
        }
        guard let current else { return (nil, nil) }
        switch resolved.end {
        case .attribute(let attribute):
            current.prepareStorage()
            return (nil, current.values[attribute.index])
        case .toOne(let relationship):
            return (current.relatedObjects(at: relationship.index).first, nil)
        case .count:
            return (nil, nil)
        }
    }

    private func compareResolved(
        _ value: (object: ManagedObject?, scalar: StoredValue), _ resolved: ResolvedKeyPath,
        _ comparison: FetchPredicate.Comparison, object: ManagedObject
    ) throws -> Bool {
        switch resolved.end {
        case .toOne(let relationship):
            return try compareReference(value.object, relationship: relationship, comparison)
        case .attribute(let attribute):
            return try compare(value.scalar, type: attribute.type, attribute: attribute, comparison, object: object)
        case .count:
            let count = values(of: resolved, from: object, hopsFrom: 0).count
            return try compare(.some(count), type: .int64, attribute: nil, comparison, object: object)
        }
    }

    private func compareReference(
        _ target: ManagedObject?, relationship: RelationshipDescription, _ comparison: FetchPredicate.Comparison
    ) throws -> Bool {
        func matches(_ expression: FetchPredicate.Expression) throws -> Bool {
            switch expression {
            case .value(.null): return target == nil
            case .value(.object(let id)): return target?.objectID == id
            case .value(.integer(let key)): return target?.objectID.primaryKey == key
            default: throw FetchPredicateError(message: "\(relationship.name) is a relationship: compare it with an object or nil")
            }
        }
        switch comparison.operator {
        case .equal: return try matches(comparison.right)
        case .notEqual: return !(try matches(comparison.right))
        case .in:
            guard case .list(let items) = comparison.right else { throw FetchPredicateError(message: "IN needs a list") }
            return try items.contains { try matches($0) }
        default:
            throw FetchPredicateError(message: "\(comparison.operator.rawValue) cannot compare the relationship \(relationship.name)")
        }
    }

    /// The right side's value: a constant converted to the type, or another key path's
    /// value on the same object.
    private func rightValue(
        _ expression: FetchPredicate.Expression, type: AttributeType, object: ManagedObject
    ) throws -> (value: (any Sendable)?, isConstantNull: Bool) {
        switch expression {
        case .value(.null): return (nil, true)
        case .value(let value):
            guard let converted = PredicateValues.convert(value, to: type) else {
                throw FetchPredicateError(message: "cannot compare \(type.rawValue) with \(PredicateValues.describe(value))")
            }
            return (converted, false)
        case .keyPath(let path):
            let resolved = try model.resolve(path, from: object.entity)
            return (Self.reach(resolved, from: object).scalar, false)
        case .count(let path):
            let resolved = try model.resolve(path, from: object.entity, counting: true)
            return (values(of: resolved, from: object, hopsFrom: 0).count, false)
        case .variable(let name):
            throw FetchPredicateError(message: "variable $\(name) has no value: call substituting(_:) first")
        case .list:
            throw FetchPredicateError(message: "a list is allowed only after IN or BETWEEN")
        }
    }

    private func compare(
        _ left: (any Sendable)?, type: AttributeType, attribute: AttributeDescription?,
        _ comparison: FetchPredicate.Comparison, object: ManagedObject
    ) throws -> Bool {
        let options = comparison.options
        if !options.isEmpty && type != .string { throw FetchPredicateError(message: "[c] and [d] apply to strings only") }
        func equal(_ a: (any Sendable)?, _ b: (any Sendable)?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            return ValueComparison.compare(a, b, options: options) == 0
        }
        let isKeyPathRight = comparison.right.isKeyPath
        switch comparison.operator {
        case .equal, .notEqual:
            let (right, isNull) = try rightValue(comparison.right, type: type, object: object)
            let negate = comparison.operator == .notEqual
            if isNull { return negate ? left != nil : left == nil }
            if isKeyPathRight { return negate ? !equal(left, right) : equal(left, right) }
            guard let left else { return negate }
            let same = equal(left, right)
            return negate ? !same : same
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            let (right, _) = try rightValue(comparison.right, type: type, object: object)
            guard let left, let right, let order = ValueComparison.compare(left, right) else { return false }
            switch comparison.operator {
            case .lessThan: return order < 0
            case .lessThanOrEqual: return order <= 0
            case .greaterThan: return order > 0
            default: return order >= 0
            }
        case .between:
            guard case .list(let bounds) = comparison.right, bounds.count == 2 else {
                throw FetchPredicateError(message: "BETWEEN needs {low, high}")
            }
            let (low, _) = try rightValue(bounds[0], type: type, object: object)
            let (high, _) = try rightValue(bounds[1], type: type, object: object)
            guard let left, let low, let high, let lower = ValueComparison.compare(left, low),
                let upper = ValueComparison.compare(left, high)
            else { return false }
            return lower >= 0 && upper <= 0
        case .in:
            guard case .list(let items) = comparison.right else { throw FetchPredicateError(message: "IN needs a list") }
            for item in items {
                let (right, isNull) = try rightValue(item, type: type, object: object)
                if isNull { if left == nil { return true } else { continue } }
                if let left, equal(left, right) { return true }
            }
            return false
        case .contains, .beginsWith, .endsWith, .like, .matches:
            guard type == .string else { throw FetchPredicateError(message: "\(comparison.operator.rawValue) applies to strings only") }
            guard case .value(let value) = comparison.right else {
                throw FetchPredicateError(message: "\(comparison.operator.rawValue) needs a string value on the right")
            }
            guard case .string(let pattern) = value else {
                if value == .null { return false }
                throw FetchPredicateError(message: "\(comparison.operator.rawValue) needs a string")
            }
            guard let text = left as? String else { return false }
            let l = ValueComparison.fold(text, options)
            let r = ValueComparison.fold(pattern, options)
            switch comparison.operator {
            case .contains: return ValueComparison.contains(l, r)
            case .beginsWith: return l.starts(with: r)
            case .endsWith: return l.count >= r.count && Array(l.suffix(r.count)) == r
            case .like: return ValueComparison.like(l, r)
            default:
                let folded = String(String.UnicodeScalarView(l))
                return try matchesBudget.pattern(pattern).matches(folded, budget: matchesBudget)
            }
        }
    }
}
