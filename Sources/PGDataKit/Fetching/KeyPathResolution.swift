/// A key path resolved against the model: the relationships it walks and where it ends.
struct ResolvedKeyPath {
    /// One step through a relationship.
    struct Hop {
        let relationship: RelationshipDescription
        let source: EntityDescription
        let destination: EntityDescription
    }

    /// What the path ends at.
    enum End {
        /// An attribute of the last entity.
        case attribute(AttributeDescription)
        /// A to-one relationship that holds a foreign key, itself (compared with objects
        /// or `nil`); the side of a one-to-one relationship without the key ends in
        /// `.object` after its hop instead.
        case toOne(RelationshipDescription)
        /// The number of objects of the last (to-many) hop.
        case count
        /// The object the hops reach: the object itself for `SELF` (no hops), or each
        /// related object when the last hop is to-many.
        case object
    }

    let hops: [Hop]
    let end: End
    let path: FetchPredicate.KeyPath

    /// The first hop through a to-many relationship, if any.
    var toManyIndex: Int? { hops.firstIndex { $0.relationship.isToMany } }

    /// The attribute type at the end, if the path ends at an attribute.
    var attribute: AttributeDescription? {
        if case .attribute(let attribute) = end { return attribute }
        return nil
    }

    /// The entity whose objects an `.object` end reaches: the last hop's destination, or
    /// `root` without hops.
    func reachedEntity(from root: EntityDescription) -> EntityDescription {
        hops.last?.destination ?? root
    }
}

extension Model {
    /// Resolves a key path from an entity, or throws a `FetchPredicateError` naming the key
    /// that does not exist and where it stood.
    ///
    /// With `allowingObjects`, the empty key path (`SELF`) reaches the object itself and
    /// a key path ending at a to-many relationship reaches its objects (`.object`);
    /// otherwise both are errors. With `counting`, the path must end at a to-many
    /// relationship (`.count`).
    func resolve(
        _ path: FetchPredicate.KeyPath, from entity: EntityDescription, counting: Bool = false,
        allowingObjects: Bool = false, format: String? = nil
    ) throws -> ResolvedKeyPath {
        var current = entity
        var hops: [ResolvedKeyPath.Hop] = []
        let components = path.components
        guard !components.isEmpty else {
            if allowingObjects && !counting { return ResolvedKeyPath(hops: [], end: .object, path: path) }
            throw FetchPredicateError(message: "empty key path", position: path.position, format: format)
        }
        for (index, name) in components.enumerated() {
            let isLast = index == components.count - 1
            if let attribute = current.attribute(named: name) {
                guard isLast, !counting else {
                    throw FetchPredicateError(
                        message: "\(current.name).\(name) is an attribute; it has no key \(components[(index + 1)...].joined(separator: "."))"
                            + (counting ? " (@count needs a to-many relationship)" : ""),
                        position: path.position, format: format)
                }
                return ResolvedKeyPath(hops: hops, end: .attribute(attribute), path: path)
            }
            guard let relationship = current.relationship(named: name) else {
                let known = (current.attributes.map(\.name) + current.relationships.map(\.name)).sorted()
                throw FetchPredicateError(
                    message: "\(current.name) has no key \"\(name)\" (expected one of: \(known.joined(separator: ", ")))",
                    position: path.position, format: format)
            }
            guard let destination = self.entity(named: relationship.destinationEntityName) else {
                throw FetchPredicateError(message: "unknown entity \(relationship.destinationEntityName)", position: path.position, format: format)
            }
            hops.append(ResolvedKeyPath.Hop(relationship: relationship, source: current, destination: destination))
            if isLast {
                if counting {
                    guard relationship.isToMany else {
                        throw FetchPredicateError(
                            message: "@count needs a to-many relationship; \(current.name).\(name) is to-one",
                            position: path.position, format: format)
                    }
                    return ResolvedKeyPath(hops: hops, end: .count, path: path)
                }
                if relationship.isToMany && allowingObjects {
                    return ResolvedKeyPath(hops: hops, end: .object, path: path)
                }
                if relationship.isToMany {
                    throw FetchPredicateError(
                        message: "\(current.name).\(name) is a to-many relationship: compare its objects' keys "
                            + "(\(name).<key>) with ANY/ALL/NONE, or use \(name).@count",
                        position: path.position, format: format)
                }
                if relationship.columnName == nil {
                    // One-to-one, the partner holds the key: reach the partner itself.
                    return ResolvedKeyPath(hops: hops, end: .object, path: path)
                }
                hops.removeLast()
                return ResolvedKeyPath(hops: hops, end: .toOne(relationship), path: path)
            }
            current = destination
        }
        throw FetchPredicateError(message: "cannot resolve \(path)", position: path.position, format: format)
    }
}
