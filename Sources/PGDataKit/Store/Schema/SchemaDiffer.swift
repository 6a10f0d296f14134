/// Compares a model's schema plan with the live catalog, table by table, and says what
/// would make them agree (`SchemaDiff`).
struct SchemaDiffer {
    typealias Change = SchemaDiff.Change
    typealias Table = SchemaDefinition.Table
    typealias Column = SchemaDefinition.Column

    let definition: SchemaDefinition
    let catalog: SchemaCatalog

    func changes() -> [Change] {
        var changes: [Change] = []
        var existing = Set(definition.tables.map(\.name).filter { catalog.columns[$0] != nil })
        var deferred: [Change] = []
        for table in definition.tables where catalog.columns[table.name] == nil {
            existing.insert(table.name)
            let inline = table.foreignKeys.filter { $0.columns.count == 1 && existing.contains($0.referencedTable) }
            var sql = definition.createTable(table, inline: inline)
            for index in table.indexes { sql += "\n" + Self.createIndex(index, on: table.name) }
            changes.append(Change(isAdditive: true, table: table.name, description: "new table \(table.name)", sql: sql))
            for foreignKey in table.foreignKeys where !inline.contains(foreignKey) {
                deferred.append(addForeignKey(foreignKey, to: table.name))
            }
        }
        changes += deferred
        for table in definition.tables {
            guard let live = catalog.columns[table.name] else { continue }
            let columnDiff = columnChanges(of: table, live: live)
            changes += columnDiff.changes + constraintChanges(of: table, columns: Set(live.keys).union(columnDiff.added))
        }
        return changes
    }

    /// New, renamed, retyped, dropped columns and changed nullability or defaults; and
    /// the columns the additive changes add.
    private func columnChanges(
        of table: Table, live: [String: SchemaCatalog.Column]
    ) -> (changes: [Change], added: Set<String>) {
        let name = SchemaName.quoted(table.name)
        var changes: [Change] = []
        var added: Set<String> = []
        var unknown = live.keys.filter { key in !table.columns.contains { $0.name == key } }.sorted()
        for column in table.columns {
            let quoted = SchemaName.quoted(column.name)
            guard let found = live[column.name] else {
                let foreignKey = table.foreignKeys.first { $0.columns == [column.name] }
                let add = "ALTER TABLE \(name) ADD COLUMN \(SchemaDefinition.columnDefinition(column, foreignKey: foreignKey));"
                if let index = unknown.firstIndex(where: { column.acceptedTypes.contains(live[$0]?.type ?? "") }) {
                    let old = unknown.remove(at: index)
                    changes.append(
                        Change(
                            isAdditive: false, table: table.name,
                            description: "column \(table.name).\(column.name) is missing and \(old) is not in the model: "
                                + "a rename keeps the values; otherwise add the new column and drop the old one",
                            sql: "ALTER TABLE \(name) RENAME COLUMN \(SchemaName.quoted(old)) TO \(quoted);\n"
                                + "-- or:\n\(add)\nALTER TABLE \(name) DROP COLUMN \(SchemaName.quoted(old));"))
                } else if !column.isNullable && column.defaultExpression == nil {
                    var nullable = column
                    nullable.isNullable = true
                    changes.append(
                        Change(
                            isAdditive: false, table: table.name,
                            description: "column \(table.name).\(column.name) is new and NOT NULL with no default: "
                                + "give existing rows a value, then require it",
                            sql: "ALTER TABLE \(name) ADD COLUMN "
                                + "\(SchemaDefinition.columnDefinition(nullable, foreignKey: foreignKey));\n"
                                + "UPDATE \(name) SET \(quoted) = … WHERE \(quoted) IS NULL;\n"
                                + "ALTER TABLE \(name) ALTER COLUMN \(quoted) SET NOT NULL;"))
                } else {
                    added.insert(column.name)
                    changes.append(
                        Change(isAdditive: true, table: table.name, description: "new column \(table.name).\(column.name)", sql: add))
                }
                continue
            }
            changes += differences(of: column, in: table, found: found)
        }
        for old in unknown {
            changes.append(
                Change(
                    isAdditive: false, table: table.name,
                    description: "column \(table.name).\(old) is not in the model: drop it once nothing reads it",
                    sql: "ALTER TABLE \(name) DROP COLUMN \(SchemaName.quoted(old));"))
        }
        return (changes, added)
    }

    /// How an existing column differs: type, nullability, default.
    private func differences(of column: Column, in table: Table, found: SchemaCatalog.Column) -> [Change] {
        let (name, quoted) = (SchemaName.quoted(table.name), SchemaName.quoted(column.name))
        let place = "\(table.name).\(column.name)"
        var changes: [Change] = []
        if !column.acceptedTypes.contains(found.type) {
            changes.append(
                Change(
                    isAdditive: false, table: table.name,
                    description: "column \(place) is \(found.type), the model needs \(column.type): converting "
                        + "existing values may fail or lose precision",
                    sql: "ALTER TABLE \(name) ALTER COLUMN \(quoted) TYPE \(column.type) USING \(quoted)::\(column.type);"))
        }
        if !column.isNullable && found.isNullable {
            let fill = column.defaultExpression ?? "…"
            changes.append(
                Change(
                    isAdditive: false, table: table.name,
                    description: "column \(place) allows NULL but its attribute is not optional: give the rows "
                        + "holding NULL a value, then require it",
                    sql: "UPDATE \(name) SET \(quoted) = \(fill) WHERE \(quoted) IS NULL;\n"
                        + "ALTER TABLE \(name) ALTER COLUMN \(quoted) SET NOT NULL;"))
        } else if column.isNullable && !found.isNullable {
            changes.append(
                Change(
                    isAdditive: true, table: table.name, description: "column \(place) is optional now",
                    sql: "ALTER TABLE \(name) ALTER COLUMN \(quoted) DROP NOT NULL;"))
        }
        if let expression = column.defaultExpression, !found.hasDefault {
            changes.append(
                Change(
                    isAdditive: true, table: table.name, description: "column \(place) gets its default",
                    sql: "ALTER TABLE \(name) ALTER COLUMN \(quoted) SET DEFAULT \(expression);"))
        }
        return changes
    }

