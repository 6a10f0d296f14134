import Foundation

/// A constant of a planned comparison, converted to the type it is compared with (the
/// primary key, as `Int64`, for objects).
typealias PlannedConstant = any PostgresEncodable & Sendable

/// The type of what a key reads.
enum PlannedType: Equatable {
    /// Attribute values (or counts, sums and averages, typed as the values they are).
    case value(AttributeType)
    /// Objects of the named entity.
    case object(String)

    /// Whether values of the type are numbers.
    var isNumber: Bool {
        guard case .value(let type) = self else { return false }
        return [.int16, .int32, .int64, .double, .float, .decimal].contains(type)
    }

    /// Whether values of the type are floating-point numbers.
    var isFloatingPoint: Bool { self == .value(.double) || self == .value(.float) }
}

/// What a key path, count, aggregate or subquery of a comparison reads, resolved
/// against the model.
enum PlannedKey {
    /// An attribute reached through to-one relationships.
    case attribute(ResolvedKeyPath, AttributeDescription)
    /// An object: a to-one relationship's target, `SELF`, or each related object of a
    /// quantified comparison.
    case object(ResolvedKeyPath, EntityDescription)
    /// The number of objects of a to-many relationship (`.count` end).
    case count(ResolvedKeyPath)
    /// `@min` … `@avg` of an attribute (`key`, from each related object) over the
    /// objects `members` reaches (its last hop is the to-many one).
    case aggregate(FetchPredicate.CollectionOperator, members: ResolvedKeyPath, key: ResolvedKeyPath, AttributeDescription)
    /// How many objects `members` reaches (of `entity`) match `predicate`.
    case subquery(members: ResolvedKeyPath, entity: EntityDescription, predicate: FetchPredicate)
    /// Each element of an array attribute (reached through to-one relationships), in a
    /// comparison over its elements (`ComparisonPlan.elements`).
    case element(ResolvedKeyPath, AttributeDescription)
    /// The number of elements of an array attribute (`tags.@count`): 0 for `nil`.
    case arrayCount(ResolvedKeyPath, AttributeDescription)

    /// What the key's values are: `@sum` of integers or decimals is a `Decimal`, of
    /// floating-point numbers a `Double`; `@avg` is a `Double`; counts are `Int`.
    var type: PlannedType {
        switch self {
        case .attribute(_, let attribute): return .value(attribute.type)
        case .object(_, let entity): return .object(entity.rootEntityName)  // (the name object IDs carry)
        case .count, .subquery, .arrayCount: return .value(.int64)
        case .element(_, let attribute): return .value(attribute.type.elementType ?? attribute.type)
        case .aggregate(let function, _, _, let attribute):
            switch function {
            case .min, .max: return .value(attribute.type)
            case .average: return .value(.double)
            case .sum: return PlannedType.value(attribute.type).isFloatingPoint ? .value(.double) : .value(.decimal)
            }
        }
    }
}

/// One side of a planned comparison.
indirect enum PlannedSide {
    /// Read from the evaluated object, or (`onMember`) from each related object of a
    /// quantified comparison.
    case key(PlannedKey, onMember: Bool)
    /// A constant; `nil` is `nil`.
    case constant(PlannedConstant?)
    /// The constants of `IN`.
    case list([PlannedConstant?])
    /// `BETWEEN`'s low and high bounds.
    case bounds(PlannedSide, PlannedSide)
}

/// A comparison checked against the model and reduced to the forms both engines run:
/// keys resolved, constants converted, `%@ IN posts` turned into `ANY posts == %@`,
/// `x IN name` into `name CONTAINS x`, options dropped where they do not apply. The SQL
/// compiler and the in-memory evaluator each run a plan, so they agree on what is
/// valid and on what is compared.
struct ComparisonPlan {
    /// `ANY`, `ALL` or `NONE` over the objects `members` reaches (its last hop is the
    /// to-many one), of `entity`.
    struct Quantified {
        var quantifier: FetchPredicate.Quantifier
        var members: ResolvedKeyPath
        var entity: EntityDescription
    }

