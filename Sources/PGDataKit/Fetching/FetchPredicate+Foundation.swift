import Foundation

extension FetchPredicate {
    /// Translates Foundation's `#Predicate` into a fetch predicate that runs in
    /// PostgreSQL.
    ///
    /// For example:
    ///
    /// ```swift
    /// let minimum = 30
    /// let predicate = try FetchPredicate(#Predicate<User> { user in
    ///     user.age != nil && user.age! > minimum && user.name?.starts(with: "A") == true
    /// })
    /// ```
    ///
    /// Supported: `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&`, `||`, `!`, comparisons with
    /// `nil`, optional chaining and `!` through to-one relationships (`$0.user?.name`),
    /// `?? false` around a boolean, string `contains(_:)` and `starts(with:)`,
    /// `[literal array].contains($0.key)` (IN), `.count` and `.isEmpty` of a to-many
    /// relationship or an array attribute, `contains(_:)` of an array attribute
    /// (`$0.tags.contains("x")`, as `'x' IN tags`), and on a to-many relationship `contains(where:)`,
    /// `allSatisfy(_:)` and `filter(_:).count`, which become the same `SUBQUERY` a
    /// format string would give (`EXISTS` / a correlated count in SQL). Inside those
    /// closures only the closure's own object can be read.
    ///
    /// Foundation on Linux offers no case-insensitive string comparison in `#Predicate`;
    /// use a format string with `[c]` for that. `max()` and `min()` need `Comparable`
    /// elements and `#Predicate` has no `map`, so they cannot reach a to-many
    /// relationship's attributes: use a format string with `posts.@max.score`. Anything
    /// else is a thrown `FetchPredicateError` naming the unsupported expression — never a
    /// silent full-table filter.
    ///
    /// - Throws: `FetchPredicateError`.
    public init<T: ManagedObject>(_ predicate: Predicate<T>) throws {
        var translator = PredicateTranslator(root: predicate.variable.key)
        self = try translator.predicate(predicate.expression)
    }
}

/// Walks a Foundation predicate expression tree.
struct PredicateTranslator {
    let root: PredicateExpressions.VariableID
    /// Key path prefixes of `OptionalFlatMap` variables.
    var bound: [PredicateExpressions.VariableID: [String]] = [:]

    init(root: PredicateExpressions.VariableID) {
        self.root = root
    }

    private func unsupported(_ expression: Any, _ why: String = "") -> FetchPredicateError {
        let name = String(describing: type(of: expression))
            .replacingOccurrences(of: "PredicateExpressions.", with: "")
        return FetchPredicateError(message: "unsupported #Predicate expression \(name)" + (why.isEmpty ? "" : ": \(why)"))
    }

