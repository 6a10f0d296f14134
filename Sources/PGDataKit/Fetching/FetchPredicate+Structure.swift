import Foundation

/// The storage of one predicate node.
///
/// A predicate built in code can nest a million levels deep (`p = .not(p)` in a loop).
/// Releasing such a tree the ordinary way recurses once per level and overflows the
/// stack, so `deinit` unlinks the children into a worklist instead: each uniquely held
/// child gives up its own children before it is released, and nothing recurses.
final class PredicateNode: @unchecked Sendable {
    // Sendable: `kind` is set in `init` and changed only while the node is being
    // released (its own `deinit`, or the worklist of the node that held the last
    // reference), when no other thread can see it.
    private(set) var kind: FetchPredicate.Kind

    init(_ kind: FetchPredicate.Kind) {
        self.kind = kind
    }

    deinit {
        var pending = unlinkChildren()
        while var node = pending.popLast() {
            // A shared child stays alive elsewhere; dropping this reference frees nothing.
            if isKnownUniquelyReferenced(&node) {
                pending.append(contentsOf: node.unlinkChildren())
            }
        }
    }

    /// Whether an expression is a list holding a list (built in code: the parser
    /// refuses them), which Swift would release one level per stack frame.
    private static func nestsLists(_ expression: FetchPredicate.Expression) -> Bool {
        guard case .list(let items) = expression else { return false }
        return items.contains { if case .list = $0 { return true } else { return false } }
    }

    /// Releases an expression's nested lists level by level, with a worklist: each
    /// list's items are taken before the list is dropped, so no release recurses.
    private static func dismantle(_ expression: inout FetchPredicate.Expression) {
        var pending: [FetchPredicate.Expression]
        // (`items` must not outlive this statement: it would keep the first level alive
        // until the end, and its release would recurse.)
        if case .list(let items) = expression { pending = items } else { return }
        expression = .value(.null)
        while var next = pending.popLast() {
            if case .list(let items) = next { pending.append(contentsOf: items) }
            next = .value(.null)
        }
    }

    /// Replaces the kind with a leaf and returns the child nodes it held (the
    /// predicates of a comparison's subqueries too).
    private func unlinkChildren() -> [PredicateNode] {
        switch kind {
        case .constant:
            return []
        case .comparison(var comparison):
            let inner = comparison.subqueries.map(\.predicate.node)
            let nestsLists = Self.nestsLists(comparison.left) || Self.nestsLists(comparison.right)
            if !inner.isEmpty || nestsLists { kind = .constant(false) }
            if nestsLists {
                // The node no longer holds them: this copy is their only owner.
                Self.dismantle(&comparison.left)
                Self.dismantle(&comparison.right)
            }
            return inner
        case .not(let inner):
            kind = .constant(false)
            return [inner.node]
        case .and(let parts), .or(let parts):
            kind = .constant(false)
            return parts.map(\.node)
        }
    }
}

extension FetchPredicate {
    /// Structural equality, compared with a worklist rather than recursion.
    public static func == (lhs: FetchPredicate, rhs: FetchPredicate) -> Bool {
        var pairs = [(lhs.node, rhs.node)]
        while let (left, right) = pairs.popLast() {
            if left === right { continue }
            switch (left.kind, right.kind) {
            case (.constant(let a), .constant(let b)):
                if a != b { return false }
            case (.comparison(let a), .comparison(let b)):
                // Subqueries' predicates go on the worklist rather than compare recursively.
                guard let inner = a.equalApartFromSubqueries(b) else { return false }
                for (x, y) in inner { pairs.append((x.node, y.node)) }
            case (.not(let a), .not(let b)):
                pairs.append((a.node, b.node))
            case (.and(let a), .and(let b)), (.or(let a), .or(let b)):
                guard a.count == b.count else { return false }
                for (x, y) in zip(a, b) { pairs.append((x.node, y.node)) }
            default:
                return false
            }
        }
        return true
    }

