import Foundation

/// One value of a sort key, as a controller compares it: `NULL`, a string (lower-cased
/// for case-insensitive sorts, compared by UTF-8 bytes, which is code-point order and so
/// `COLLATE "C"`), or another stored value.
enum ControllerSortValue {
    case null
    case text(String)
    case value(any Sendable)
}

/// Where an object sorts: its values for the sort descriptors, then its primary key
/// (unsaved objects after saved ones), as the SQL `ORDER BY` of a fetch orders rows.
struct ControllerSortKey {
    /// What breaks ties between equal values.
    enum Tiebreak {
        /// The primary key (or, for a controller of given objects, the position given).
        case key(Int64)
        /// An unsaved object: its temporary ID's text.
        case temporary(String)
    }

    var values: [ControllerSortValue]
    var tiebreak: Tiebreak
}

/// A fetch request's sort descriptors resolved against an entity: makes the sort key of
/// an object from its values in the context, and compares keys as the SQL order does
/// (`nil` first ascending and last descending, strings by code point, case-insensitive
/// strings lower-cased, ties by primary key).
struct ControllerSortOrder {
    struct Term {
        var resolved: ResolvedKeyPath
        var ascending: Bool
        var caseInsensitive: Bool
    }

    let terms: [Term]
    /// The to-one relationship paths the terms go through (such as `user` for
    /// `user.name`): loaded for new members with one query per relationship.
    let relationshipPaths: [String]

    /// No terms: keys made with `key(position:)` keep a given order.
    static let given = ControllerSortOrder(terms: [], relationshipPaths: [])

    private init(terms: [Term], relationshipPaths: [String]) {
        self.terms = terms
        self.relationshipPaths = relationshipPaths
    }

    /// Resolves sort descriptors.
    ///
    /// - Throws: `FetchPredicateError` for an unknown key or a key through a to-many
    ///   relationship.
    init(_ descriptors: [FetchSortDescriptor], entity: EntityDescription, model: Model) throws {
        var terms: [Term] = []
        var paths: [String] = []
        for descriptor in descriptors {
            let components = descriptor.key.split(separator: ".").map(String.init)
            let resolved = try model.resolve(FetchPredicate.KeyPath(components), from: entity)
            guard resolved.toManyIndex == nil else {
                throw FetchPredicateError(message: "cannot sort by \(descriptor.key): it crosses a to-many relationship")
            }
            terms.append(Term(resolved: resolved, ascending: descriptor.ascending, caseInsensitive: descriptor.caseInsensitive))
            if !resolved.hops.isEmpty {
                let path = resolved.hops.map(\.relationship.name).joined(separator: ".")
                if !paths.contains(path) { paths.append(path) }
            }
        }
        self.init(terms: terms, relationshipPaths: paths)
    }

    /// The key of an object from its current values or, with `committed`, from its last
    /// saved or fetched values (for a request that leaves pending changes out; sort keys
    /// through relationships use the related objects as they are).
    func key(for object: ManagedObject, committed: Bool = false) -> ControllerSortKey {
        var values: [ControllerSortValue] = []
        values.reserveCapacity(terms.count)
        for term in terms {
            if committed, term.resolved.hops.isEmpty, case .attribute(let attribute) = term.resolved.end,
                let snapshot = object.snapshot, attribute.index < snapshot.count
            {
                switch snapshot[attribute.index] {
                case .none: values.append(.null)
                case .some(let text as String): values.append(.text(term.caseInsensitive ? text.lowercased() : text))
                case .some(let value): values.append(.value(value))
                }
                continue
            }
            let reached = PredicateEvaluator.reach(term.resolved, from: object)
            if case .toOne = term.resolved.end {
                // SQL orders by the foreign key.
                values.append(reached.object?.objectID.primaryKey.map { .value($0) } ?? .null)
                continue
            }
            switch reached.scalar {
            case .none: values.append(.null)
            case .some(let text as String): values.append(.text(term.caseInsensitive ? text.lowercased() : text))
            case .some(let value): values.append(.value(value))
            }
        }
        let tiebreak: ControllerSortKey.Tiebreak = object.objectID.primaryKey.map { .key($0) }
            ?? .temporary(object.objectID.description)
        return ControllerSortKey(values: values, tiebreak: tiebreak)
    }

    /// A key that keeps objects in a given order.
    static func key(position: Int) -> ControllerSortKey {
        ControllerSortKey(values: [], tiebreak: .key(Int64(position)))
    }

    /// Orders two keys: negative, zero or positive.
    func compare(_ a: ControllerSortKey, _ b: ControllerSortKey) -> Int {
        for index in terms.indices {
            let result = compareTerm(index, a, b)
            if result != 0 { return result }
        }
        switch (a.tiebreak, b.tiebreak) {
        case (.key(let x), .key(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.key, .temporary): return -1
        case (.temporary, .key): return 1
        case (.temporary(let x), .temporary(let y)): return Self.compareUTF8(x, y)
        }
    }

    /// Orders two keys by the first term only (the section of a sectioned controller).
    func compareFirst(_ a: ControllerSortKey, _ b: ControllerSortKey) -> Int {
        terms.isEmpty ? 0 : compareTerm(0, a, b)
    }

    private func compareTerm(_ index: Int, _ a: ControllerSortKey, _ b: ControllerSortKey) -> Int {
        guard index < a.values.count, index < b.values.count else { return 0 }
        let result = Self.compareValues(a.values[index], b.values[index])
        return terms[index].ascending ? result : -result
    }

    static func compareValues(_ a: ControllerSortValue, _ b: ControllerSortValue) -> Int {
        switch (a, b) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case (.text(let x), .text(let y)): return compareUTF8(x, y)
        case (.value(let x), .value(let y)): return ValueComparison.compare(x, y) ?? 0
        case (.text(let x), .value(let y)): return ValueComparison.compare(x, y) ?? 0
        case (.value(let x), .text(let y)): return ValueComparison.compare(x, y) ?? 0
        }
    }

    /// Orders strings by their UTF-8 bytes (Unicode code-point order, as `COLLATE "C"`;
    /// Swift's `<` would compare canonical equivalents as equal).
    static func compareUTF8(_ a: String, _ b: String) -> Int {
        let fast = a.utf8.withContiguousStorageIfAvailable { left in
            b.utf8.withContiguousStorageIfAvailable { right -> Int in
                let length = Swift.min(left.count, right.count)
                if length > 0, let l = left.baseAddress, let r = right.baseAddress {
                    let result = memcmp(l, r, length)
                    if result != 0 { return result < 0 ? -1 : 1 }
                }
                return left.count == right.count ? 0 : (left.count < right.count ? -1 : 1)
            }
        }
        if let result = fast ?? nil { return result }
        for (x, y) in zip(a.utf8, b.utf8) where x != y { return x < y ? -1 : 1 }
        let (left, right) = (a.utf8.count, b.utf8.count)
        return left == right ? 0 : (left < right ? -1 : 1)
    }

    /// A section's name from a key's first value: the string, the value's description,
    /// or the empty string for `nil`.
    static func sectionName(_ key: ControllerSortKey) -> String {
        switch key.values.first {
        case .none, .null: return ""
        case .text(let text): return text
        case .value(let value): return "\(value)"
        }
    }
}
