extension Model {
    /// Places each entity in its hierarchy: its superentity is the nearest superclass of
    /// its class among the model's entities; an entity is abstract when its class says so
    /// and its class's superclass does not (a subclass inherits the class property).
    /// A hierarchy shares its root's table, so two of its entities may map one column
    /// only to the same kind of value; a property may not use the discriminator column.
    static func placeHierarchies(
        _ entities: [EntityDescription], byClass: [ObjectIdentifier: EntityDescription],
        problems: inout [ModelError.Problem]
    ) {
        var parent: [String: EntityDescription] = [:]
        var children: [String: [EntityDescription]] = [:]
        for entity in entities {
            guard let superentity = entity.superclasses.lazy.compactMap({ byClass[ObjectIdentifier($0)] }).first else { continue }
            parent[entity.name] = superentity
            children[superentity.name, default: []].append(entity)
        }
        func root(of entity: EntityDescription) -> EntityDescription {
            var current = entity
            // (Class inheritance has no cycles, so this ends.)
            while let up = parent[current.name] { current = up }
            return current
        }
        func isAbstract(_ entity: EntityDescription) -> Bool {
            entity.objectClass.isAbstract && !((entity.superclasses.first as? any EntityObject.Type)?.isAbstract ?? false)
        }
        func concrete(_ entity: EntityDescription) -> [String] {
            (isAbstract(entity) ? [] : [entity.name]) + (children[entity.name] ?? []).flatMap(concrete)
        }
        for entity in entities {
            entity.placeInHierarchy(
                root: root(of: entity), superentity: parent[entity.name],
                subentities: (children[entity.name] ?? []).map(\.name), isAbstract: isAbstract(entity),
                concrete: concrete(entity))
        }
        for entity in entities where parent[entity.name] == nil && children[entity.name] != nil {
            checkSharedColumns(of: entity, children: children, problems: &problems)
        }
    }

    /// Notes a problem for each column two entities of a hierarchy map differently (an
    /// attribute of another type, or an attribute and a foreign key), and for each
    /// property mapped to the discriminator column.
    private static func checkSharedColumns(
        of root: EntityDescription, children: [String: [EntityDescription]], problems: inout [ModelError.Problem]
    ) {
        let family = [root] + children.values.joined().filter { $0.rootEntityName == root.name }.sorted { $0.order < $1.order }
        var kinds: [String: String] = [:]  // column → what the first entity mapping it stores there
        for entity in family {
            let columns =
                entity.attributes.map { ($0.columnName, "attribute \($0.type.rawValue)") }
                + entity.relationships.compactMap { relationship in relationship.columnName.map { ($0, "foreign key") } }
            for (column, kind) in columns {
                if column == root.discriminatorColumn {
                    problems.append(.reservedColumn(entity: entity.name, column: column))
                } else if let known = kinds[column], known != kind {
                    problems.append(.duplicateColumn(entity: entity.name, column: column))
                }
                if kinds[column] == nil { kinds[column] = kind }
            }
        }
    }

    /// The entity's superentity (Core Data's `superentity`); `nil` for a root.
    ///
    /// For example, `model.superentity(of: articleEntity)?.name` is `"Content"`.
    public func superentity(of entity: EntityDescription) -> EntityDescription? {
        entity.superentityName.flatMap { byName[$0] }
    }

    /// The entities that inherit from `entity` directly, in model order (Core Data's
    /// `subentities`).
    public func subentities(of entity: EntityDescription) -> [EntityDescription] {
        entity.subentityNames.compactMap { byName[$0] }
    }

    /// Whether `entity` is `ancestor` or one of its sub-entities, at any depth (Core
    /// Data's `isKindOf(entity:)`): whether a fetch of `ancestor` returns its objects.
    public func entity(_ entity: EntityDescription, isKindOf ancestor: EntityDescription) -> Bool {
        ancestor === byName[ancestor.name] && isEntity(entity, kindOf: ancestor.name)
    }

    /// The entities below `root` in its hierarchy (none for an entity without
    /// sub-entities), in model order: their own properties are columns of its table.
    func descendants(of root: EntityDescription) -> [EntityDescription] {
        guard root.hasSubentities else { return [] }
        return entities.filter { $0 !== root && $0.rootEntityName == root.name }
    }

    /// Whether `entity` is the entity named `ancestor` or one of its sub-entities.
    static func isEntity(
        _ entity: EntityDescription, kindOf ancestor: String, byName: [String: EntityDescription]
    ) -> Bool {
        var current: EntityDescription? = entity
        while let candidate = current {
            if candidate.name == ancestor { return true }
            current = candidate.superentityName.flatMap { byName[$0] }
        }
        return false
    }

    /// Whether `entity` is the entity named `ancestor` or one of its sub-entities.
    func isEntity(_ entity: EntityDescription, kindOf ancestor: String) -> Bool {
        entity.name == ancestor || (entity.superentityName != nil && Self.isEntity(entity, kindOf: ancestor, byName: byName))
    }

    /// The topmost entity above `entity` (by its superentities) that declares a
    /// relationship named `name`: where an inherited relationship was declared; `nil`
    /// when no superentity has it.
    static func declaringSuperentity(
        of entity: EntityDescription, relationship name: String, byName: [String: EntityDescription]
    ) -> EntityDescription? {
        var found: EntityDescription?
        var current = entity.superentityName.flatMap { byName[$0] }
        while let candidate = current, candidate.relationship(named: name) != nil {
            found = candidate
            current = candidate.superentityName.flatMap { byName[$0] }
        }
        return found
    }

    /// Gives each inherited relationship the storage its declaring entity's resolved
    /// (foreign-key column, one-to-one side, join table): a sub-entity's rows are in the
    /// same table, its join rows in the same join table.
    static func copyInheritedRelationships(_ entities: [EntityDescription], byName: [String: EntityDescription]) {
        for entity in entities where entity.superentityName != nil {
            for relationship in entity.relationships {
                guard let declaring = declaringSuperentity(of: entity, relationship: relationship.name, byName: byName),
                    let declared = declaring.relationship(named: relationship.name)
                else { continue }
                relationship.columnName = declared.columnName
                relationship.isOneToOne = declared.isOneToOne
                relationship.joinTable = declared.joinTable
                relationship.inverseName = relationship.inverseName ?? declared.inverseName
            }
        }
    }
}