    /// Throws when the predicate nests deeper than `maximumDepth`, counted as the format
    /// parser counts: each `NOT` is a level, each `SUBQUERY` is one, and each group that
    /// needs parentheses (an OR inside an AND, an AND or OR inside a NOT); an AND inside
    /// an AND or an OR inside an OR is the same flat list and no level. Measured with a
    /// worklist, so any depth is safe to measure.
    func checkDepth() throws(FetchPredicateError) {
        enum Parent { case root, not, and, or }
        var pending: [(node: PredicateNode, level: Int, parent: Parent)] = [(node, 0, .root)]
        while let (node, level, parent) = pending.popLast() {
            var here = level
            let children: [FetchPredicate]
            let tag: Parent
            switch node.kind {
            case .constant:
                continue
            case .comparison(let comparison):
                // A subquery's predicate is one level below the comparison.
                let inner = comparison.subqueries
                if inner.isEmpty { continue }
                here += 1
                children = inner.map(\.predicate)
                tag = .root
            case .not(let inner):
                here += 1
                children = [inner]
                tag = .not
            case .and(let parts):
                if parent == .not { here += 1 }
                children = parts
                tag = .and
            case .or(let parts):
                if parent == .not || parent == .and { here += 1 }
                children = parts
                tag = .or
            }
            guard here <= Self.maximumDepth else {
                throw FetchPredicateError(
                    message: "predicate nested more than \(Self.maximumDepth) levels deep (each NOT and "
                        + "each parenthesised group counts)")
            }
            for child in children { pending.append((child.node, here, tag)) }
        }
    }

    /// The parts of an AND (`and: true`) or OR with directly nested ANDs (ORs) spliced
    /// in, in order, without recursion: `(a AND b) AND c` is `a AND b AND c`. Walkers
    /// recurse only where the operator changes, which `checkDepth()` bounds.
    static func flattened(_ parts: [FetchPredicate], and: Bool) -> [FetchPredicate] {
        func nested(_ part: FetchPredicate) -> [FetchPredicate]? {
            switch part.kind {
            case .and(let inner) where and: return inner
            case .or(let inner) where !and: return inner
            default: return nil
            }
        }
        guard parts.contains(where: { nested($0) != nil }) else { return parts }
        var result: [FetchPredicate] = []
        var stack: [(parts: [FetchPredicate], index: Int)] = []
        var current = (parts: parts, index: 0)
        while true {
            while current.index < current.parts.count {
                let part = current.parts[current.index]
                current.index += 1
                if let inner = nested(part) {
                    stack.append(current)
                    current = (inner, 0)
                } else {
                    result.append(part)
                }
            }
            guard let parent = stack.popLast() else { return result }
            current = parent
        }
    }

    /// Rebuilds the predicate bottom-up with each comparison transformed, keeping its
    /// shape; a worklist instead of recursion, so any depth is safe.
    func mapComparisons(
        _ transform: (Comparison) throws(FetchPredicateError) -> Comparison
    ) throws(FetchPredicateError) -> FetchPredicate {
        struct Frame {
            let predicate: FetchPredicate
            let children: [FetchPredicate]
            var results: [FetchPredicate] = []
        }
        func frame(_ predicate: FetchPredicate) -> Frame {
            switch predicate.kind {
            case .constant, .comparison: Frame(predicate: predicate, children: [])
            case .not(let inner): Frame(predicate: predicate, children: [inner])
            case .and(let parts), .or(let parts): Frame(predicate: predicate, children: parts)
            }
        }
        var stack = [frame(self)]
        while let top = stack.popLast() {
            if top.results.count < top.children.count {
                let child = top.children[top.results.count]
                stack.append(top)
                stack.append(frame(child))
                continue
            }
            let built: FetchPredicate
            switch top.predicate.kind {
            case .constant: built = top.predicate
            case .comparison(let comparison): built = .comparison(try transform(comparison))
            case .not: built = .not(top.results[0])
            case .and: built = .and(top.results)
            case .or: built = .or(top.results)
            }
            guard !stack.isEmpty else { return built }
            stack[stack.count - 1].results.append(built)
        }
        return self
    }

    // MARK: - Description

    /// The predicate in format-string syntax, such as `age > 30 AND name BEGINSWITH[c]
    /// "a"`; a predicate deeper than `maximumDepth` is summarised instead.
    public var description: String {
        do {
            try checkDepth()
        } catch {
            return "<predicate nested more than \(Self.maximumDepth) levels deep>"
        }
        return text(grouped: false)
    }

