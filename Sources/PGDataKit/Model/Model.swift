/// The entities a store holds, described from `ManagedObject` subclasses (read through
/// `EntityObject`).
///
/// For example:
///
/// ```swift
/// let model = try Model(entities: [User.self, Post.self])
/// print(model.entity(for: User.self)?.tableName ?? "")  // users
/// ```
///
/// Building the model checks that relationships point at entities of the model, that
/// every to-many relationship has an inverse, that inverses agree, that one-to-one
/// relationships say which side holds the foreign key, that join tables and their columns
/// are unambiguous, and that unique keys name attributes; every problem is reported at
/// once.
public final class Model: Sendable {
    /// The entities, in the order given.
    public let entities: [EntityDescription]
    /// The entities in foreign-key order: an entity comes after those it points to.
    let insertOrder: [EntityDescription]
    /// The join tables of the many-to-many relationships, one per table.
    let joinTables: [ModelJoinTable]
    /// Whether any entity is abstract (a save then checks that it inserts none of
    /// their objects).
    let hasAbstractEntities: Bool
    let byName: [String: EntityDescription]
    private let byClass: [ObjectIdentifier: EntityDescription]

    /// Describes the given classes (`init(entities:)`, in the Context layer, passes its
    /// `ManagedObject` subclasses here).
    ///
    /// - Throws: `ModelError` listing every problem found.
    init(describing classes: [any EntityObject.Type]) throws {
        var problems: [ModelError.Problem] = []
        var entities: [EntityDescription] = []
        for objectClass in classes {
            let entity = EntityDescription(objectClass: objectClass)
            entity.order = entities.count
            entities.append(entity)
        }
        var byName: [String: EntityDescription] = [:]
        var byClass: [ObjectIdentifier: EntityDescription] = [:]
        for entity in entities {
            if byName[entity.name] != nil { problems.append(.duplicateEntity(entity: entity.name)) }
            byName[entity.name] = entity
            byClass[ObjectIdentifier(entity.objectClass)] = entity
            if entity.attributes.isEmpty && entity.relationships.isEmpty {
                problems.append(.noProperties(entity: entity.name))
            }
            for attribute in entity.validatedAttributes {
                for problem in attribute.checks.compactMap(\.problem) {
                    problems.append(.invalidRule(entity: entity.name, attribute: attribute.name, reason: problem))
                }
            }
            for key in entity.uniqueKeys {
                for attribute in key {
                    guard let description = entity.attribute(named: attribute) else {
                        problems.append(.unknownUniqueKeyAttribute(entity: entity.name, attribute: attribute))
                        continue
                    }
                    if description.type.isArray {
                        problems.append(.arrayInUniqueKey(entity: entity.name, attribute: attribute))
                    }
                }
            }
        }
        Model.placeHierarchies(entities, byClass: byClass, problems: &problems)
        Model.resolveDestinations(of: entities, byClass: byClass, byName: byName, problems: &problems)
        // Fill in inverses declared on one side only (an inverse pointing at a
        // superentity is the inverse of its inherited relationship too).
        for entity in entities {
            for relationship in entity.relationships where relationship.inverseName == nil {
                guard let destination = byName[relationship.destinationEntityName] else { continue }
                if let inverse = destination.relationships.first(where: {
                    $0.inverseName == relationship.name
                        && Model.isEntity(entity, kindOf: $0.destinationEntityName, byName: byName)
                }) {
                    relationship.inverseName = inverse.name
                }
            }
        }
        // One-to-one foreign keys and many-to-many join tables (only once the inverses
        // above are sound: the rules read both sides).
        var joinTables: [ModelJoinTable] = []
        if problems.isEmpty {
            joinTables = Model.resolvePairs(entities, byName: byName, problems: &problems)
            Model.copyInheritedRelationships(entities, byName: byName)
        }
        for entity in entities {
            entity.relationshipsResolved()
            let columns = entity.attributes.map(\.columnName) + entity.relationships.compactMap(\.columnName)
            for column in Set(columns).sorted() where columns.filter({ $0 == column }).count > 1 {
                problems.append(.duplicateColumn(entity: entity.name, column: column))
            }
            for reserved in [entity.primaryKeyColumn, entity.versionColumn] + [entity.discriminatorColumn].compactMap(\.self)
            where columns.contains(reserved) {
                problems.append(.reservedColumn(entity: entity.name, column: reserved))
            }
        }
        if !problems.isEmpty { throw ModelError(problems: problems) }
        self.entities = entities
        self.byName = byName
        self.byClass = byClass
        self.insertOrder = Model.sortByDependency(entities)
        self.joinTables = joinTables
        self.hasAbstractEntities = entities.contains(where: \.isAbstract)
    }

    /// The entity with a name.
    public func entity(named name: String) -> EntityDescription? { byName[name] }

    /// The tables the model uses: its entities' tables (one per hierarchy), then its
    /// join tables.
    var tableNames: [String] {
        entities.filter { $0.superentityName == nil }.map(\.tableName) + joinTables.map(\.table.tableName)
    }

    /// Resolves relationship destinations and checks the declared inverses, noting
    /// each problem found.
    private static func resolveDestinations(
        of entities: [EntityDescription], byClass: [ObjectIdentifier: EntityDescription],
        byName: [String: EntityDescription], problems: inout [ModelError.Problem]
    ) {
        for entity in entities {
            for relationship in entity.relationships {
                guard let destination = byClass[ObjectIdentifier(relationship.destinationType)] else {
                    problems.append(
                        .unknownDestination(
                            entity: entity.name, relationship: relationship.name,
                            destination: String(describing: relationship.destinationType)))
                    continue
                }
                relationship.destinationEntityName = destination.name
                relationship.destinationRootName = destination.rootEntityName
                if let inverseName = relationship.inverseName {
                    guard let inverse = destination.relationship(named: inverseName) else {
                        problems.append(
                            .missingInverse(
                                entity: entity.name, relationship: relationship.name, inverse: "\(destination.name).\(inverseName)"))
                        continue
                    }
                    // (An inverse may point at the entity's superentity: the relationship is
                    // inherited, or declared on a sub-entity of the inverse's destination.)
                    if !(byClass[ObjectIdentifier(inverse.destinationType)].map {
                        isEntity(entity, kindOf: $0.name, byName: byName)
                    } ?? false) {
                        problems.append(
                            .inverseDestinationMismatch(
                                entity: entity.name, relationship: relationship.name,
                                inverse: "\(destination.name).\(inverseName)",
                                inverseDestination: String(describing: inverse.destinationType)))
                    }
                    if let back = inverse.inverseName, back != relationship.name {
                        problems.append(
                            .inverseDisagreement(
                                entity: entity.name, relationship: relationship.name,
                                inverse: "\(destination.name).\(inverseName)"))
                    }
                    if inverse === relationship {
                        problems.append(.ownInverse(entity: entity.name, relationship: relationship.name))
                    }
                } else if relationship.isToMany {
                    problems.append(.toManyWithoutInverse(entity: entity.name, relationship: relationship.name))
                }
            }
        }
    }

    /// The entity of a class.
    public func entity(for objectClass: any EntityObject.Type) -> EntityDescription? {
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