    mutating func predicate(_ expression: Any) throws -> FetchPredicate {
        switch expression {
        case let node as any ConjunctionNode:
            return .and([try predicate(node.left), try predicate(node.right)])
        case let node as any DisjunctionNode:
            return .or([try predicate(node.left), try predicate(node.right)])
        case let node as any NegationNode:
            return .not(try predicate(node.inner))
        case let node as any EqualityNode:
            let left = try self.expression(node.left)
            let right = try self.expression(node.right)
            // `optionalBool == true` is the boolean itself.
            if case .value(.value(.bool(let flag))) = right, case .predicate(let inner) = left {
                return flag ? inner : .not(inner)
            }
            return .comparison(FetchPredicate.Comparison(try operand(left), node.isEqual ? .equal : .notEqual, try operand(right)))
        case let node as any OrderingNode:
            return .comparison(FetchPredicate.Comparison(
                try operand(try self.expression(node.left)), try node.operator(), try operand(try self.expression(node.right))))
        case let node as any NilCoalesceNode:
            guard case .value(.value(.bool(false))) = try self.expression(node.right) else {
                throw unsupported(expression, "only `?? false` around a boolean is supported")
            }
            return try predicate(node.left)
        case let node as any OptionalFlatMapNode:
            let prefix = try keyPath(try self.expression(node.wrappedNode), expression)
            bound[node.variableID] = prefix
            return try predicate(node.transformNode)
        case let node as any StringContainsNode:
            return .comparison(FetchPredicate.Comparison(
                try operand(try self.expression(node.baseNode)), .contains, try operand(try self.expression(node.otherNode))))
        case let node as any StartsWithNode:
            return .comparison(FetchPredicate.Comparison(
                try operand(try self.expression(node.baseNode)), .beginsWith, try operand(try self.expression(node.prefixNode))))
        case let node as any SequenceContainsWhereNode:
            let subquery = try self.subquery(node.sequenceNode, node.testNode, node.variableID, negated: false)
            return .comparison(FetchPredicate.Comparison(.subquery(subquery), .greaterThan, .value(.integer(0))))
        case let node as any SequenceAllSatisfyNode:
            let subquery = try self.subquery(node.sequenceNode, node.testNode, node.variableID, negated: true)
            return .comparison(FetchPredicate.Comparison(.subquery(subquery), .equal, .value(.integer(0))))
        case let node as any KeyPathNode where Self.isEmptyKeyPath(node.anyKeyPath):
            return .comparison(FetchPredicate.Comparison(
                try countOfCollection(node, expression), .equal, .value(.integer(0))))
        case is any SequenceExtremumNode:
            throw unsupported(expression, "max() and min() need Comparable elements and #Predicate has no map(_:); "
                              + "use a format string such as posts.@max.score")
        case let node as any SequenceContainsNode:
            guard case .value(let list) = try self.expression(node.sequenceNode) else {
                throw unsupported(expression, "contains(_:) is supported on literal arrays and array attributes only")
            }
            if case .keyPath(let path) = list, !path.components.isEmpty {
                // `$0.tags.contains(x)`: `x IN tags` (planning refuses what is not an array
                // attribute).
                return .comparison(FetchPredicate.Comparison(try operand(try self.expression(node.elementNode)), .in, list))
            }
            guard case .list = list else {
                throw unsupported(expression, "contains(_:) is supported on literal arrays and array attributes only")
            }
            return .comparison(FetchPredicate.Comparison(try operand(try self.expression(node.elementNode)), .in, list))
        case let node as any ValueNode:
            if let flag = node.anyValue as? Bool { return .constant(flag) }
            throw unsupported(expression, "not a boolean")
        case is any KeyPathNode, is any ForcedUnwrapNode:
            throw unsupported(expression, "boolean attributes must be compared (== true)")
        default:
            throw unsupported(expression)
        }
    }

    /// A translated operand.
    enum Operand {
        case value(FetchPredicate.Expression)
        case predicate(FetchPredicate)
    }

    private func operand(_ operand: Operand) throws -> FetchPredicate.Expression {
        switch operand {
        case .value(let expression): return expression
        case .predicate: throw FetchPredicateError(message: "unsupported #Predicate expression: a boolean condition used as a value")
        }
    }

    private func keyPath(_ operand: Operand, _ context: Any) throws -> [String] {
        if case .value(.keyPath(let path)) = operand { return path.components }
        throw unsupported(context, "optional chaining needs a key path")
    }