    /// `ANY`, `ALL` or `NONE` over the elements of an array attribute (`ANY tags ==
    /// 'x'`, `'x' IN tags`): each element is the `.element` key of the comparison.
    struct Elements {
        var quantifier: FetchPredicate.Quantifier
        /// The array attribute (an `.attribute` key), read from the evaluated object.
        var array: PlannedKey
    }

    var quantified: Quantified?
    /// Set instead of `quantified` for a comparison over an array's elements.
    var elements: Elements?
    var left: PlannedSide
    var `operator`: FetchPredicate.Operator
    var right: PlannedSide
    /// `[c]`/`[d]`, only when strings are compared (ignored otherwise, as in
    /// `NSPredicate`).
    var options: FetchPredicate.StringOptions
    /// The type the comparison's keys read (the left key's, if both sides are keys).
    var type: PlannedType
    /// The answer for every object (or member), whatever it holds: a string constant
    /// with NUL, which no stored string holds, matches nothing (`!=` everything).
    var fixed: Bool? = nil
}

extension FetchPredicate.Expression {
    /// Whether the expression is a string constant.
    var isString: Bool {
        if case .value(.string) = self { return true }
        return false
    }
}

/// Plans the comparisons of one entity.
struct ComparisonPlanner {
    let model: Model
    let entity: EntityDescription
    let format: String?

    func error(_ message: String, _ path: FetchPredicate.KeyPath? = nil) -> FetchPredicateError {
        FetchPredicateError(message: message, position: path?.position, format: format)
    }

    /// Checks a comparison against the model and plans it.
    ///
    /// - Throws: `FetchPredicateError` naming what is wrong.
    func plan(_ comparison: FetchPredicate.Comparison) throws -> ComparisonPlan {
        try checkConstants(comparison)
        let path = Self.keyPath(of: comparison)
        if let quantifier = comparison.quantifier {
            guard case .keyPath(let left) = comparison.left else {
                throw error("\(quantifier.rawValue) needs a key path through a to-many relationship on its left", path)
            }
            if let array = arrayAttribute(left) {
                return try elementPlan(array, quantifier, comparison.operator, comparison.right, comparison.options, path)
            }
            let (quantified, key) = try quantifiedKey(left, quantifier)
            var plan: ComparisonPlan
            if comparison.operator == .in, comparison.right.isKeyPath || comparison.right.isString {
                // `ANY posts.title IN name`: each title is a substring of the name.
                plan = try combine(
                    try rawSide(comparison.right), .contains, .key(key, onMember: true), comparison.options, path)
            } else {
                plan = try combine(.key(key, onMember: true), comparison.operator, try rawSide(comparison.right),
                                   comparison.options, path)
            }
            plan.quantified = quantified
            return plan
        }
        if comparison.operator == .in, case .keyPath(let collection) = comparison.right {
            return try membership(of: comparison.left, in: collection, comparison.options)
        }
        if comparison.operator == .in, case .value(.string) = comparison.right {
            // `name IN 'Ada Lovelace'`: a substring test, as in NSPredicate.
            return try combine(
                try rawSide(comparison.right), .contains, try rawSide(comparison.left), comparison.options, path)
        }
        if comparison.operator == .contains, case .keyPath(let collection) = comparison.left,
            let array = arrayAttribute(collection)
        {
            // `tags CONTAINS %@`: membership, as `%@ IN tags`.
            return try elementPlan(array, .any, .equal, comparison.right, comparison.options, path)
        }
        if comparison.operator == .contains, case .keyPath(let collection) = comparison.left,
            let resolved = try? resolve(collection), case .object = resolved.end, !collection.components.isEmpty,
            resolved.hops.last?.relationship.isToMany == true
        {
            // `posts CONTAINS %@`: membership, as `%@ IN posts`.
            return try membership(of: comparison.right, in: collection, comparison.options)
        }
        var oriented = comparison
        if !comparison.left.isKeyPath {
            guard comparison.right.isKeyPath else { throw error("a comparison needs a key path on one side") }
            let stringOperators: Set<FetchPredicate.Operator> = [.contains, .beginsWith, .endsWith, .like, .matches]
            if !stringOperators.contains(comparison.operator) {
                do {
                    oriented = try comparison.keyPathFirst()
                } catch var error as FetchPredicateError {
                    error.format = format
                    throw error
                }
            }
        }
        return try combine(try rawSide(oriented.left), oriented.operator, try rawSide(oriented.right), oriented.options, path)
    }

