extension StoreCoordinator {
    /// Sets attributes of the rows a query describes with one statement (its order and
    /// window do not apply), bumping each row's version. The rows are locked in
    /// primary-key order first, as every save locks them (see `lockRows`), then updated.
    ///
    /// - Parameter values: each attribute with the value every row gets.
    /// - Returns: the keys of the rows updated, each with its concrete entity in an entity
    /// hierarchy (`nil` outside one).
    /// - Throws: `PostgresError`, or `PostgresValueError` when a value cannot be encoded.
    func updateRows(
        of entity: EntityDescription, setting values: [(attribute: AttributeDescription, value: StoredValue)],
        matching query: StoreQuery, on connection: Connection
    ) throws -> [(key: Int64, entity: String?)] {
        let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
        let version = Connection.quoteIdentifier(entity.versionColumn)
        var parameters = query.parameters
        var assignments: [String] = []
        for (attribute, value) in values {
            parameters.append(try attribute.encodeColumn([value]))
            let type = attribute.type.sqlType
            assignments.append(
                "\(Connection.quoteIdentifier(attribute.columnName)) = "
                    + Self.unnested("($\(parameters.count)::\(Self.transportType(type))[])[1]", type: type))
        }
        assignments.append("\(version) = d.\(version) + 1")
        var sql = "UPDATE \(entity.quotedTable) AS d SET \(assignments.joined(separator: ", ")) "
            + "FROM (SELECT t.\(primaryKey) AS k FROM \(entity.quotedTable) AS t"
        if let condition = query.condition(for: entity) { sql += " WHERE " + condition }
        sql += " ORDER BY 1 FOR UPDATE OF t) AS l WHERE d.\(primaryKey) = l.k RETURNING d.\(primaryKey)"
        return try execute(sql + Self.returningDiscriminator(of: entity), parameters, on: connection, reusesPlan: false)
            .map(Self.keyAndEntity)
    }

    /// `, d."entity"` for an entity in a hierarchy (a batch statement's `RETURNING` list
    /// then names each row's concrete entity); empty otherwise.
    static func returningDiscriminator(of entity: EntityDescription) -> String {
        entity.discriminatorColumn.map { ", d.\(Connection.quoteIdentifier($0))" } ?? ""
    }

    /// A row of a batch statement's `RETURNING` list: the key, and the concrete entity
    /// when `returningDiscriminator` added it.
    static func keyAndEntity(_ row: Row) throws -> (key: Int64, entity: String?) {
        (try row.decode(Int64.self, at: 0), row.result.columnCount > 1 ? try row.decode(String.self, at: 1) : nil)
    }
}
