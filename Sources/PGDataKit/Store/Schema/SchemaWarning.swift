/// Something in the live schema that works with the model but is likely a mistake: the
/// schema check (`StoreCoordinator.validateSchema()`) logs each one as a warning and
/// returns them; none stops a coordinator.
///
/// For example:
///
/// ```swift
/// for warning in try manager.coordinator.validateSchema()
/// where warning.code == .missingForeignKeyIndex {
///     print("CREATE INDEX ON \(warning.table) (\(warning.column))")
/// }
/// ```
public struct SchemaWarning: Sendable, Hashable, CustomStringConvertible {
    /// Which warning.
    ///
    /// A struct rather than an enum, so a later version can add codes without breaking a
    /// caller's `switch`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case missingForeignKeyIndex, missingDefault, notNullOptionalAttribute, deleteRuleNotEnforced
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// No index starts with a foreign-key column (of a to-one relationship, or the
        /// second column of a join table): deleting a referenced row and reading the
        /// to-many side scan the table.
        public static let missingForeignKeyIndex = Code(.missingForeignKeyIndex)
        /// A non-optional attribute outside every unique key has a default in the model but
        /// its column has none: rows inserted by other SQL, and a migration adding the
        /// column to existing rows, have no value to take.
        public static let missingDefault = Code(.missingDefault)
        /// An optional attribute's column is `NOT NULL`: saving `nil` fails.
        public static let notNullOptionalAttribute = Code(.notNullOptionalAttribute)
        /// A foreign key's `ON DELETE` action does not carry out the delete rule of the
        /// relationship on the referenced side for rows a context has not loaded (say, rows
        /// another process inserted meanwhile): `.cascade` over anything but `CASCADE`,
        /// `.nullify` over anything but `SET NULL`, `.deny` over `SET NULL` or
        /// `SET DEFAULT`. The rule still runs for the objects the context sees.
        public static let deleteRuleNotEnforced = Code(.deleteRuleNotEnforced)

        /// The code's name, such as `missingForeignKeyIndex`.
        public var description: String { base.rawValue }
    }

    /// Which warning.
    public let code: Code
    /// One sentence, with the SQL that would settle it where there is one.
    public let description: String
    /// The entity (for a join table: the relationship pair, `Post.tags ↔ Tag.posts`).
    public let entity: String
    /// The table.
    public let table: String
    /// The column.
    public let column: String

    private init(_ code: Code, _ description: String, entity: String, table: String, column: String) {
        (self.code, self.description) = (code, description)
        (self.entity, self.table, self.column) = (entity, table, column)
    }

    /// No index starts with a foreign-key column.
    public static func missingForeignKeyIndex(entity: String, table: String, column: String) -> SchemaWarning {
        SchemaWarning(
            .missingForeignKeyIndex,
            "no index on foreign key \(table).\(column) (\(entity)): CREATE INDEX ON \(table) (\(column))",
            entity: entity, table: table, column: column)
    }

    /// A non-optional attribute's column has no default.
    public static func missingDefault(entity: String, table: String, column: String) -> SchemaWarning {
        SchemaWarning(
            .missingDefault,
            "column \(table).\(column) of entity \(entity) has no default, but its attribute is not optional and "
                + "declares one (Model.schemaSQL() writes it)",
            entity: entity, table: table, column: column)
    }

    /// An optional attribute's column is `NOT NULL`.
    public static func notNullOptionalAttribute(entity: String, table: String, column: String) -> SchemaWarning {
        SchemaWarning(
            .notNullOptionalAttribute,
            "column \(table).\(column) of entity \(entity) is NOT NULL but its attribute is optional: saving nil fails",
            entity: entity, table: table, column: column)
    }

    /// A foreign key's `ON DELETE` action does not carry out a delete rule for rows a
    /// context has not loaded.
    ///
    /// - Parameters:
    ///   - entity: the entity whose table holds the key.
    ///   - table: that table.
    ///   - column: the key's column.
    ///   - relationship: the relationship whose rule applies, as `Entity.name`
    ///     (`User.posts`).
    ///   - expected: the action the rule needs (`CASCADE`).
    ///   - actual: the key's action (`SET NULL`).
    public static func deleteRuleNotEnforced(
        entity: String, table: String, column: String, relationship: String, expected: String, actual: String
    ) -> SchemaWarning {
        SchemaWarning(
            .deleteRuleNotEnforced,
            "foreign key \(table).\(column) of entity \(entity) is ON DELETE \(actual), but the delete rule of "
                + "\(relationship) needs ON DELETE \(expected): rows no context has loaded (another process's new "
                + "rows) escape the rule",
            entity: entity, table: table, column: column)
    }
}