    // MARK: - Shapes

    /// `x IN collection`: `ANY collection == x` for a to-many key path, `collection
    /// CONTAINS x` for a string.
    private func membership(
        of element: FetchPredicate.Expression, in collection: FetchPredicate.KeyPath, _ options: FetchPredicate.StringOptions
    ) throws -> ComparisonPlan {
        let resolved = try resolve(collection)
        if resolved.toManyIndex == nil, let attribute = resolved.attribute, attribute.type.isArray {
            return try elementPlan(.attribute(resolved, attribute), .any, .equal, element, options, collection)
        }
        if resolved.toManyIndex != nil {
            let (quantified, key) = try quantifiedKey(resolved, .any)
            var plan = try combine(.key(key, onMember: true), .equal, try rawSide(element), options, collection)
            plan.quantified = quantified
            return plan
        }
        if case .attribute(let attribute) = resolved.end, attribute.type == .string {
            return try combine(
                .key(.attribute(resolved, attribute), onMember: false), .contains, try rawSide(element), options, collection)
        }
        throw error(
            "IN needs a list, a to-many key path or a string on its right; \(collection) is "
                + describe(try key(resolved, root: entity)), collection)
    }

    /// The related objects of an `ANY`/`ALL`/`NONE` key path and the key read on each.
    private func quantifiedKey(
        _ path: FetchPredicate.KeyPath, _ quantifier: FetchPredicate.Quantifier
    ) throws -> (ComparisonPlan.Quantified, PlannedKey) {
        try quantifiedKey(try resolve(path), quantifier)
    }

    private func quantifiedKey(
        _ resolved: ResolvedKeyPath, _ quantifier: FetchPredicate.Quantifier
    ) throws -> (ComparisonPlan.Quantified, PlannedKey) {
        // Every object the path reaches up to its last to-many hop is a member (across
        // several to-many relationships, the objects of each of the previous ones).
        guard let toMany = resolved.hops.lastIndex(where: \.relationship.isToMany) else {
            throw error("\(quantifier.rawValue) needs a key path through a to-many relationship", resolved.path)
        }
        for hop in resolved.hops[...toMany] where hop.relationship.isToMany { try requireInverse(hop, resolved.path) }
        let hop = resolved.hops[toMany]
        let members = ResolvedKeyPath(hops: Array(resolved.hops[...toMany]), end: .object, path: resolved.path)
        let remaining = ResolvedKeyPath(hops: Array(resolved.hops[(toMany + 1)...]), end: resolved.end, path: resolved.path)
        let quantified = ComparisonPlan.Quantified(quantifier: quantifier, members: members, entity: hop.destination)
        return (quantified, try key(remaining, root: hop.destination))
    }

    // MARK: - Sides

    /// A side before its constants are converted.
    enum RawSide {
        case key(PlannedKey, onMember: Bool)
        case value(FetchPredicate.Value)
        case list([FetchPredicate.Expression])

        var type: PlannedType? { readKey?.type }

        var readKey: PlannedKey? {
            if case .key(let key, _) = self { return key }
            return nil
        }
    }

    func rawSide(_ expression: FetchPredicate.Expression) throws -> RawSide {
        switch expression {
        case .value(let value): return .value(value)
        case .list(let items): return .list(items)
        case .variable(let name):
            throw error("variable $\(name) has no value: call substituting(_:) first")
        default: return .key(try key(expression), onMember: false)
        }
    }