    /// The text, in parentheses when `grouped` and compound.
    private func text(grouped: Bool) -> String {
        switch kind {
        case .constant(let value):
            return value ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .not(let inner):
            return "NOT " + inner.text(grouped: true)
        case .and(let parts):
            let flat = Self.flattened(parts, and: true)
            if flat.isEmpty { return "TRUEPREDICATE" }
            let body = flat.map { $0.text(grouped: true) }.joined(separator: " AND ")
            return grouped && flat.count > 1 ? "(\(body))" : body
        case .or(let parts):
            let flat = Self.flattened(parts, and: false)
            if flat.isEmpty { return "FALSEPREDICATE" }
            let body = flat.map { $0.text(grouped: true) }.joined(separator: " OR ")
            return grouped && flat.count > 1 ? "(\(body))" : body
        case .comparison(let comparison):
            return comparison.description
        }
    }
}

extension FetchPredicate.Comparison: CustomStringConvertible {
    /// `ANY posts.title BEGINSWITH[c] "a"`.
    public var description: String {
        var text = quantifier.map { $0.rawValue + " " } ?? ""
        text += left.description + " " + self.operator.rawValue
        if !options.isEmpty {
            text += "[" + (options.contains(.caseInsensitive) ? "c" : "")
                + (options.contains(.diacriticInsensitive) ? "d" : "") + "]"
        }
        return text + " " + right.description
    }
}

extension FetchPredicate.Comparison {
    /// The subqueries on either side (in lists too), found without recursion.
    var subqueries: [FetchPredicate.Subquery] {
        var found: [FetchPredicate.Subquery] = []
        var pending = [left, right]
        while let expression = pending.popLast() {
            switch expression {
            case .subquery(let subquery): found.append(subquery)
            case .list(let elements): pending.append(contentsOf: elements)
            case .keyPath, .value, .variable, .count, .aggregate: break
            }
        }
        return found
    }

    /// `nil` when the comparisons differ in anything but their subqueries' predicates;
    /// otherwise the pairs of those predicates, still to compare.
    func equalApartFromSubqueries(
        _ other: FetchPredicate.Comparison
    ) -> [(FetchPredicate, FetchPredicate)]? {
        guard self.operator == other.operator, options == other.options, quantifier == other.quantifier
        else { return nil }
        var pairs: [(FetchPredicate, FetchPredicate)] = []
        var pending = [(left, other.left), (right, other.right)]
        while let (a, b) = pending.popLast() {
            switch (a, b) {
            case (.subquery(let x), .subquery(let y)):
                guard x.collection == y.collection else { return nil }
                pairs.append((x.predicate, y.predicate))
            case (.list(let x), .list(let y)):
                guard x.count == y.count else { return nil }
                pending.append(contentsOf: zip(x, y))
            case (.subquery, _), (_, .subquery), (.list, _), (_, .list):
                return nil
            default:
                if a != b { return nil }
            }
        }
        return pairs
    }
}

extension FetchPredicate.Expression: CustomStringConvertible {
    /// The expression in format-string syntax: `user.name`, `posts.@count`,
    /// `posts.@max.score`, `SUBQUERY(posts, $p, title == "a").@count`, `"text"`, `{1, 2}`,
    /// `$NAME`.
    public var description: String {
        switch self {
        case .keyPath(let path): return path.description
        case .count(let path): return path.description + ".@count"
        case .aggregate(let function, let collection, let key):
            return collection.description + "." + function.rawValue + "." + key.description
        case .subquery(let subquery):
            // The predicate's own description checks its depth, so this cannot recurse
            // deeper than `maximumDepth`.
            return "SUBQUERY(\(subquery.collection), $\(subquery.variable), \(subquery.predicate)).@count"
        case .variable(let name): return "$" + name
        case .list(let elements):
            // Lists do not nest (a nested list is refused); "{…}" keeps this from recursing.
            return "{" + elements.map { element in
                if case .list = element { return "{…}" }
                return element.description
            }.joined(separator: ", ") + "}"
        case .value(let value):
            switch value {
            case .null: return "nil"
            case .string(let text):
                return "\"" + text.replacingOccurrences(of: "\\", with: "\\\\")
                    .replacingOccurrences(of: "\"", with: "\\\"") + "\""
            case .integer(let number): return String(number)
            case .double(let number): return String(number)
            case .decimal(let number): return "\(number)"
            case .bool(let flag): return flag ? "YES" : "NO"
            case .date(let date): return "CAST(\(date.timeIntervalSinceReferenceDate), \"NSDate\")"
            case .uuid(let uuid): return "\"\(uuid.uuidString)\""
            case .data(let data): return "<\(data.count) bytes>"
            case .object(let id): return "\(id)"
            }
        }
    }
}
