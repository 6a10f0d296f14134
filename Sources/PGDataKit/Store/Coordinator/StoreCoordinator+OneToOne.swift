extension StoreCoordinator {
    /// Sets a one-to-one foreign key to `NULL` in the rows with these primary keys, with
    /// one statement and without touching their versions: a save does this before its
    /// inserts and updates, so that handing a partner from one row to another never
    /// meets the column's unique constraint half-way (PostgreSQL checks a non-deferrable
    /// unique constraint row by row). The save's own update or delete of each row, which
    /// checks its version, follows in the same transaction.
    func clearForeignKey(_ column: String, of entity: EntityDescription, keys: [Int64], on connection: Connection) throws {
        guard !keys.isEmpty else { return }
        try execute(
            "UPDATE \(entity.quotedTable) AS t SET \(Connection.quoteIdentifier(column)) = NULL "
                + "WHERE \(entity.qualifiedPrimaryKey) = ANY($1)",
            [keys], on: connection, reusesPlan: Self.reusesPlan(keys: keys.count))
    }
}