    mutating func expression(_ expression: Any) throws -> Operand {
        switch expression {
        case let node as any VariableNode:
            if node.variableID == root { return .value(.keyPath(FetchPredicate.KeyPath([]))) }
            if let prefix = bound[node.variableID] { return .value(.keyPath(FetchPredicate.KeyPath(prefix))) }
            throw unsupported(expression, "a closure of contains(where:), allSatisfy(_:) or filter(_:) reads a "
                              + "variable from outside its closure; only the closure's own object can be read there")
        case let node as any KeyPathNode:
            if let filter = node.rootNode as? any FilterNode {
                guard Self.isCountKeyPath(node.anyKeyPath) else {
                    throw unsupported(expression, "only .count of filter(_:) is supported")
                }
                return .value(.subquery(try subquery(filter.sequenceNode, filter.testNode, filter.variableID, negated: false)))
            }
            guard case .value(let base) = try self.expression(node.rootNode) else { throw unsupported(expression) }
            let components: [String]
            switch base {
            case .keyPath(let path): components = path.components
            default: throw unsupported(expression, "key paths must start at the predicate's object")
            }
            let name = try PredicateTranslator.propertyName(node.anyKeyPath)
            if name == "@count" { return .value(.count(FetchPredicate.KeyPath(components))) }
            return .value(.keyPath(FetchPredicate.KeyPath(components + [name])))
        case let node as any ForcedUnwrapNode:
            return try self.expression(node.innerNode)
        case let node as any ValueNode:
            return .value(try FetchPredicate.argumentExpression(node.anyValue))
        case is any NilLiteralNode:
            return .value(.value(.null))
        case let node as any OptionalFlatMapNode:
            let prefix = try keyPath(try self.expression(node.wrappedNode), expression)
            bound[node.variableID] = prefix
            return try self.expression(node.transformNode)
        default:
            return .predicate(try predicate(expression))
        }
    }

    /// `SUBQUERY(collection, $x, test)` (or `NOT test`) for `contains(where:)`,
    /// `allSatisfy(_:)` and `filter(_:)`; the closure is translated on its own, with its
    /// variable as the related object.
    private mutating func subquery(
        _ sequence: Any, _ test: Any, _ variable: PredicateExpressions.VariableID, negated: Bool
    ) throws -> FetchPredicate.Subquery {
        guard case .value(.keyPath(let path)) = try self.expression(sequence), !path.components.isEmpty else {
            throw unsupported(sequence, "contains(where:), allSatisfy(_:) and filter(_:) need a to-many relationship")
        }
        var inner = PredicateTranslator(root: variable)
        let body = try inner.predicate(test)
        return FetchPredicate.Subquery(collection: path, variable: "x", predicate: negated ? .not(body) : body)
    }

    /// `.count` of a relationship's objects, for `isEmpty`.
    private mutating func countOfCollection(_ node: any KeyPathNode, _ context: Any) throws -> FetchPredicate.Expression {
        if let filter = node.rootNode as? any FilterNode {
            return .subquery(try subquery(filter.sequenceNode, filter.testNode, filter.variableID, negated: false))
        }
        guard case .value(.keyPath(let path)) = try self.expression(node.rootNode), !path.components.isEmpty else {
            throw unsupported(context, "isEmpty is supported on to-many relationships only")
        }
        return .count(path)
    }

    /// Whether a key path is `.count` of a to-many relationship's set or a filtered array.
    static func isCountKeyPath(_ keyPath: AnyKeyPath) -> Bool {
        if let array = type(of: keyPath).rootType as? any StoredArray.Type { return keyPath == array.countKeyPath }
        guard let root = type(of: keyPath).rootType as? any ObjectCollection.Type else { return false }
        return keyPath == root.countKeyPath
    }

    /// Whether a key path is `.isEmpty` of a to-many relationship's set.
    static func isEmptyKeyPath(_ keyPath: AnyKeyPath) -> Bool {
        if let array = type(of: keyPath).rootType as? any StoredArray.Type { return keyPath == array.isEmptyKeyPath }
        guard let root = type(of: keyPath).rootType as? any ObjectCollection.Type else { return false }
        return keyPath == root.isEmptyKeyPath
    }

