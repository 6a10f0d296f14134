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
                    missingUniqueConstraint, primaryKeyWithoutSequence, missingPrivilege,
                    nullableColumn, wrongDeleteAction, discriminatorRejectsEntity, subentityColumnNotNull
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
            /// The column of a non-optional attribute allows `NULL`: a row holding one could
            /// not be fetched.
            public static let nullableColumn = Code(.nullableColumn)
            /// A foreign key is `ON DELETE CASCADE` while the delete rule of the relationship
            /// on the referenced side is `.nullify` or `.deny`: the database would delete
            /// rows the model keeps. (An action that merely falls short of a rule is a
            /// `SchemaWarning`.)
            public static let wrongDeleteAction = Code(.wrongDeleteAction)
            /// The `CHECK` constraint on a hierarchy's discriminator column does not admit
            /// some of its concrete entities (`columns` lists them): their inserts would fail.
            public static let discriminatorRejectsEntity = Code(.discriminatorRejectsEntity)
            /// A sub-entity's own column is `NOT NULL` without a default: the rows of the
            /// hierarchy's other kinds hold `NULL` there, so their inserts would fail.
            public static let subentityColumnNotNull = Code(.subentityColumnNotNull)

            /// The code's name, such as `missingTable`.
            public var description: String { base.rawValue }
        }

        /// Which mismatch between the model and the schema.
        public let code: Code
        /// One sentence.
        public let description: String
        /// The entity (for a join table: the relationship pair, as in `relationship`).
        public let entity: String?
        /// The relationship pair of a join table (`Post.tags ↔ Tag.posts`, `missingJoinTable`),
        /// or the relationship whose delete rule a foreign key contradicts (`User.posts`,
        /// `wrongDeleteAction`).
        public let relationship: String?
        /// The table.
        public let table: String?
        /// The column (`missingColumn`, `wrongType`, `primaryKeyWithoutSequence`,
        /// `nullableColumn`, `wrongDeleteAction`).
        public let column: String?
        /// The columns (`missingJoinTable`, `missingUniqueConstraint`).
        public let columns: [String]
        /// The column type the attribute needs (`wrongType`), or the `ON DELETE` action
        /// the delete rule needs (`wrongDeleteAction`).
        public let expected: String?
        /// The column's type (`wrongType`), or the foreign key's `ON DELETE` action
        /// (`wrongDeleteAction`).
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

        /// The column of a non-optional attribute allows `NULL`: a row holding one could not
        /// be fetched.
        public static func nullableColumn(entity: String, table: String, column: String) -> Mismatch {
            Mismatch(
                .nullableColumn,
                "column \(table).\(column) of entity \(entity) allows NULL but its attribute is not optional: "
                    + "ALTER TABLE \(table) ALTER COLUMN \(column) SET NOT NULL",
                entity: entity, table: table, column: column)
        }

        /// A foreign key is `ON DELETE CASCADE` while the delete rule of the relationship on
        /// the referenced side is `.nullify` or `.deny`.
        ///
        /// - Parameters:
        ///   - entity: the entity whose table holds the key.
        ///   - table: that table.
        ///   - column: the key's column.
        ///   - relationship: the relationship whose rule applies, as `Entity.name`
        ///     (`User.posts`).
        ///   - expected: the action the rule needs (`SET NULL`).
        ///   - actual: the key's action (`CASCADE`).
        public static func wrongDeleteAction(
            entity: String, table: String, column: String, relationship: String, expected: String, actual: String
        ) -> Mismatch {
            Mismatch(
                .wrongDeleteAction,
                "foreign key \(table).\(column) of entity \(entity) is ON DELETE \(actual), but the delete rule of "
                    + "\(relationship) needs ON DELETE \(expected)",
                entity: entity, relationship: relationship, table: table, column: column, expected: expected,
                actual: actual)
        }

        /// The `CHECK` constraint on a hierarchy's discriminator column does not admit some
        /// of its concrete entities (`entities`, in `columns`): inserting their objects would
        /// fail. `SchemaDiff` writes the constraint again.
        public static func discriminatorRejectsEntity(
            entity: String, table: String, column: String, constraint: String, entities: [String]
        ) -> Mismatch {
            Mismatch(
                .discriminatorRejectsEntity,
                "constraint \(constraint) on \(table).\(column), the discriminator of entity \(entity)'s hierarchy, "
                    + "does not admit \(entities.joined(separator: ", ")): write it again (SchemaDiff does)",
                entity: entity, table: table, column: column, columns: entities, object: constraint)
        }

        /// A sub-entity's own column is `NOT NULL` without a default: inserting an object of
        /// another kind of the hierarchy (which leaves it `NULL`) would fail.
        public static func subentityColumnNotNull(entity: String, table: String, column: String) -> Mismatch {
            Mismatch(
                .subentityColumnNotNull,
                "column \(table).\(column) of sub-entity \(entity) is NOT NULL without a default, but the other kinds of "
                    + "its hierarchy leave it NULL: ALTER TABLE \(table) ALTER COLUMN \(column) DROP NOT NULL",
                entity: entity, table: table, column: column)
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
