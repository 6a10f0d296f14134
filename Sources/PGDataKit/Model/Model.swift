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
    private let byName: [String: EntityDescription]
    private let byClass: [ObjectIdentifier: EntityDescription]

    /// Describes the given classes.
    ///
    /// - Throws: `ModelError` listing every problem found.
    public init(entities classes: [ManagedObject.Type]) throws {
        var problems: [ModelError.Problem] = []
        var entities: [EntityDescription] = []
        for objectClass in classes {
            entities.append(EntityDescription(objectClass: objectClass))
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
            for key in entity.uniqueKeys {
                for attribute in key where entity.attribute(named: attribute) == nil {
                    problems.append(.unknownUniqueKeyAttribute(entity: entity.name, attribute: attribute))
                }
            }
        }
        Model.resolveDestinations(of: entities, byClass: byClass, problems: &problems)
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
        // One-to-one foreign keys and many-to-many join tables (only once the inverses
        // above are sound: the rules read both sides).
        var joinTables: [ModelJoinTable] = []
        if problems.isEmpty {
            joinTables = Model.resolvePairs(entities, byName: byName, problems: &problems)
        }
        for entity in entities {
            entity.relationshipsResolved()
            let columns = entity.attributes.map(\.columnName) + entity.relationships.compactMap(\.columnName)
            for column in Set(columns).sorted() where columns.filter({ $0 == column }).count > 1 {
                problems.append(.duplicateColumn(entity: entity.name, column: column))
            }
            for reserved in [entity.primaryKeyColumn, entity.versionColumn] where columns.contains(reserved) {
                problems.append(.reservedColumn(entity: entity.name, column: reserved))
            }
        }
        if !problems.isEmpty { throw ModelError(problems: problems) }
        self.entities = entities
        self.byName = byName
        self.byClass = byClass
        self.insertOrder = Model.sortByDependency(entities)
        self.joinTables = joinTables
    }

    /// The entity with a name.
    public func entity(named name: String) -> EntityDescription? { byName[name] }

    /// Resolves relationship destinations and checks the declared inverses, noting
    /// each problem found.
    private static func resolveDestinations(
        of entities: [EntityDescription], byClass: [ObjectIdentifier: EntityDescription],
        problems: inout [ModelError.Problem]
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
                if let inverseName = relationship.inverseName {
                    guard let inverse = destination.relationship(named: inverseName) else {
                        problems.append(
                            .missingInverse(
                                entity: entity.name, relationship: relationship.name, inverse: "\(destination.name).\(inverseName)"))
                        continue
                    }
                    if inverse.destinationType != entity.objectClass {
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

/// The model declarations are inconsistent; every problem is listed.
///
/// For example:
///
/// ```swift
/// do {
///     _ = try Model(entities: [User.self, Post.self])
/// } catch let error as ModelError {
///     for case .missingInverse(let entity, let relationship, _) in error.problems {
///         print("fix \(entity).\(relationship)")
///     }
/// }
/// ```
public struct ModelError: Error, Sendable, CustomStringConvertible {
    /// One problem of the declarations.
    public enum Problem: Sendable, Hashable, CustomStringConvertible {
        /// Two classes declare the same entity name.
        case duplicateEntity(entity: String)
        /// The entity has no `@Attribute` or `@Relationship` property.
        case noProperties(entity: String)
        /// Several properties map to one column.
        case duplicateColumn(entity: String, column: String)
        /// A property maps to the primary-key or version column.
        case reservedColumn(entity: String, column: String)
        /// A unique key names an attribute the entity does not have.
        case unknownUniqueKeyAttribute(entity: String, attribute: String)
        /// A relationship points at a class that is not an entity of the model.
        case unknownDestination(entity: String, relationship: String, destination: String)
        /// The named inverse (`Entity.relationship`) does not exist.
        case missingInverse(entity: String, relationship: String, inverse: String)
        /// The inverse points at another entity.
        case inverseDestinationMismatch(entity: String, relationship: String, inverse: String, inverseDestination: String)
        /// The two sides name different inverses.
        case inverseDisagreement(entity: String, relationship: String, inverse: String)
        /// A to-many relationship has no inverse.
        case toManyWithoutInverse(entity: String, relationship: String)
        /// A relationship names itself as its inverse.
        case ownInverse(entity: String, relationship: String)
        /// Neither side of a one-to-one relationship (`Entity.relationship` and
        /// `inverse`) names its `column:`, so it is not said which table holds the
        /// foreign key.
        case oneToOneForeignKeyUnspecified(entity: String, relationship: String, inverse: String)
        /// Both sides of a one-to-one relationship name a `column:`; only one may hold
        /// the foreign key.
        case oneToOneForeignKeyOnBothSides(entity: String, relationship: String, inverse: String)
        /// `joinTable:` or `column:` on a to-many relationship whose inverse is to-one
        /// (a one-to-many relationship has no join table; its inverse names the column).
        case joinTableWithoutManyToMany(entity: String, relationship: String)
        /// The two sides of a many-to-many relationship name different join tables.
        case joinTableDisagreement(entity: String, relationship: String, inverse: String, tables: [String])
        /// Both columns of a join table have the same name (a relationship between
        /// objects of one entity needs `column:` on both sides).
        case joinColumnsCollide(entity: String, relationship: String, table: String, column: String)
        /// Several many-to-many relationships (each as `Entity.relationship`) use one join
        /// table; name the others' tables with `joinTable:`.
        case joinTableShared(table: String, relationships: [String])

        /// One sentence.
        public var description: String {
            switch self {
            case .duplicateEntity(let entity):
                return "entity \(entity) is declared twice"
            case .noProperties(let entity):
                return "entity \(entity) declares no @Attribute or @Relationship properties"
            case .duplicateColumn(let entity, let column):
                return "entity \(entity) maps several properties to column \(column)"
            case .reservedColumn(let entity, let column):
                return "entity \(entity): column \(column) is the primary key or version column; "
                    + "choose another column for the property"
            case .unknownUniqueKeyAttribute(let entity, let attribute):
                return "entity \(entity): unique key names unknown attribute \(attribute)"
            case .unknownDestination(let entity, let relationship, let destination):
                return "\(entity).\(relationship) points at \(destination), which is not an entity of the model"
            case .missingInverse(let entity, let relationship, let inverse):
                return "\(entity).\(relationship): inverse \(inverse) does not exist"
            case .inverseDestinationMismatch(let entity, let relationship, let inverse, let destination):
                return "\(entity).\(relationship): inverse \(inverse) points at \(destination), not \(entity)"
            case .inverseDisagreement(let entity, let relationship, let inverse):
                return "\(entity).\(relationship) and \(inverse) disagree about their inverse"
            case .toManyWithoutInverse(let entity, let relationship):
                return "\(entity).\(relationship): a to-many relationship needs an inverse (a to-one relationship "
                    + "holding the foreign key, or a to-many relationship for many-to-many)"
            case .ownInverse(let entity, let relationship):
                return "\(entity).\(relationship) names itself as its inverse; declare two relationships"
            case .oneToOneForeignKeyUnspecified(let entity, let relationship, let inverse):
                return "\(entity).\(relationship) and \(inverse) are one-to-one: give column: on the side whose "
                    + "table holds the foreign key"
            case .oneToOneForeignKeyOnBothSides(let entity, let relationship, let inverse):
                return "\(entity).\(relationship) and \(inverse) are one-to-one and both name a column: only one "
                    + "side holds the foreign key; remove column: from the other"
            case .joinTableWithoutManyToMany(let entity, let relationship):
                return "\(entity).\(relationship): joinTable: and column: are for many-to-many relationships; "
                    + "its inverse is to-one, so the inverse's foreign key holds it"
            case .joinTableDisagreement(let entity, let relationship, let inverse, let tables):
                return "\(entity).\(relationship) and \(inverse) name different join tables: "
                    + tables.joined(separator: ", ")
            case .joinColumnsCollide(let entity, let relationship, let table, let column):
                return "\(entity).\(relationship): both columns of join table \(table) are named \(column); "
                    + "name them with column: on both sides"
            case .joinTableShared(let table, let relationships):
                return "join table \(table) is used by " + relationships.joined(separator: " and ")
                    + "; name the others' tables with joinTable:"
            }
        }
    }

    /// Every problem found.
    public let problems: [Problem]

    /// All problems, one per line.
    public var description: String {
        "the model is invalid:\n" + problems.map { "- \($0)" }.joined(separator: "\n")
    }
}