    /// The attribute or relationship a Swift key path reads, found by reading it on a
    /// prototype object that records its accesses; `@count` for a collection's count.
    static func propertyName(_ keyPath: AnyKeyPath) throws -> String {
        let rootType = type(of: keyPath).rootType
        guard let objectType = rootType as? ManagedObject.Type else {
            // `.count` of a to-many relationship's set: the only Int-valued key path a
            // relationship value offers.
            if isCountKeyPath(keyPath) { return "@count" }
            throw FetchPredicateError(message: "unsupported #Predicate key path \(keyPath.debugDescription)")
        }
        let probe = objectType.init()
        probe.storage.setRecordsAccess(true)
        _ = probe[keyPath: keyPath]
        guard let access = probe.storage.lastAccess else {
            throw FetchPredicateError(
                message: "#Predicate key path \(keyPath.debugDescription) is not an @Attribute or @Relationship of \(objectType)")
        }
        let entity = probe.entity
        return access.isAttribute ? entity.attributes[access.index].name : entity.relationships[access.index].name
    }
}

// MARK: - Type-erased views of Foundation's expression nodes

protocol VariableNode { var variableID: PredicateExpressions.VariableID { get } }
protocol KeyPathNode {
    var rootNode: Any { get }
    var anyKeyPath: AnyKeyPath { get }
}
protocol ValueNode { var anyValue: Any { get } }
protocol NilLiteralNode {}
protocol ConjunctionNode {
    var left: Any { get }
    var right: Any { get }
}
protocol DisjunctionNode {
    var left: Any { get }
    var right: Any { get }
}
protocol NegationNode { var inner: Any { get } }
protocol EqualityNode {
    var left: Any { get }
    var right: Any { get }
    var isEqual: Bool { get }
}
protocol OrderingNode {
    var left: Any { get }
    var right: Any { get }
    /// The comparison's operator.
    ///
    /// - Throws: `FetchPredicateError` for an operator this version does not know.
    func `operator`() throws -> FetchPredicate.Operator
}
protocol NilCoalesceNode {
    var left: Any { get }
    var right: Any { get }
}
protocol OptionalFlatMapNode {
    var wrappedNode: Any { get }
    var transformNode: Any { get }
    var variableID: PredicateExpressions.VariableID { get }
}
protocol ForcedUnwrapNode { var innerNode: Any { get } }
protocol StringContainsNode {
    var baseNode: Any { get }
    var otherNode: Any { get }
}
protocol StartsWithNode {
    var baseNode: Any { get }
    var prefixNode: Any { get }
}
protocol SequenceContainsWhereNode {
    var sequenceNode: Any { get }
    var testNode: Any { get }
    var variableID: PredicateExpressions.VariableID { get }
}
protocol SequenceAllSatisfyNode {
    var sequenceNode: Any { get }
    var testNode: Any { get }
    var variableID: PredicateExpressions.VariableID { get }
}
protocol FilterNode {
    var sequenceNode: Any { get }
    var testNode: Any { get }
    var variableID: PredicateExpressions.VariableID { get }
}
protocol SequenceExtremumNode {}

/// A to-many relationship's set, or a filtered array of objects: its `count` and
/// `isEmpty` key paths, to recognise them.
protocol ObjectCollection {
    static var countKeyPath: AnyKeyPath { get }
    static var isEmptyKeyPath: AnyKeyPath { get }
}

// The key paths are made in functions generic over `Hashable` alone: written in the
// extensions below (over `ManagedObject`) they crash Swift 6.3's compiler.
private func countKeyPath<Element: Hashable>(ofSetOf _: Element.Type) -> AnyKeyPath { \Set<Element>.count }
private func isEmptyKeyPath<Element: Hashable>(ofSetOf _: Element.Type) -> AnyKeyPath { \Set<Element>.isEmpty }
private func countKeyPath<Element>(ofArrayOf _: Element.Type) -> AnyKeyPath { \[Element].count }
private func isEmptyKeyPath<Element>(ofArrayOf _: Element.Type) -> AnyKeyPath { \[Element].isEmpty }

extension Set: ObjectCollection where Element: ManagedObject {
    static var countKeyPath: AnyKeyPath { PGDataKit.countKeyPath(ofSetOf: Element.self) }
    static var isEmptyKeyPath: AnyKeyPath { PGDataKit.isEmptyKeyPath(ofSetOf: Element.self) }
}