    /// The key an expression reads from the evaluated object.
    private func key(_ expression: FetchPredicate.Expression) throws -> PlannedKey {
        switch expression {
        case .keyPath(let path):
            let resolved = try resolve(path)
            if let toMany = resolved.toManyIndex {
                let hop = resolved.hops[toMany]
                let through = resolved.hops[...toMany].map(\.relationship.name).joined(separator: ".")
                throw error(
                    "\(path) goes through the to-many relationship \(hop.source.name).\(hop.relationship.name): "
                        + "say which of its objects count with ANY, ALL or NONE (ANY \(path) …), or use "
                        + "\(through).@count, an aggregate such as \(through).@max.<key>, or SUBQUERY", path)
            }
            return try key(resolved, root: entity)
        case .count(let path):
            if let array = arrayAttribute(path), case .attribute(let resolved, let attribute) = array {
                return .arrayCount(resolved, attribute)
            }
            let resolved = try model.resolve(path, from: entity, counting: true, format: format)
            try requireSingleToMany(resolved, "@count")
            return .count(resolved)
        case .aggregate(let function, let collection, let keyPath):
            let (members, destination) = try collectionMembers(collection, function.rawValue)
            let resolvedKey = try model.resolve(keyPath, from: destination, format: format)
            guard resolvedKey.toManyIndex == nil, case .attribute(let attribute) = resolvedKey.end else {
                throw error("\(function.rawValue) needs an attribute after it (reached through to-one "
                            + "relationships), as in \(collection).\(function.rawValue).<attribute>", keyPath)
            }
            let allowed: Set<AttributeType> = function == .min || function == .max
                ? [.string, .int16, .int32, .int64, .double, .float, .decimal, .date]
                : [.int16, .int32, .int64, .double, .float, .decimal]
            guard allowed.contains(attribute.type) else {
                throw error("\(function.rawValue) cannot be taken of \(destination.name).\(attribute.name) "
                            + "(\(attribute.swiftTypeName))" + (function == .min || function == .max
                                ? "; it needs strings, numbers or dates" : "; it needs numbers"), keyPath)
            }
            return .aggregate(function, members: members, key: resolvedKey, attribute)
        case .subquery(let subquery):
            let (members, destination) = try collectionMembers(subquery.collection, "SUBQUERY")
            try validate(subquery.predicate, on: destination)
            return .subquery(members: members, entity: destination, predicate: subquery.predicate)
        case .value, .list, .variable:
            throw error("expected a key path")
        }
    }

    /// The key a resolved key path without to-many hops reads from `root`.
    private func key(_ resolved: ResolvedKeyPath, root: EntityDescription) throws -> PlannedKey {
        switch resolved.end {
        case .attribute(let attribute):
            return .attribute(resolved, attribute)
        case .toOne(let relationship):
            guard let destination = model.entity(named: relationship.destinationEntityName) else {
                throw error("unknown entity \(relationship.destinationEntityName)", resolved.path)
            }
            return .object(resolved, destination)
        case .object:
            return .object(resolved, resolved.reachedEntity(from: root))
        case .count:
            return .count(resolved)
        }
    }

    /// The related objects of a collection key path (to-one hops, then one to-many).
    private func collectionMembers(
        _ path: FetchPredicate.KeyPath, _ what: String
    ) throws -> (ResolvedKeyPath, EntityDescription) {
        let resolved = try resolve(path)
        guard case .object = resolved.end, let last = resolved.hops.last, last.relationship.isToMany else {
            throw error("\(what) needs a to-many key path such as posts; \(path) is not one", path)
        }
        try requireSingleToMany(resolved, what)
        return (resolved, last.destination)
    }

    /// Checks that only the last hop of a collection path is to-many, and that it has
    /// the inverse the SQL needs.
    private func requireSingleToMany(_ resolved: ResolvedKeyPath, _ what: String) throws {
        if resolved.hops.dropLast().contains(where: \.relationship.isToMany) {
            throw error("\(resolved.path) crosses more than one to-many relationship; \(what) can follow "
                        + "only one, at the end", resolved.path)
        }
        if let last = resolved.hops.last { try requireInverse(last, resolved.path) }
    }

