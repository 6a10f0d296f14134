extension Model {
    /// The join-table name two tables get by convention: their names sorted by code
    /// point and joined with `_` (`posts` and `tags` → `posts_tags`).
    public static func conventionalJoinTableName(_ first: String, _ second: String) -> String {
        [first, second].sorted { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) }
            .joined(separator: "_")
    }

    /// The join-table column that holds an entity's keys by convention:
    /// `<snake_case entity name>_id` (`Post` → `post_id`, `BlogPost` → `blog_post_id`).
    public static func conventionalJoinColumnName(forEntityNamed entityName: String) -> String {
        Naming.snakeCase(entityName) + "_id"
    }

    /// Settles the storage of relationship pairs whose inverses are resolved: which side
    /// of a one-to-one relationship holds the foreign key (the side declared with
    /// `column:`; the other side's `columnName` becomes `nil`), and the join table of each
    /// many-to-many relationship (set on both sides).
    ///
    /// - Returns: the model's join tables, one per table, in declaration order.
    static func resolvePairs(
        _ entities: [EntityDescription], byName: [String: EntityDescription], problems: inout [ModelError.Problem]
    ) -> [ModelJoinTable] {
        var joinTables: [ModelJoinTable] = []
        var users: [String: [String]] = [:]  // join table → "Entity.relationship" of the pairs using it
        var done: Set<String> = []
        for entity in entities {
            for relationship in entity.relationships {
                let label = "\(entity.name).\(relationship.name)"
                // (An inherited relationship takes its declaring entity's storage:
                // `copyInheritedRelationships`.)
                if done.contains(label) || declaringSuperentity(of: entity, relationship: relationship.name, byName: byName) != nil {
                    continue
                }
                guard let inverseName = relationship.inverseName,
                    let destination = byName[relationship.destinationEntityName],
                    let inverse = destination.relationship(named: inverseName)
                else {
                    if relationship.isToMany && (relationship.declaredJoinTable != nil || relationship.declaredColumn != nil) {
                        problems.append(.joinTableWithoutManyToMany(entity: entity.name, relationship: relationship.name))
                    }
                    continue
                }
                let inverseLabel = "\(destination.name).\(inverse.name)"
                done.insert(label)
                done.insert(inverseLabel)
                switch (relationship.isToMany, inverse.isToMany) {
                case (true, true):
                    guard
                        let table = joinTable(
                            relationship, of: entity, inverse, of: destination, problems: &problems)
                    else { continue }
                    relationship.joinTable = table
                    inverse.joinTable = table.inverted
                    if users[table.tableName] == nil {
                        joinTables.append(
                            ModelJoinTable(
                                table: table, relationships: "\(label) ↔ \(inverseLabel)", sourceEntity: entity.name,
                                destinationEntity: destination.name))
                    }
                    users[table.tableName, default: []].append(label)
                case (false, false):
                    relationship.isOneToOne = true
                    inverse.isOneToOne = true
                    switch (relationship.declaredColumn, inverse.declaredColumn) {
                    case (nil, nil):
                        problems.append(
                            .oneToOneForeignKeyUnspecified(
                                entity: entity.name, relationship: relationship.name, inverse: inverseLabel))
                    case (.some, .some):
                        problems.append(
                            .oneToOneForeignKeyOnBothSides(
                                entity: entity.name, relationship: relationship.name, inverse: inverseLabel))
                    case (.some, nil):
                        inverse.columnName = nil
                    case (nil, .some):
                        relationship.columnName = nil
                    }
                case (true, false), (false, true):
                    for (side, owner) in [(relationship, entity), (inverse, destination)]
                    where side.isToMany && (side.declaredJoinTable != nil || side.declaredColumn != nil) {
                        problems.append(.joinTableWithoutManyToMany(entity: owner.name, relationship: side.name))
                    }
                }
            }
        }
        for (table, labels) in users.sorted(by: { $0.key < $1.key }) where labels.count > 1 {
            problems.append(.joinTableShared(table: table, relationships: labels))
        }
        return joinTables
    }

    /// The join table of a many-to-many pair, seen from `relationship`; `nil` (with a
    /// problem recorded) when the two sides disagree or the columns collide.
    private static func joinTable(
        _ relationship: RelationshipDescription, of entity: EntityDescription, _ inverse: RelationshipDescription,
        of destination: EntityDescription, problems: inout [ModelError.Problem]
    ) -> JoinTableDescription? {
        let inverseLabel = "\(destination.name).\(inverse.name)"
        let tableName: String
        switch (relationship.declaredJoinTable, inverse.declaredJoinTable) {
        case (let mine?, let theirs?) where mine != theirs:
            problems.append(
                .joinTableDisagreement(
                    entity: entity.name, relationship: relationship.name, inverse: inverseLabel, tables: [mine, theirs]))
            return nil
        case (let declared?, _), (nil, let declared?):
            tableName = declared
        case (nil, nil):
            tableName = conventionalJoinTableName(entity.tableName, destination.tableName)
        }
        // Each side's `column:` holds the keys of the objects it points at.
        let destinationColumn = relationship.declaredColumn ?? conventionalJoinColumnName(forEntityNamed: destination.name)
        let sourceColumn = inverse.declaredColumn ?? conventionalJoinColumnName(forEntityNamed: entity.name)
        guard destinationColumn != sourceColumn else {
            problems.append(
                .joinColumnsCollide(
                    entity: entity.name, relationship: relationship.name, table: tableName, column: sourceColumn))
            return nil
        }
        return JoinTableDescription(tableName: tableName, sourceColumn: sourceColumn, destinationColumn: destinationColumn)
    }
}
