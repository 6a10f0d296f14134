/// The join rows one save writes to one join table, column by column in the table's own
/// orientation (`table.sourceColumn`, `table.destinationColumn`).
struct JoinRowBatch {
    /// The join table.
    let table: JoinTableDescription
    /// Pairs to insert: source keys and destination keys, in pair order.
    var inserted: (sources: [Int64], destinations: [Int64])
    /// Pairs to delete.
    var deleted: (sources: [Int64], destinations: [Int64])
    /// Keys of deleted objects whose every row goes: in the source column…
    var deletedSources: [Int64]
    /// …and in the destination column.
    var deletedDestinations: [Int64]
}

/// The statements of many-to-many relationships: loading members through a join table,
/// and writing a save's join rows with one statement per kind of change, whatever the
/// number of pairs (each column is one array parameter).
extension StoreCoordinator {
    /// The rows of the objects (of `destination`) related through `table` to any of
    /// `ownerKeys`, one row per pair: the entity's select columns, then the owner's key.
    /// One statement.
    func selectJoinedObjects(
        of destination: EntityDescription, through table: JoinTableDescription, ownerKeys: [Int64],
        on connection: Connection
    ) throws -> QueryResult {
        let join = Connection.quoteIdentifier(table.tableName)
        let source = Connection.quoteIdentifier(table.sourceColumn)
        let member = Connection.quoteIdentifier(table.destinationColumn)
        return try execute(
            "SELECT \(destination.selectList(alias: "t")), j.\(source) FROM \(destination.quotedTable) AS t "
                + "JOIN \(join) AS j ON j.\(member) = \(destination.qualifiedPrimaryKey) WHERE j.\(source) = ANY($1)",
            [ownerKeys], on: connection, reusesPlan: Self.reusesPlan(keys: ownerKeys.count))
    }

    /// Writes a save's join rows: one `DELETE` for the removed pairs and the rows of
    /// deleted objects, then one `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING`
    /// for the added pairs (a pair stored already, by this or another process, is left
    /// as it is). Nothing is sent for a part without rows. The delete locks rows in
    /// the order of their places in the table, the insert in (source, destination)
    /// order.
    func writeJoinRows(_ batch: JoinRowBatch, on connection: Connection) throws {
        let join = Connection.quoteIdentifier(batch.table.tableName)
        let source = Connection.quoteIdentifier(batch.table.sourceColumn)
        let destination = Connection.quoteIdentifier(batch.table.destinationColumn)
        var conditions: [String] = []
        var parameters: [(any PostgresEncodable)?] = []
        if !batch.deleted.sources.isEmpty {
            parameters += [batch.deleted.sources, batch.deleted.destinations]
            conditions.append(
                "(j.\(source), j.\(destination)) IN (SELECT * FROM unnest($\(parameters.count - 1)::bigint[], "
                    + "$\(parameters.count)::bigint[]))")
        }
        if !batch.deletedSources.isEmpty {
            parameters.append(batch.deletedSources)
            conditions.append("j.\(source) = ANY($\(parameters.count)::bigint[])")
        }
        if !batch.deletedDestinations.isEmpty {
            parameters.append(batch.deletedDestinations)
            conditions.append("j.\(destination) = ANY($\(parameters.count)::bigint[])")
        }
        if !conditions.isEmpty {
            // The rows are deleted in the order of their places in the table (a TID scan
            // sorts them): join rows are never updated, so every save sees them in the
            // same places and deletes, locking, in one order (see `lockRows`). (Locking
            // them in key order first would need the UPDATE privilege.)
            let condition = conditions.joined(separator: " OR ")
            try execute(
                "DELETE FROM \(join) AS j WHERE j.ctid = ANY(ARRAY(SELECT j.ctid FROM \(join) AS j WHERE \(condition))) "
                    + "AND (\(condition))",
                parameters, on: connection,
                reusesPlan: Self.reusesPlan(
                    keys: batch.deleted.sources.count + batch.deletedSources.count + batch.deletedDestinations.count))
        }
        if !batch.inserted.sources.isEmpty {
            // In (source, destination) order: a pair another save is inserting at the
            // same time is waited for in the same order by both.
            let order = batch.inserted.sources.indices.sorted {
                (batch.inserted.sources[$0], batch.inserted.destinations[$0])
                    < (batch.inserted.sources[$1], batch.inserted.destinations[$1])
            }
            try execute(
                "INSERT INTO \(join) (\(source), \(destination)) SELECT * FROM unnest($1::bigint[], $2::bigint[]) "
                    + "ON CONFLICT DO NOTHING",
                [order.map { batch.inserted.sources[$0] }, order.map { batch.inserted.destinations[$0] }], on: connection)
        }
    }
}