    private func requireInverse(_ hop: ResolvedKeyPath.Hop, _ path: FetchPredicate.KeyPath) throws {
        guard let inverseName = hop.relationship.inverseName,
            hop.relationship.joinTable != nil || hop.destination.relationship(named: inverseName)?.columnName != nil
        else { throw error("\(hop.source.name).\(hop.relationship.name) has no inverse", path) }
    }

    /// Plans every comparison of a subquery's predicate (on the related entity), so a
    /// mistake in it is an error in both engines even when no object has related
    /// objects. Bounded: the caller checked the whole predicate's depth.
    private func validate(_ predicate: FetchPredicate, on destination: EntityDescription) throws {
        let planner = ComparisonPlanner(model: model, entity: destination, format: format)
        var pending = [predicate]
        while let next = pending.popLast() {
            switch next.kind {
            case .constant: break
            case .not(let inner): pending.append(inner)
            case .and(let parts), .or(let parts): pending.append(contentsOf: parts)
            case .comparison(let comparison):
                if try planner.constantResult(comparison) == nil { _ = try planner.plan(comparison) }
            }
        }
    }

    func resolve(_ path: FetchPredicate.KeyPath) throws -> ResolvedKeyPath {
        try model.resolve(path, from: entity, allowingObjects: true, format: format)
    }

    // MARK: - Types and constants

    /// Checks the operator and types of two sides and converts the constants.
    func combine(
        _ left: RawSide, _ op: FetchPredicate.Operator, _ right: RawSide, _ options: FetchPredicate.StringOptions,
        _ path: FetchPredicate.KeyPath?
    ) throws -> ComparisonPlan {
        guard let type = left.type ?? right.type, let subject = left.readKey ?? right.readKey else {
            throw error("a comparison needs a key path on one side", path)
        }
        if case .list = left { throw error("a list can only stand on the right of IN or BETWEEN", path) }
        if case .value(let attributeType) = type, attributeType.isArray {
            return try arrayComparison(left, op, right, type: attributeType, subject: subject, path)
        }
        switch op {
        case .contains, .beginsWith, .endsWith, .like, .matches:
            for side in [left, right] {
                if let key = side.readKey, key.type != .value(.string) {
                    throw error("\(op.rawValue) applies to strings only; \(describe(key)) is not one", path)
                }
            }
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual, .between:
            if case .object = type { throw error("\(op.rawValue) cannot compare the relationship \(describe(subject))", path) }
            if type == .value(.json) { throw error("\(op.rawValue) cannot order JSON values", path) }
        case .in:
            guard case .list = right else { throw error("IN needs a list or an array argument", path) }
        case .equal, .notEqual:
            if case .list = right { throw error("a list is allowed only after IN or BETWEEN", path) }
        }
        if op == .between {
            guard case .list = right else { throw error("BETWEEN needs {low, high}", path) }
        }
        if let leftKey = left.readKey, let rightKey = right.readKey {
            try checkComparable(leftKey, rightKey, path)
        }
        let plannedLeft = try side(left, type: type, subject: subject, op, path)
        let plannedRight = try side(right, type: type, subject: subject, op, path)
        // (Strings with NUL in an IN list leave it in `side`.)
        var fixed: Bool?
        if case .constant(let text as String) = plannedRight, Self.holdsNUL(text) { fixed = op == .notEqual }
        return ComparisonPlan(
            quantified: nil, left: plannedLeft, operator: op, right: plannedRight,
            options: type == .value(.string) ? options : [], type: type, fixed: fixed)
    }

