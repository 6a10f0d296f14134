extension StoreCoordinator {
    /// The foreign keys of an entity's to-one relationships against the delete rules of
    /// their inverses (a mismatch where the database would delete rows the rule keeps,
    /// warnings where it would not carry the rule out for rows the context has not
    /// loaded), and warnings for keys without an index.
    func foreignKeyFindings(
        of entity: EntityDescription, catalog: SchemaCatalog
    ) -> ([SchemaMismatchError.Mismatch], [SchemaWarning]) {
        var mismatches: [SchemaMismatchError.Mismatch] = []
        var warnings: [SchemaWarning] = []
        let table = entity.tableName
        for relationship in entity.ownToOneRelationships {
            guard let column = relationship.columnName, catalog.columns[table]?[column] != nil else { continue }
            if !(catalog.indexLeads[table] ?? []).contains(column) {
                warnings.append(.missingForeignKeyIndex(entity: entity.name, table: table, column: column))
            }
            guard let key = catalog.foreignKeys[table]?[column],
                let destination = model.entity(named: relationship.destinationEntityName),
                let inverse = relationship.inverseName.flatMap(destination.relationship(named:))
            else { continue }
            let rule = "\(destination.name).\(inverse.name)"
            let expected: String
            switch inverse.deleteRule {
            case .cascade: expected = "CASCADE"
            case .nullify: expected = "SET NULL"
            case .deny: expected = "NO ACTION"
            case .noAction: continue
            }
            if key.deleteAction == "CASCADE", expected != "CASCADE" {
                mismatches.append(
                    .wrongDeleteAction(
                        entity: entity.name, table: table, column: column, relationship: rule, expected: expected,
                        actual: key.deleteAction))
            } else if key.deleteAction != expected, !(expected == "NO ACTION" && key.deleteAction == "RESTRICT") {
                warnings.append(
                    .deleteRuleNotEnforced(
                        entity: entity.name, table: table, column: column, relationship: rule, expected: expected,
                        actual: key.deleteAction))
            }
        }
        return (mismatches, warnings)
    }

    /// Attributes whose column's nullability or default does not carry the model's:
    /// an optional attribute over a `NOT NULL` column, a non-optional attribute whose
    /// column has no default where the model implies one (see `impliesColumnDefault`).
    func attributeWarnings(of entity: EntityDescription, catalog: SchemaCatalog) -> [SchemaWarning] {
        var warnings: [SchemaWarning] = []
        for attribute in entity.ownAttributes {
            guard let column = catalog.columns[entity.tableName]?[attribute.columnName] else { continue }
            if attribute.isOptional, !column.isNullable {
                warnings.append(
                    .notNullOptionalAttribute(entity: entity.name, table: entity.tableName, column: attribute.columnName))
            }
            if !attribute.isOptional, !column.hasDefault, entity.impliesColumnDefault(attribute), entity.superentityName == nil {
                warnings.append(.missingDefault(entity: entity.name, table: entity.tableName, column: attribute.columnName))
            }
        }
        return warnings
    }

    /// Join-table key columns that no index starts with (the pair's primary key covers
    /// the first).
    func joinTableWarnings(catalog: SchemaCatalog) -> [SchemaWarning] {
        var warnings: [SchemaWarning] = []
        for joinTable in model.joinTables {
            let table = joinTable.table
            guard let columns = catalog.columns[table.tableName] else { continue }
            for column in [table.sourceColumn, table.destinationColumn]
            where columns[column] != nil && !(catalog.indexLeads[table.tableName] ?? []).contains(column) {
                warnings.append(
                    .missingForeignKeyIndex(entity: joinTable.relationships, table: table.tableName, column: column))
            }
        }
        return warnings
    }
}