extension Array: ObjectCollection where Element: ManagedObject {
    static var countKeyPath: AnyKeyPath { PGDataKit.countKeyPath(ofArrayOf: Element.self) }
    static var isEmptyKeyPath: AnyKeyPath { PGDataKit.isEmptyKeyPath(ofArrayOf: Element.self) }
}

protocol SequenceContainsNode {
    var sequenceNode: Any { get }
    var elementNode: Any { get }
}

extension PredicateExpressions.Variable: VariableNode {
    var variableID: PredicateExpressions.VariableID { key }
}
extension PredicateExpressions.KeyPath: KeyPathNode {
    var anyKeyPath: AnyKeyPath { keyPath }
    var rootNode: Any { root }
}
extension PredicateExpressions.Value: ValueNode {
    var anyValue: Any { value }
}
extension PredicateExpressions.NilLiteral: NilLiteralNode {}
extension PredicateExpressions.Conjunction: ConjunctionNode {
    var left: Any { lhs }
    var right: Any { rhs }
}
extension PredicateExpressions.Disjunction: DisjunctionNode {
    var left: Any { lhs }
    var right: Any { rhs }
}
extension PredicateExpressions.Negation: NegationNode {
    var inner: Any { wrapped }
}
extension PredicateExpressions.Equal: EqualityNode {
    var left: Any { lhs }
    var right: Any { rhs }
    var isEqual: Bool { true }
}
extension PredicateExpressions.NotEqual: EqualityNode {
    var left: Any { lhs }
    var right: Any { rhs }
    var isEqual: Bool { false }
}
extension PredicateExpressions.Comparison: OrderingNode {
    var left: Any { lhs }
    var right: Any { rhs }
    func `operator`() throws -> FetchPredicate.Operator {
        switch op {
        case .lessThan: return .lessThan
        case .lessThanOrEqual: return .lessThanOrEqual
        case .greaterThan: return .greaterThan
        case .greaterThanOrEqual: return .greaterThanOrEqual
        @unknown default:
            // A comparison Foundation added later: refuse it rather than build a wrong query.
            throw FetchPredicateError(message: "#Predicate comparison \(op) is not supported")
        }
    }
}
extension PredicateExpressions.NilCoalesce: NilCoalesceNode {
    var left: Any { lhs }
    var right: Any { rhs }
}
extension PredicateExpressions.OptionalFlatMap: OptionalFlatMapNode {
    var wrappedNode: Any { wrapped }
    var transformNode: Any { transform }
    var variableID: PredicateExpressions.VariableID { variable.key }
}
extension PredicateExpressions.ForcedUnwrap: ForcedUnwrapNode {
    var innerNode: Any { inner }
}
extension PredicateExpressions.CollectionContainsCollection: StringContainsNode {
    var baseNode: Any { base }
    var otherNode: Any { other }
}
extension PredicateExpressions.SequenceStartsWith: StartsWithNode {
    var baseNode: Any { base }
    var prefixNode: Any { prefix }
}
extension PredicateExpressions.SequenceContains: SequenceContainsNode {
    var sequenceNode: Any { sequence }
    var elementNode: Any { element }
}
extension PredicateExpressions.SequenceContainsWhere: SequenceContainsWhereNode {
    var sequenceNode: Any { sequence }
    var testNode: Any { test }
    var variableID: PredicateExpressions.VariableID { variable.key }
}
extension PredicateExpressions.SequenceAllSatisfy: SequenceAllSatisfyNode {
    var sequenceNode: Any { sequence }
    var testNode: Any { test }
    var variableID: PredicateExpressions.VariableID { variable.key }
}
extension PredicateExpressions.Filter: FilterNode {
    var sequenceNode: Any { sequence }
    var testNode: Any { filter }
    var variableID: PredicateExpressions.VariableID { variable.key }
}
extension PredicateExpressions.SequenceMaximum: SequenceExtremumNode {}
extension PredicateExpressions.SequenceMinimum: SequenceExtremumNode {}
