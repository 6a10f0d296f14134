import Foundation

/// A fetch request's sort descriptors resolved against an entity: makes the sort key of
/// an object from its values in the context (see `ControllerSortKey` for how keys
/// compare as the SQL order does).
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

    /// No terms: keys made with `ControllerSortKey.position(_:)` keep a given order.
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
            let resolved = try model.resolve(FetchPredicate.KeyPath.dotted(descriptor.key), from: entity)
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
        var builder = ControllerSortKeyBuilder()
        for term in terms {
            let value: (any Sendable)?
            if committed, term.resolved.hops.isEmpty, case .attribute(let attribute) = term.resolved.end,
                let snapshot = object.storage.snapshot, attribute.index < snapshot.count
            {
                value = snapshot[attribute.index].anyValue
            } else if case .toOne = term.resolved.end {
                // SQL orders by the foreign key.
                value = PredicateEvaluator.reach(term.resolved, from: object).object?.objectID.primaryKey
            } else {
                value = PredicateEvaluator.reach(term.resolved, from: object).scalar
            }
            builder.append(value, ascending: term.ascending, caseInsensitive: term.caseInsensitive)
        }
        if let key = object.objectID.primaryKey {
            builder.appendTiebreak(primaryKey: key)
        } else {
            builder.appendTiebreak(temporary: object.objectID.description)
        }
        return builder.key
    }

    /// A section's name from the first value of an object: the string, the value's
    /// description, or the empty string for `nil`.
    func sectionName(of object: ManagedObject) -> String {
        guard let term = terms.first else { return "" }
        switch PredicateEvaluator.reach(term.resolved, from: object).scalar {
        case .none: return ""
        case .some(let text as String): return text
        case .some(let value): return "\(value)"
        }
    }
}
