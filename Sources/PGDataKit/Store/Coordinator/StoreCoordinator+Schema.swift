/// The live schema does not match the model; every mismatch is listed.
///
/// Mismatches of a many-to-many relationship's join table name the relationship pair
/// (`Post.tags ↔ Tag.posts`) where the others name an entity.
///
/// For example:
///
/// ```swift
/// do {
///     try manager.coordinator.validateSchema()
/// } catch let error as SchemaMismatchError {
///     for mismatch in error.mismatches where mismatch.code == .missingPrivilege {
///         print("GRANT \(mismatch.privilege ?? "") ON \(mismatch.object ?? "") TO …")
///     }
/// }
/// ```
public struct SchemaMismatchError: Error, Sendable, DescribedError {
    /// What went wrong, broadly: each mismatch has a code of its own
    /// (`Mismatch.Code`).
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch SchemaMismatchError.Code.schemaMismatch { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case schemaMismatch
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The schema differs from the model; `mismatches` lists how.
        public static let schemaMismatch = Code(.schemaMismatch)

        /// The code's name, such as `schemaMismatch`.
        public var description: String { base.rawValue }
    }

    /// One mismatch between the model and the schema: a `code`, the sentence that says it
    /// (`description`), and the names it is about.
    ///
    /// A struct rather than an enum, so a later version can add codes without breaking a caller's
    /// `switch`; the static functions named like the codes build one, and values compare equal when
    /// code and names are equal.
    public struct Mismatch: Sendable, Hashable, CustomStringConvertible {
        /// Which mismatch between the model and the schema.
        public struct Code: Sendable, Hashable, CustomStringConvertible {
            /// The codes, one case each: codes compare by case and none is made from a string.
            enum Base: String, Sendable {
                case missingTable, missingJoinTable, missingColumn, wrongType,
                    missingUniqueConstraint, primaryKeyWithoutSequence, missingPrivilege
            }

            /// Which code this is.
            let base: Base

            private init(_ base: Base) { self.base = base }

            /// The entity's table does not exist.
            public static let missingTable = Code(.missingTable)
            /// The join table of a many-to-many relationship (`Post.tags ↔ Tag.posts`) does not
            /// exist; it needs the two key columns (`bigint` or `integer`) and a primary key
            /// on the pair.
            public static let missingJoinTable = Code(.missingJoinTable)
            /// A column the model needs does not exist.
            public static let missingColumn = Code(.missingColumn)
            /// A column's type does not fit the attribute.
            public static let wrongType = Code(.wrongType)
            /// A unique key of the model has no unique constraint or index. (For a one-to-one
            /// relationship's foreign key, and for a join table's pair of columns, too.)
            public static let missingUniqueConstraint = Code(.missingUniqueConstraint)
            /// The primary-key column has no sequence to draw new keys from.
            public static let primaryKeyWithoutSequence = Code(.primaryKeyWithoutSequence)
            /// The role lacks a grant the library needs: `SELECT`, `INSERT`, `UPDATE` or `DELETE`
            /// on the table, or `USAGE` on its key sequence (saves draw keys with `nextval`).
            public static let missingPrivilege = Code(.missingPrivilege)

            /// The code's name, such as `missingTable`.
            public var description: String { base.rawValue }
        }

        /// Which mismatch between the model and the schema.
        public let code: Code
        /// One sentence.
        public let description: String
        /// The entity (for a join table: the relationship pair, as in `relationship`).
        public let entity: String?
        /// The relationship pair of a join table (`Post.tags ↔ Tag.posts`, `missingJoinTable`).
        public let relationship: String?
        /// The table.
        public let table: String?
        /// The column (`missingColumn`, `wrongType`, `primaryKeyWithoutSequence`).
        public let column: String?
        /// The columns (`missingJoinTable`, `missingUniqueConstraint`).
        public let columns: [String]
        /// The column type the attribute needs (`wrongType`).
        public let expected: String?
        /// The column's type (`wrongType`).
        public let actual: String?
        /// The table or sequence a grant is missing on (`missingPrivilege`).
        public let object: String?
        /// The missing grant (`missingPrivilege`).
        public let privilege: String?

        private init(
            _ code: Code, _ description: String,
            entity: String? = nil, relationship: String? = nil, table: String? = nil, column: String? = nil,
            columns: [String] = [], expected: String? = nil, actual: String? = nil, object: String? = nil,
            privilege: String? = nil
        ) {
            (self.code, self.description) = (code, description)
            self.entity = entity
            self.relationship = relationship
            self.table = table
            self.column = column
            self.columns = columns
            self.expected = expected
            self.actual = actual
            self.object = object
            self.privilege = privilege
        }

