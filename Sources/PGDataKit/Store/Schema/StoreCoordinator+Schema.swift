extension StoreCoordinator {
    /// Compares the model with the live schema (in the connection's current schema) and
    /// reports every mismatch at once: missing tables and columns, wrong column types, a
    /// nullable column under a non-optional attribute, missing unique constraints (unique
    /// keys, one-to-one foreign keys, join-table pairs), primary keys without a sequence,
    /// foreign keys whose `ON DELETE` action contradicts a delete rule, and grants the
    /// connection's role lacks (DML on each table, `USAGE` on its key sequence, `SELECT`,
    /// `INSERT` and `DELETE` on each join table).
    ///
    /// What works but is likely a mistake comes back as warnings, each also logged at
    /// `warning` level: a foreign key without an index, a non-optional attribute whose
    /// column has no default, an optional attribute over a `NOT NULL` column, a `.nullify`
    /// relationship whose key is not `ON DELETE SET NULL` (see `SchemaWarning`).
    ///
    /// For example:
    ///
    /// ```swift
    /// let warnings = try manager.coordinator.validateSchema()
    /// print(warnings.map(\.description))
    /// ```
    ///
    /// - Returns: the warnings (empty for a schema `Model.schemaSQL()` made).
    /// - Throws: `SchemaMismatchError`, or `PostgresError`.
    @discardableResult
    public func validateSchema() throws -> [SchemaWarning] {
        let tables = model.tableNames
        let (catalog, sequences, missingGrants) = try pool.withConnection { connection in
            let catalog = try SchemaCatalog.read(tables: tables, on: connection)
            var sequences: [String: Bool] = [:]
            var missingGrants: [SchemaMismatchError.Mismatch] = []
            // (A sub-entity's table is its root's.)
            for entity in model.entities
            where entity.superentityName == nil && catalog.columns[entity.tableName]?[entity.primaryKeyColumn] != nil {
                let table = Connection.quoteIdentifier(entity.tableName)
                let row = try connection.query(
                    """
                    SELECT pg_get_serial_sequence($1, $2),
                           has_sequence_privilege(pg_get_serial_sequence($1, $2), 'USAGE'),
                           has_table_privilege($1, 'SELECT'), has_table_privilege($1, 'INSERT'),
                           has_table_privilege($1, 'UPDATE'), has_table_privilege($1, 'DELETE')
                    """, [table, entity.primaryKeyColumn])[0]
                let sequence = try row.decode(String?.self, at: 0)
                sequences[entity.tableName] = sequence != nil
                for (index, privilege) in ["SELECT", "INSERT", "UPDATE", "DELETE"].enumerated()
                where try !row.decode(Bool.self, at: index + 2) {
                    missingGrants.append(.missingPrivilege(entity: entity.name, object: entity.tableName, privilege: privilege))
                }
                if let sequence, try row.decode(Bool?.self, at: 1) != true {
                    missingGrants.append(.missingPrivilege(entity: entity.name, object: sequence, privilege: "USAGE"))
                }
            }
            missingGrants += try missingJoinTableGrants(existing: Set(catalog.columns.keys), on: connection)
            return (catalog, sequences, missingGrants)
        }
        var mismatches: [SchemaMismatchError.Mismatch] = missingGrants
        var warnings: [SchemaWarning] = []
        for entity in model.entities {
            mismatches += schemaMismatches(of: entity, catalog: catalog, sequences: sequences)
            let (ruleMismatches, ruleWarnings) = foreignKeyFindings(of: entity, catalog: catalog)
            mismatches += ruleMismatches
            warnings += attributeWarnings(of: entity, catalog: catalog) + ruleWarnings
        }
        mismatches += joinTableMismatches(catalog: catalog)
        warnings += joinTableWarnings(catalog: catalog)
        if !mismatches.isEmpty { throw SchemaMismatchError(mismatches: mismatches) }
        for warning in warnings { logger.warning("schema: \(warning)") }
        return warnings
    }
}

