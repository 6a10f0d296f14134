/// The entities a store holds, described from `ManagedObject` subclasses.
///
/// For example:
///
/// ```swift
/// let model = try Model(entities: [User.self, Post.self])
/// print(model.entity(for: User.self)?.tableName ?? "")  // users
/// ```
///
/// Building the model checks that relationships point at entities of the model, that
/// every to-many relationship has a to-one inverse, that inverses agree, and that unique
/// keys name attributes; every problem is reported at once.
public final class Model: Sendable {
    /// The entities, in the order given.
    public let entities: [EntityDescription]
    /// The entities in foreign-key order: an entity comes after those it points to.
    let insertOrder: [EntityDescription]
    private let byName: [String: EntityDescription]
    private let byClass: [ObjectIdentifier: EntityDescription]

    /// Describes the given classes.
    ///
    /// - Throws: `ModelError` listing every problem found.
    public init(entities classes: [ManagedObject.Type]) throws {
        var problems: [String] = []
        var entities: [EntityDescription] = []
        for objectClass in classes {
            entities.append(EntityDescription(objectClass: objectClass))
        }
        var byName: [String: EntityDescription] = [:]
        var byClass: [ObjectIdentifier: EntityDescription] = [:]
        for entity in entities {
            if byName[entity.name] != nil { problems.append("entity \(entity.name) is declared twice") }
            byName[entity.name] = entity
            byClass[ObjectIdentifier(entity.objectClass)] = entity
            if entity.attributes.isEmpty && entity.relationships.isEmpty {
                problems.append("entity \(entity.name) declares no @Attribute or @Relationship properties")
            }
            let columns = entity.attributes.map(\.columnName) + entity.relationships.compactMap(\.columnName)
            for column in Set(columns) where columns.filter({ $0 == column }).count > 1 {
                problems.append("entity \(entity.name) maps several properties to column \(column)")
            }
            for reserved in [entity.primaryKeyColumn, entity.versionColumn] where columns.contains(reserved) {
                problems.append(
                    "entity \(entity.name): column \(reserved) is the primary key or version column; "
                        + "choose another column for the property")
            }
            for key in entity.uniqueKeys {
                for attribute in key where entity.attribute(named: attribute) == nil {
                    problems.append("entity \(entity.name): unique key names unknown attribute \(attribute)")
                }
            }
        }
        // Resolve relationship destinations and inverses.
        for entity in entities {
            for relationship in entity.relationships {
                guard let destination = byClass[ObjectIdentifier(relationship.destinationType)] else {
                    problems.append(
                        "\(entity.name).\(relationship.name) points at \(relationship.destinationType), "
                            + "which is not an entity of the model")
                    continue
                }
                relationship.destinationEntityName = destination.name
                if let inverseName = relationship.inverseName {
                    guard let inverse = destination.relationship(named: inverseName) else {
                        problems.append(
                            "\(entity.name).\(relationship.name): inverse \(destination.name).\(inverseName) does not exist")
                        continue
                    }
                    if inverse.destinationType != entity.objectClass {
                        problems.append(
                            "\(entity.name).\(relationship.name): inverse \(destination.name).\(inverseName) "
                                + "points at \(inverse.destinationType), not \(entity.name)")
                    }
                    if let back = inverse.inverseName, back != relationship.name {
                        problems.append(
                            "\(entity.name).\(relationship.name) and \(destination.name).\(inverseName) "
                                + "disagree about their inverse")
                    }
                    if relationship.isToMany && inverse.isToMany {
                        problems.append(
                            "\(entity.name).\(relationship.name): many-to-many relationships are not supported; "
                                + "use a join entity")
                    }
                    if !relationship.isToMany && !inverse.isToMany {
                        problems.append(
                            "\(entity.name).\(relationship.name): one-to-one relationships with an inverse are "
                                + "not supported yet; declare only one side")
                    }
                } else if relationship.isToMany {
                    problems.append(
                        "\(entity.name).\(relationship.name): a to-many relationship needs the inverse to-one "
                            + "relationship that holds the foreign key")
                }
            }
        }
        // Fill in inverses declared on one side only.
        for entity in entities {
            for relationship in entity.relationships where relationship.inverseName == nil {
                guard let destination = byName[relationship.destinationEntityName] else { continue }
                if let inverse = destination.relationships.first(where: {
                    $0.inverseName == relationship.name && $0.destinationEntityName == entity.name
                }) {
                    relationship.inverseName = inverse.name
                }
            }
        }
        if !problems.isEmpty { throw ModelError(problems: problems) }
        self.entities = entities
        self.byName = byName
        self.byClass = byClass
        self.insertOrder = Model.sortByDependency(entities)
    }

    /// The entity with a name.
    public func entity(named name: String) -> EntityDescription? { byName[name] }

    /// The entity of a class.
    public func entity(for objectClass: ManagedObject.Type) -> EntityDescription? {
        byClass[ObjectIdentifier(objectClass)]
    }

    private static func sortByDependency(_ entities: [EntityDescription]) -> [EntityDescription] {
        var ordered: [EntityDescription] = []
        var visiting: Set<String> = []
        var done: Set<String> = []
        let byName = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        func visit(_ entity: EntityDescription) {
            if done.contains(entity.name) || visiting.contains(entity.name) { return }
            visiting.insert(entity.name)
            for relationship in entity.toOneRelationships where relationship.destinationEntityName != entity.name {
                if let destination = byName[relationship.destinationEntityName] { visit(destination) }
            }
            visiting.remove(entity.name)
            done.insert(entity.name)
            ordered.append(entity)
        }
        entities.forEach(visit)
        return ordered
    }
}

/// The model declarations are inconsistent.
public struct ModelError: Error, Sendable, CustomStringConvertible {
    /// Every problem found, one sentence each.
    public var problems: [String]

    /// All problems, one per line.
    public var description: String {
        "the model is invalid:\n" + problems.map { "- " + $0 }.joined(separator: "\n")
    }
}