        /// The entity's table does not exist.
        public static func missingTable(entity: String, table: String) -> Mismatch {
            Mismatch(.missingTable, "table \(table) of entity \(entity) does not exist", entity: entity, table: table)
        }

        /// The join table of a many-to-many relationship (`Post.tags ↔ Tag.posts`) does not
        /// exist; it needs the two key columns (`bigint` or `integer`) and a primary key on
        /// the pair.
        public static func missingJoinTable(relationship: String, table: String, columns: [String]) -> Mismatch {
            Mismatch(
                .missingJoinTable,
                "join table \(table) of \(relationship) does not exist: CREATE TABLE \(table) ("
                    + columns.map { "\($0) bigint NOT NULL" }.joined(separator: ", ")
                    + ", PRIMARY KEY (\(columns.joined(separator: ", "))))",
                relationship: relationship, table: table, columns: columns)
        }

        /// A column the model needs does not exist.
        public static func missingColumn(entity: String, table: String, column: String) -> Mismatch {
            Mismatch(
                .missingColumn,
                "column \(table).\(column) of entity \(entity) does not exist",
                entity: entity, table: table, column: column)
        }

        /// A column's type does not fit the attribute.
        public static func wrongType(entity: String, column: String, expected: String, actual: String) -> Mismatch {
            Mismatch(
                .wrongType,
                "column \(column) of entity \(entity) is \(actual), expected \(expected)",
                entity: entity, column: column, expected: expected, actual: actual)
        }

        /// A unique key of the model has no unique constraint or index. (For a one-to-one
        /// relationship's foreign key, and for a join table's pair of columns, too.)
        public static func missingUniqueConstraint(entity: String, table: String, columns: [String]) -> Mismatch {
            Mismatch(
                .missingUniqueConstraint,
                "entity \(entity) has unique key (\(columns.joined(separator: ", "))) but table "
                    + "\(table) has no unique constraint on it",
                entity: entity, table: table, columns: columns)
        }

        /// The primary-key column has no sequence to draw new keys from.
        public static func primaryKeyWithoutSequence(entity: String, table: String, column: String) -> Mismatch {
            Mismatch(
                .primaryKeyWithoutSequence,
                "primary key \(table).\(column) of entity \(entity) has no sequence; declare it "
                    + "GENERATED BY DEFAULT AS IDENTITY or bigserial",
                entity: entity, table: table, column: column)
        }

        /// The role lacks a grant the library needs: `SELECT`, `INSERT`, `UPDATE` or `DELETE` on
        /// the table, or `USAGE` on its key sequence (saves draw keys with `nextval`).
        public static func missingPrivilege(entity: String, object: String, privilege: String) -> Mismatch {
            Mismatch(
                .missingPrivilege,
                "the role lacks \(privilege) on \(object) (entity \(entity)): GRANT \(privilege) "
                    + "ON \(object) TO …",
                entity: entity, object: object, privilege: privilege)
        }
    }

    /// All mismatches.
    public let mismatches: [Mismatch]

    /// What went wrong, broadly: `schemaMismatch`.
    public var code: Code { .schemaMismatch }

    /// One line per mismatch (names only: tables, columns, types, grants).
    public var message: String {
        "the database schema does not match the model (\(mismatches.count) problem(s)):\n"
            + mismatches.map { "- \($0)" }.joined(separator: "\n")
    }

    /// The mismatches' codes, for `debugDescription`.
    package var contextFields: [ErrorContextField?] { [.names("mismatches", mismatches.map(\.code))] }
}