extension StoreCoordinator {
    /// How an entity's table differs from the model, from what the schema queries
    /// returned (columns and their types by table, unique column sets by table, whether
    /// each table's primary key has a sequence).
    private func schemaMismatches(
        of entity: EntityDescription, catalog: SchemaCatalog, sequences: [String: Bool]
    ) -> [SchemaMismatchError.Mismatch] {
        guard let tableColumns = catalog.columns[entity.tableName] else {
            return [.missingTable(entity: entity.name, table: entity.tableName)]
        }
        var mismatches: [SchemaMismatchError.Mismatch] = []
        let uniqueSets = catalog.uniqueSets[entity.tableName] ?? []
        func check(_ column: String, accepted: Set<String>, expected: String, notNull: Bool = false) {
            guard let actual = tableColumns[column]?.type else {
                mismatches.append(.missingColumn(entity: entity.name, table: entity.tableName, column: column))
                return
            }
            if notNull, tableColumns[column]?.isNullable == true {
                mismatches.append(.nullableColumn(entity: entity.name, table: entity.tableName, column: column))
            }
            if !accepted.contains(actual) {
                mismatches.append(
                    .wrongType(entity: entity.name, column: "\(entity.tableName).\(column)", expected: expected, actual: actual))
            }
        }
        let integer: Set<String> = ["int8", "int4"]
        // A sub-entity's inherited columns are its superentity's to check, and its own
        // are nullable (the table holds its siblings' rows too).
        let isSubentity = entity.superentityName != nil
        if !isSubentity {
            check(entity.primaryKeyColumn, accepted: integer, expected: "bigint")
            check(entity.versionColumn, accepted: integer, expected: "bigint")
            if let discriminator = entity.discriminatorColumn {
                check(discriminator, accepted: ["text", "varchar"], expected: "text", notNull: true)
                for (constraint, rejected) in catalog.rejectedEntities(
                    table: entity.tableName, column: discriminator, entities: entity.concreteEntityNames)
                {
                    mismatches.append(
                        .discriminatorRejectsEntity(
                            entity: entity.name, table: entity.tableName, column: discriminator, constraint: constraint,
                            entities: rejected))
                }
            }
        }
        for attribute in entity.ownAttributes {
            check(
                attribute.columnName, accepted: attribute.type.acceptedColumnTypes, expected: attribute.type.sqlType,
                notNull: !attribute.isOptional && !isSubentity)
            if isSubentity, let column = tableColumns[attribute.columnName], !column.isNullable, !column.hasDefault {
                mismatches.append(.subentityColumnNotNull(entity: entity.name, table: entity.tableName, column: attribute.columnName))
            }
        }
        for relationship in entity.ownToOneRelationships {
            if let column = relationship.columnName { check(column, accepted: integer, expected: "bigint") }
        }
        if !isSubentity, tableColumns[entity.primaryKeyColumn] != nil, sequences[entity.tableName] == false {
            mismatches.append(
                .primaryKeyWithoutSequence(entity: entity.name, table: entity.tableName, column: entity.primaryKeyColumn))
        }
        for key in entity.uniqueKeys {
            let keyColumns = key.compactMap { entity.attribute(named: $0)?.columnName }
            if !uniqueSets.contains(Set(keyColumns)) {
                mismatches.append(
                    .missingUniqueConstraint(entity: entity.name, table: entity.tableName, columns: keyColumns))
            }
        }
        for column in oneToOneForeignKeys(of: entity) where tableColumns[column] != nil {
            if !uniqueSets.contains([column]) {
                mismatches.append(.missingUniqueConstraint(entity: entity.name, table: entity.tableName, columns: [column]))
            }
        }
        return mismatches
    }
}

extension StoreCoordinator {
    /// The foreign-key columns of an entity's side of one-to-one relationships: each
    /// needs a unique constraint, so a partner has at most one partner.
    private func oneToOneForeignKeys(of entity: EntityDescription) -> [String] {
        entity.toOneRelationships.filter(\.isOneToOne).compactMap(\.columnName)
    }

    /// The grants a save needs on each existing join table: `SELECT`, `INSERT`, `DELETE`
    /// (join rows are never updated).
    private func missingJoinTableGrants(
        existing: Set<String>, on connection: Connection
    ) throws -> [SchemaMismatchError.Mismatch] {
        var missing: [SchemaMismatchError.Mismatch] = []
        for joinTable in model.joinTables where existing.contains(joinTable.table.tableName) {
            let row = try connection.query(
                "SELECT has_table_privilege($1, 'SELECT'), has_table_privilege($1, 'INSERT'), has_table_privilege($1, 'DELETE')",
                [Connection.quoteIdentifier(joinTable.table.tableName)])[0]
            for (index, privilege) in ["SELECT", "INSERT", "DELETE"].enumerated() where try !row.decode(Bool.self, at: index) {
                missing.append(
                    .missingPrivilege(entity: joinTable.relationships, object: joinTable.table.tableName, privilege: privilege))
            }
        }
        return missing
    }

    /// Missing join tables, their missing or mistyped columns, and a missing unique
    /// constraint on the pair of columns (saves insert with `ON CONFLICT DO NOTHING`).
    private func joinTableMismatches(catalog: SchemaCatalog) -> [SchemaMismatchError.Mismatch] {
        var mismatches: [SchemaMismatchError.Mismatch] = []
        for joinTable in model.joinTables {
            let table = joinTable.table
            let pair = [table.sourceColumn, table.destinationColumn]
            guard let tableColumns = catalog.columns[table.tableName] else {
                mismatches.append(.missingJoinTable(relationship: joinTable.relationships, table: table.tableName, columns: pair))
                continue
            }
            for column in pair {
                guard let actual = tableColumns[column]?.type else {
                    mismatches.append(.missingColumn(entity: joinTable.relationships, table: table.tableName, column: column))
                    continue
                }
                if !["int8", "int4"].contains(actual) {
                    mismatches.append(
                        .wrongType(
                            entity: joinTable.relationships, column: "\(table.tableName).\(column)", expected: "bigint",
                            actual: actual))
                }
            }
            if pair.allSatisfy({ tableColumns[$0] != nil }), !(catalog.uniqueSets[table.tableName] ?? []).contains(Set(pair)) {
                mismatches.append(
                    .missingUniqueConstraint(entity: joinTable.relationships, table: table.tableName, columns: pair))
            }
        }
        return mismatches
    }
}