    private func side(
        _ raw: RawSide, type: PlannedType, subject: PlannedKey, _ op: FetchPredicate.Operator,
        _ path: FetchPredicate.KeyPath?
    ) throws -> PlannedSide {
        switch raw {
        case .key(let key, let onMember):
            return .key(key, onMember: onMember)
        case .value(let value):
            return .constant(try constant(value, type: type, subject: subject, op, path))
        case .list(let items):
            if op == .between {
                guard items.count == 2 else { throw error("BETWEEN needs {low, high}", path) }
                let bounds = try items.map { item -> PlannedSide in
                    switch item {
                    case .value(let value):
                        return .constant(try constant(value, type: type, subject: subject, op, path))
                    case .list: throw error("nested lists are not supported", path)
                    default:
                        let key = try rawSide(item)
                        if let bound = key.readKey { try checkComparable(subject, bound, path) }
                        return try side(key, type: type, subject: subject, op, path)
                    }
                }
                return .bounds(bounds[0], bounds[1])
            }
            var constants: [PlannedConstant?] = []
            constants.reserveCapacity(items.count)
            for item in items {
                guard case .value(let value) = item else { throw error("IN lists hold constants only", path) }
                let converted = try constant(value, type: type, subject: subject, op, path)
                // A string with NUL matches no stored string: it leaves an IN list (tested
                // on the argument, which only a text attribute keeps as text).
                if op == .in, case .string(let text) = value, Self.holdsNUL(text) { continue }
                constants.append(converted)
            }
            return .list(constants)
        }
    }

    /// A constant converted to what it is compared with; `nil` for `nil`.
    private func constant(
        _ value: FetchPredicate.Value, type: PlannedType, subject: PlannedKey, _ op: FetchPredicate.Operator,
        _ path: FetchPredicate.KeyPath?
    ) throws -> PlannedConstant? {
        if case .null = value { return nil }
        switch type {
        case .object(let entityName):
            switch value {
            case .object(let id):
                guard id.entityName == entityName else {
                    throw error("\(describe(subject)) holds \(entityName) objects, not \(id.entityName)", path)
                }
                guard let key = id.primaryKey else { throw error("\(id) is not saved yet", path) }
                return key
            case .integer(let key):
                return key
            default:
                throw error("\(describe(subject)) is a relationship: compare it with an object or nil", path)
            }
        case .value(let attributeType):
            if Self.comparesText(op) {
                guard case .string(let text) = value else {
                    throw error("\(op.rawValue) needs a string, not \(PredicateValues.describe(value))", path)
                }
                if op == .matches {
                    do {
                        _ = try MatchesPattern(text)
                    } catch var error {
                        error.position = path?.position
                        error.format = format
                        throw error
                    }
                }
                return text
            }
            guard let converted = PredicateValues.convert(value, to: attributeType) else {
                throw error("cannot compare \(describe(subject)) with \(PredicateValues.describe(value))", path)
            }
            return converted
        }
    }

    /// Whether two keys' values can be compared: the same type, two numbers, or objects
    /// of one entity.
    private func checkComparable(_ leftKey: PlannedKey, _ rightKey: PlannedKey, _ path: FetchPredicate.KeyPath?) throws {
        let (left, right) = (leftKey.type, rightKey.type)
        switch (left, right) {
        case (.object(let a), .object(let b)):
            guard a == b else { throw error("cannot compare \(a) objects with \(b) objects", path) }
            return
        case (.value(let a), .value(let b)):
            if a != .json && b != .json && (a == b || (left.isNumber && right.isNumber)) { return }
        default:
            break
        }
        throw error("cannot compare \(describe(leftKey)) with \(describe(rightKey))", path)
    }

    /// The key for messages: `age (Int?)`, `posts.@count`, `posts.@avg.score`.
    func describe(_ key: PlannedKey) -> String {
        switch key {
        case .attribute(let resolved, let attribute):
            return "\(resolved.path.components.isEmpty ? attribute.name : resolved.path.description) (\(attribute.swiftTypeName))"
        case .object(let resolved, let entity):
            return resolved.path.components.isEmpty ? "SELF (\(entity.name))" : "\(resolved.path) (\(entity.name))"
        case .count(let resolved): return "\(resolved.path).@count (an integer)"
        case .aggregate(let function, let members, let key, _):
            return "\(members.path).\(function.rawValue).\(key.path)"
        case .subquery(let members, _, _): return "SUBQUERY(\(members.path), …).@count (an integer)"
        case .element(let resolved, let attribute):
            return "an element of \(resolved.path.components.isEmpty ? attribute.name : resolved.path.description) "
                + "(\(attribute.swiftTypeName))"
        case .arrayCount(let resolved, _): return "\(resolved.path).@count (an integer)"
        }
    }
}