extension StoreCoordinator {
    /// Compares the model with the live schema (in the connection's current schema) and
    /// reports every mismatch at once: missing tables and columns, wrong column types,
    /// missing unique constraints (unique keys, one-to-one foreign keys, join-table
    /// pairs), primary keys without a sequence, and grants the connection's role lacks
    /// (DML on each table, `USAGE` on its key sequence, `SELECT`, `INSERT` and `DELETE`
    /// on each join table).
    ///
    /// - Throws: `SchemaMismatchError`, or `PostgresError`.
    public func validateSchema() throws {
        let tables = model.entities.map(\.tableName) + model.joinTables.map(\.table.tableName)
        let (columns, uniqueSets, sequences, missingGrants) = try pool.withConnection { connection in
            let columnRows = try connection.query(
                """
                SELECT table_name, column_name, udt_name FROM information_schema.columns
                WHERE table_schema = current_schema() AND table_name = ANY($1)
                """, [tables])
            var columns: [String: [String: String]] = [:]
            for row in columnRows {
                columns[try row.decode(String.self, at: 0), default: [:]][try row.decode(String.self, at: 1)] =
                    try row.decode(String.self, at: 2)
            }
            let uniqueRows = try connection.query(
                """
                SELECT t.relname, array_agg(a.attname::text ORDER BY k.ord)
                FROM pg_index i
                JOIN pg_class t ON t.oid = i.indrelid
                JOIN pg_namespace n ON n.oid = t.relnamespace
                CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
                JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
                WHERE i.indisunique AND n.nspname = current_schema() AND t.relname = ANY($1)
                GROUP BY t.relname, i.indexrelid
                """, [tables])
            var uniqueSets: [String: [Set<String>]] = [:]
            for row in uniqueRows {
                uniqueSets[try row.decode(String.self, at: 0), default: []].append(
                    Set(try row.decode([String].self, at: 1)))
            }
            var sequences: [String: Bool] = [:]
            var missingGrants: [SchemaMismatchError.Mismatch] = []
            for entity in model.entities where columns[entity.tableName]?[entity.primaryKeyColumn] != nil {
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
            missingGrants += try missingJoinTableGrants(existing: Set(columns.keys), on: connection)
            return (columns, uniqueSets, sequences, missingGrants)
        }
        var mismatches: [SchemaMismatchError.Mismatch] = missingGrants
        for entity in model.entities {
            mismatches += schemaMismatches(of: entity, columns: columns, uniqueSets: uniqueSets, sequences: sequences)
        }
        mismatches += joinTableMismatches(columns: columns, uniqueSets: uniqueSets)
        if !mismatches.isEmpty { throw SchemaMismatchError(mismatches: mismatches) }
    }
}

extension StoreCoordinator {
    /// How an entity's table differs from the model, from what the schema queries
    /// returned (columns and their types by table, unique column sets by table, whether
    /// each table's primary key has a sequence).
    private func schemaMismatches(
        of entity: EntityDescription, columns: [String: [String: String]], uniqueSets: [String: [Set<String>]],
        sequences: [String: Bool]
    ) -> [SchemaMismatchError.Mismatch] {
        guard let tableColumns = columns[entity.tableName] else {
            return [.missingTable(entity: entity.name, table: entity.tableName)]
        }
        var mismatches: [SchemaMismatchError.Mismatch] = []
        func check(_ column: String, accepted: Set<String>, expected: String) {
            guard let actual = tableColumns[column] else {
                mismatches.append(.missingColumn(entity: entity.name, table: entity.tableName, column: column))
                return
            }
            if !accepted.contains(actual) {
                mismatches.append(
                    .wrongType(entity: entity.name, column: "\(entity.tableName).\(column)", expected: expected, actual: actual))
            }
        }
        let integer: Set<String> = ["int8", "int4"]
        check(entity.primaryKeyColumn, accepted: integer, expected: "bigint")
        check(entity.versionColumn, accepted: integer, expected: "bigint")
        for attribute in entity.attributes {
            check(attribute.columnName, accepted: attribute.type.acceptedColumnTypes, expected: attribute.type.sqlType)
        }
        for relationship in entity.toOneRelationships {
            if let column = relationship.columnName { check(column, accepted: integer, expected: "bigint") }
        }
        if tableColumns[entity.primaryKeyColumn] != nil, sequences[entity.tableName] == false {
            mismatches.append(
                .primaryKeyWithoutSequence(entity: entity.name, table: entity.tableName, column: entity.primaryKeyColumn))
        }
        for key in entity.uniqueKeys {
            let keyColumns = key.compactMap { entity.attribute(named: $0)?.columnName }
            if !(uniqueSets[entity.tableName] ?? []).contains(Set(keyColumns)) {
                mismatches.append(
                    .missingUniqueConstraint(entity: entity.name, table: entity.tableName, columns: keyColumns))
            }
        }
        for column in oneToOneForeignKeys(of: entity) where tableColumns[column] != nil {
            if !(uniqueSets[entity.tableName] ?? []).contains([column]) {
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
    private func joinTableMismatches(
        columns: [String: [String: String]], uniqueSets: [String: [Set<String>]]
    ) -> [SchemaMismatchError.Mismatch] {
        var mismatches: [SchemaMismatchError.Mismatch] = []
        for joinTable in model.joinTables {
            let table = joinTable.table
            let pair = [table.sourceColumn, table.destinationColumn]
            guard let tableColumns = columns[table.tableName] else {
                mismatches.append(.missingJoinTable(relationship: joinTable.relationships, table: table.tableName, columns: pair))
                continue
            }
            for column in pair {
                guard let actual = tableColumns[column] else {
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
            if pair.allSatisfy({ tableColumns[$0] != nil }), !(uniqueSets[table.tableName] ?? []).contains(Set(pair)) {
                mismatches.append(
                    .missingUniqueConstraint(entity: joinTable.relationships, table: table.tableName, columns: pair))
            }
        }
        return mismatches
    }
}
