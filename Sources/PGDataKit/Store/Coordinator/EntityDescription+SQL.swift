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
}