    /// Missing unique constraints, foreign keys (on existing columns; a new column brings
    /// its own), indexes; foreign keys whose `ON DELETE` differs. Only over `columns`
    /// (those there, and those the additive changes add): one waiting for a decision
    /// gets its constraints once it is there.
    private func constraintChanges(of table: Table, columns: Set<String>) -> [Change] {
        let name = SchemaName.quoted(table.name)
        var changes: [Change] = []
        let uniqueSets = catalog.uniqueSets[table.name] ?? []
        for constraint in [table.primaryKey] + table.uniqueConstraints
        where !uniqueSets.contains(Set(constraint.columns)) && constraint.columns.allSatisfy(columns.contains) {
            let isPrimary = constraint == table.primaryKey
            changes.append(
                Change(
                    isAdditive: true, table: table.name,
                    description: "\(isPrimary ? "primary" : "unique") key (\(constraint.columns.joined(separator: ", "))) "
                        + "on \(table.name) (fails if existing rows repeat a value)",
                    sql: "ALTER TABLE \(name) ADD CONSTRAINT \(SchemaName.quoted(constraint.name)) "
                        + "\(isPrimary ? "PRIMARY KEY" : "UNIQUE") (\(SchemaDefinition.list(constraint.columns)));"))
        }
        for foreignKey in table.foreignKeys {
            // (A column added here brings its key with it.)
            guard let column = foreignKey.columns.first, catalog.columns[table.name]?[column] != nil else { continue }
            guard let found = catalog.foreignKeys[table.name]?[column] else {
                changes.append(addForeignKey(foreignKey, to: table.name))
                continue
            }
            if found.deleteAction != foreignKey.onDelete.rawValue {
                changes.append(
                    Change(
                        isAdditive: false, table: table.name,
                        description: "foreign key \(table.name).\(column) is ON DELETE \(found.deleteAction), the delete "
                            + "rule needs ON DELETE \(foreignKey.onDelete.rawValue): replacing it changes what deletes do",
                        sql: "ALTER TABLE \(name) DROP CONSTRAINT \(SchemaName.quoted(found.name));\n"
                            + "ALTER TABLE \(name) ADD CONSTRAINT \(SchemaName.quoted(foreignKey.name)) FOREIGN KEY "
                            + "(\(SchemaDefinition.list(foreignKey.columns))) \(SchemaDefinition.references(foreignKey));"))
            }
        }
        for column in table.columns where column.check != nil && catalog.columns[table.name]?[column.name] != nil {
            for (constraint, rejected) in catalog.rejectedEntities(
                table: table.name, column: column.name, entities: column.admittedValues)
            {
                changes.append(
                    Change(
                        isAdditive: true, table: table.name,
                        description: "the check of \(table.name).\(column.name) does not admit "
                            + "\(rejected.joined(separator: ", ")): written again",
                        sql: "ALTER TABLE \(name) DROP CONSTRAINT \(SchemaName.quoted(constraint));\n"
                            + "ALTER TABLE \(name) ADD CONSTRAINT \(SchemaName.quoted(constraint)) CHECK (\(column.check ?? "true"));"))
            }
        }
        for index in table.indexes where index.columns.allSatisfy(columns.contains) {
            guard let lead = index.columns.first, !(catalog.indexLeads[table.name] ?? []).contains(lead) else { continue }
            changes.append(
                Change(
                    isAdditive: true, table: table.name, description: "index on \(table.name).\(lead)",
                    sql: Self.createIndex(index, on: table.name)))
        }
        return changes
    }

    private func addForeignKey(_ foreignKey: SchemaDefinition.ForeignKey, to table: String) -> Change {
        Change(
            isAdditive: true, table: table,
            description: "foreign key \(table).\(foreignKey.columns.joined(separator: ", ")) → \(foreignKey.referencedTable)",
            sql: "ALTER TABLE \(SchemaName.quoted(table)) ADD CONSTRAINT \(SchemaName.quoted(foreignKey.name)) "
                + "FOREIGN KEY (\(SchemaDefinition.list(foreignKey.columns))) \(SchemaDefinition.references(foreignKey));")
    }

    private static func createIndex(_ index: SchemaDefinition.Index, on table: String) -> String {
        "CREATE INDEX \(SchemaName.quoted(index.name)) ON \(SchemaName.quoted(table)) (\(SchemaDefinition.list(index.columns)));"
    }
}
