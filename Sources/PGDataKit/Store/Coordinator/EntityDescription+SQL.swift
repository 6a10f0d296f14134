extension EntityDescription {
    /// `t."id", t."version", …` for a table alias: the columns every object fetch
    /// selects, in `selectColumns` order.
    func selectList(alias: String) -> String {
        selectColumns.map { "\(alias).\(Connection.quoteIdentifier($0))" }.joined(separator: ", ")
    }

    /// The quoted table name.
    var quotedTable: String { Connection.quoteIdentifier(tableName) }

    /// `t."id"`: the quoted primary-key column of alias `t`.
    var qualifiedPrimaryKey: String { "t.\(Connection.quoteIdentifier(primaryKeyColumn))" }

    /// `'Article'`: the entity's name as the SQL literal its rows' discriminator column
    /// holds; `nil` outside a hierarchy (no such column).
    var discriminatorValue: String? {
        discriminatorColumn == nil ? nil : Self.literal(name)
    }

    /// A text as an SQL string literal: quotes doubled (standard_conforming_strings, on
    /// since PostgreSQL 9.1, keeps backslashes as they are).
    private static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// `t."entity" IN ('Article', …)`: the condition every statement over a sub-entity's
    /// rows adds (its table holds the rows of its whole hierarchy); `nil` for an entity
    /// without superentity, whose table holds its rows only.
    var discriminatorCondition: String? {
        guard superentityName != nil, let column = discriminatorColumn else { return nil }
        let names = concreteEntityNames.map(Self.literal)
        let quoted = "t.\(Connection.quoteIdentifier(column))"
        if names.isEmpty { return "false" }  // (an abstract leaf: no row is one of it)
        return names.count == 1 ? "\(quoted) = \(names[0])" : "\(quoted) IN (\(names.joined(separator: ", ")))"
    }
}
