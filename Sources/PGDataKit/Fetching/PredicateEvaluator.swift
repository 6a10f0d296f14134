import Foundation

/// Evaluates predicates against objects in memory with the same answers as the SQL the
/// compiler emits: the same plans (`ComparisonPlanner`), two-valued comparisons,
/// scalar string order, the same folding, numbers compared as PostgreSQL compares them.
struct PredicateEvaluator {
    let model: Model
    /// The regular-expression work this evaluator (one fetch) may still do.
    let matchesBudget = MatchesBudget()
    /// Each comparison is planned once per entity, however many objects are evaluated.
    private let plans = PlanCache()

    init(model: Model) {
        self.model = model
    }

    /// Whether the object matches; a predicate nested deeper than
    /// `FetchPredicate.maximumDepth` throws before anything is evaluated.
    func evaluate(_ predicate: FetchPredicate, on object: ManagedObject) throws -> Bool {
        try predicate.checkDepth()
        return try evaluateNode(predicate, on: object)
    }

    /// Recurses only where the operator changes (nested ANDs and ORs are flattened) and
    /// into subqueries, so the depth check bounds the recursion.
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
            switch try plans.plan(for: predicate, comparison, entity: object.entity, model: model) {
            case .constant(let value): return value
            case .plan(let plan): return try evaluate(plan, on: object)
            }
        }
    }

    private func evaluate(_ plan: ComparisonPlan, on object: ManagedObject) throws -> Bool {
        if let elements = plan.elements { return try evaluate(plan, elements, on: object) }
        guard let quantified = plan.quantified else { return try compare(plan, object: object, member: object) }
        let members = Self.members(quantified.members, from: object)
        switch quantified.quantifier {
        case .any:
            for member in members where try compare(plan, object: object, member: member) { return true }
            return false
        case .all:
            for member in members where !(try compare(plan, object: object, member: member)) { return false }
            return true
        case .noneOf:
            for member in members where try compare(plan, object: object, member: member) { return false }
            return true
        }
    }

    /// A comparison over an array's elements, each compared in turn (a `nil` array has
    /// none).
    private func evaluate(_ plan: ComparisonPlan, _ elements: ComparisonPlan.Elements, on object: ManagedObject) throws -> Bool {
        let array = (try value(of: elements.array, from: object) as? any StoredArray)?.anyElements ?? []
        switch elements.quantifier {
        case .any:
            for element in array where try compare(plan, object: object, member: object, element: element) { return true }
            return false
        case .all:
            for element in array where !(try compare(plan, object: object, member: object, element: element)) { return false }
            return true
        case .noneOf:
            for element in array where try compare(plan, object: object, member: object, element: element) { return false }
            return true
        }
    }

    // MARK: - Reading

    /// The objects a path reaches whose last hop is to-many (deleted ones left out).
    static func members(_ members: ResolvedKeyPath, from object: ManagedObject) -> [ManagedObject] {
        var current: [ManagedObject] = [object]
        for hop in members.hops {
            current = current.flatMap { $0.relatedObjects(at: hop.relationship.index) }
        }
        return current.filter { !$0.isDeleted }
    }

    /// What a key path without to-many hops reaches: the related object (for `.toOne`)
    /// or a stored scalar (`nil` for `NULL` or a missing hop).
    static func reach(_ resolved: ResolvedKeyPath, from object: ManagedObject) -> (object: ManagedObject?, scalar: (any Sendable)?) {
        var current: ManagedObject? = object
        for hop in resolved.hops {
            current = current?.relatedObjects(at: hop.relationship.index).first
        }
        guard let current else { return (nil, nil) }
        switch resolved.end {
        case .attribute(let attribute):
            current.prepareStorage()
            return (nil, current.storage.value(at: attribute.index).anyValue)
        case .toOne(let relationship):
            return (current.relatedObjects(at: relationship.index).first, nil)
        case .object:
            return (current, nil)
        case .count:
            return (nil, nil)
        }
    }

    /// What a key reads from an object.
    private func value(of key: PlannedKey, from object: ManagedObject) throws -> (any Sendable)? {
        switch key {
        case .attribute(let resolved, _):
            return Self.reach(resolved, from: object).scalar
        case .object(let resolved, _):
            var current: ManagedObject? = object
            for hop in resolved.hops {
                current = current?.relatedObjects(at: hop.relationship.index).first
            }
            guard let current else { return nil }
            guard case .toOne(let relationship) = resolved.end else { return ObjectReference(current) }
            // The foreign key as it stands, without loading the related object.
            current.prepareStorage()
            switch current.storage.toOne[relationship.index] {
            case .none: return nil
            case .key(let key): return ObjectReference(key: key)
            case .object(let target): return ObjectReference(target)
            }
        case .count(let resolved):
            return Self.members(resolved, from: object).count
        case .aggregate(let function, let members, let path, let attribute):
            let values = Self.members(members, from: object).compactMap { Self.reach(path, from: $0).scalar }
            return Self.aggregate(function, of: values, floating: PlannedType.value(attribute.type).isFloatingPoint)
        case .element:
            throw FetchPredicateError(message: "an array's element is read only in a comparison over its elements")
        case .arrayCount(let resolved, _):
            return (Self.reach(resolved, from: object).scalar as? any StoredArray)?.elementCount ?? 0
        case .subquery(let members, _, let predicate):
            var count = 0
            for member in Self.members(members, from: object) where try evaluateNode(predicate, on: member) {
                count += 1
            }
            return count
        }
    }

    /// `@min`, `@max`, `@sum` (0 for none) or `@avg` (`nil` for none) of non-`nil`
    /// values, computed as the SQL computes them: integers and decimals add exactly and
    /// are rounded once to `Double` for `@avg`; floating-point values add as `Double`.
    static func aggregate(
        _ function: FetchPredicate.CollectionOperator, of values: [any Sendable], floating: Bool
    ) -> (any Sendable)? {
        switch function {
        case .min, .max:
            var best: (any Sendable)?
            for value in values {
                guard let current = best else {
                    best = value
                    continue
                }
                if let order = ValueComparison.compare(value, current), function == .min ? order < 0 : order > 0 {
                    best = value
                }
            }
            return best
        case .sum, .average:
            if floating {
                let total = values.reduce(0.0) { $0 + (ValueComparison.double(of: $1) ?? 0) }
                if function == .sum { return total }
                return values.isEmpty ? nil : total / Double(values.count)
            }
            let total = values.reduce(Decimal(0)) { $0 + (ValueComparison.number($1) ?? 0) }
            if function == .sum { return total }
            guard !values.isEmpty, let rounded = ValueComparison.double(of: total) else { return nil }
            return rounded / Double(values.count)
        }
    }

    // MARK: - Comparing

    private func read(
        _ side: PlannedSide, object: ManagedObject, member: ManagedObject, element: (any Sendable)?
    ) throws -> (any Sendable)? {
        switch side {
        case .key(.element, _): return element
        case .key(let key, let onMember): return try value(of: key, from: onMember ? member : object)
        case .constant(let constant): return constant
        case .list, .bounds: throw FetchPredicateError(message: "a list is allowed only after IN or BETWEEN")
        }
    }

    /// Whether two non-`nil` values are equal (objects by identity or primary key).
    private static func equal(_ a: any Sendable, _ b: any Sendable, _ options: FetchPredicate.StringOptions) -> Bool {
        switch (a, b) {
        case (let x as ObjectReference, let y as ObjectReference): return x.isSame(as: y)
        case (let x as ObjectReference, let key as Int64), (let key as Int64, let x as ObjectReference): return x.key == key
        default: return ValueComparison.compare(a, b, options: options) == 0
        }
    }

    /// Whether the comparison holds for `object` (`member`: the related object of a
    /// quantified comparison; `element`: the array element of a comparison over an
    /// array's elements).
    private func compare(
        _ plan: ComparisonPlan, object: ManagedObject, member: ManagedObject, element: (any Sendable)? = nil
    ) throws -> Bool {
        if let fixed = plan.fixed { return fixed }
        let options = plan.options
        let left = try read(plan.left, object: object, member: member, element: element)
        switch plan.operator {
        case .in:
            guard case .list(let items) = plan.right else { throw FetchPredicateError(message: "IN needs a list") }
            for item in items {
                guard let item else {
                    if left == nil { return true }
                    continue
                }
                if let left, Self.equal(left, item, options) { return true }
            }
            return false
        case .between:
            guard case .bounds(let lowSide, let highSide) = plan.right else {
                throw FetchPredicateError(message: "BETWEEN needs {low, high}")
            }
            let low = try read(lowSide, object: object, member: member, element: element)
            let high = try read(highSide, object: object, member: member, element: element)
            guard let left, let low, let high, let lower = ValueComparison.compare(left, low, options: options),
                let upper = ValueComparison.compare(left, high, options: options)
            else { return false }
            return lower >= 0 && upper <= 0
        default:
            break
        }
        let right = try read(plan.right, object: object, member: member, element: element)
        switch plan.operator {
        case .equal, .notEqual:
            let negate = plan.operator == .notEqual
            let same: Bool
            switch (left, right) {
            case (nil, nil):
                // `key == nil`, or two keys both nil (`IS NOT DISTINCT FROM`).
                same = true
            case (nil, _), (_, nil):
                // Unequal, so `!=` holds (SQL's `<> … OR … IS NULL`, `IS DISTINCT FROM`).
                same = false
            case (let l?, let r?):
                same = Self.equal(l, r, options)
            }
            return negate ? !same : same
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard let left, let right, let order = ValueComparison.compare(left, right, options: options) else { return false }
            return ValueComparison.holds(plan.operator, order: order)
        case .contains, .beginsWith, .endsWith, .like, .matches:
            guard let text = left as? String, let other = right as? String else { return false }
            return try ValueComparison.matches(plan.operator, text, other, options, budget: matchesBudget)
        case .in, .between:
            throw FetchPredicateError(message: "\(plan.operator.rawValue) needs a list")
        }
    }
}

