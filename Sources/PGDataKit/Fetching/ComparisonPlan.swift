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
        case .object(_, let entity): return .object(entity.name)
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
    fileprivate var isString: Bool {
        if case .value(.string) = self { return true }
        return false
    }
}

/// Plans the comparisons of one entity.
struct ComparisonPlanner {
    let model: Model
    let entity: EntityDescription
    let format: String?

    private func error(_ message: String, _ path: FetchPredicate.KeyPath? = nil) -> FetchPredicateError {
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

    /// The array attribute a key path reaches through to-one relationships (an
    /// `.attribute` key), or `nil` when it reaches something else.
    private func arrayAttribute(_ path: FetchPredicate.KeyPath) -> PlannedKey? {
        guard let resolved = try? resolve(path), resolved.toManyIndex == nil, let attribute = resolved.attribute,
            attribute.type.isArray
        else { return nil }
        return .attribute(resolved, attribute)
    }

    /// A comparison over the elements of an array attribute (`array`, an `.attribute`
    /// key): each element compared with `right` as a value of the element type would be.
    private func elementPlan(
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
    private enum RawSide {
        case key(PlannedKey, onMember: Bool)
        case value(FetchPredicate.Value)
        case list([FetchPredicate.Expression])

        var type: PlannedType? { readKey?.type }

        var readKey: PlannedKey? {
            if case .key(let key, _) = self { return key }
            return nil
        }
    }

    private func rawSide(_ expression: FetchPredicate.Expression) throws -> RawSide {
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

    private func resolve(_ path: FetchPredicate.KeyPath) throws -> ResolvedKeyPath {
        try model.resolve(path, from: entity, allowingObjects: true, format: format)
    }

    // MARK: - Types and constants

    /// Checks the operator and types of two sides and converts the constants.
    private func combine(
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

    /// A comparison of a whole array attribute: `==` and `!=` with `nil`, with another
    /// attribute of its type, or with a list of constants of the element type (in a
    /// predicate built in code: format strings refuse a list after `==`), elements in
    /// order; nothing else (arrays have no order, and their elements are compared with
    /// `ANY`, `ALL`, `NONE`, `IN` and `@count`).
    private func arrayComparison(
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
    private func checkConstant(
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
    private static func comparesText(_ op: FetchPredicate.Operator) -> Bool {
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

    /// The key for messages: `age (Int?)`, `posts.@count`, `posts.@avg.score`.
    private func describe(_ key: PlannedKey) -> String {
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