/// An object a predicate reads (a to-one relationship's target, `SELF`, a related
/// object): the object if it is loaded, and its primary key if it is saved.
struct ObjectReference: @unchecked Sendable {
    // Sendable: made and compared within one evaluation, on the context's queue.
    let object: ManagedObject?
    let key: Int64?

    init(_ object: ManagedObject) {
        self.object = object
        key = object.objectID.primaryKey
    }

    init(key: Int64) {
        object = nil
        self.key = key
    }

    /// The same object: identical, or the same saved row.
    func isSame(as other: ObjectReference) -> Bool {
        if let a = object, let b = other.object { return a === b }
        return key != nil && key == other.key
    }
}

/// Comparison plans by predicate node and entity, for one evaluator.
final class PlanCache {
    private struct Key: Hashable {
        let node: ObjectIdentifier
        let entity: String
    }

    /// A comparison's answer for every object (two constants), or its plan.
    enum Entry {
        case constant(Bool)
        case plan(ComparisonPlan)
    }

    // The node is kept so that its identifier cannot be reused while cached.
    private var plans: [Key: (node: PredicateNode, entry: Entry)] = [:]

    /// The plan of `comparison` (held by `predicate`) on `entity`, made on first use.
    func plan(
        for predicate: FetchPredicate, _ comparison: FetchPredicate.Comparison, entity: EntityDescription, model: Model
    ) throws -> Entry {
        let key = Key(node: ObjectIdentifier(predicate.node), entity: entity.name)
        if let cached = plans[key] { return cached.entry }
        let planner = ComparisonPlanner(model: model, entity: entity, format: nil)
        let entry: Entry
        if let value = try planner.constantResult(comparison) {
            entry = .constant(value)
        } else {
            entry = .plan(try planner.plan(comparison))
        }
        plans[key] = (predicate.node, entry)
        return entry
    }
}
