import Logging

extension StoreCoordinator {
    /// Creates the model's tables (`Model.schemaSQL()`) and the library's own
    /// (`Migrator.installLibrarySchema(on:)`) when the database holds none of the model's
    /// tables; does nothing when it holds any of them (the schema check that follows then
    /// lists what differs).
    ///
    /// Holds the migrator's advisory lock while it works, so processes starting together
    /// on an empty database create it once and a migration never runs beside it; the
    /// tables are created in one transaction.
    ///
    /// - Returns: whether it created the model's tables.
    /// - Throws: `MigrationError` (`.missingPrivilege` when the library's schema is
    ///   missing and the role may not create it, `.transactionPooledConnection` through a
    ///   transaction pooler, where the lock cannot be held), `ModelError` when the model's
    ///   DDL cannot be written, or `PostgresError` (a role without `CREATE` on the schema,
    ///   say).
    static func createSchemaIfEmpty(model: Model, pool: ConnectionPool, logger: Logger) throws -> Bool {
        let script = try model.schemaSQL()
        let tables = model.tableNames
        return try pool.withConnection { connection in
            try Migrator.holdingLock(on: connection, logger: logger) {
                try Migrator.installLibrarySchema(on: connection)
                let existing = try connection.query(
                    """
                    SELECT count(*) FROM information_schema.tables
                    WHERE table_schema = current_schema() AND table_name = ANY($1)
                    """, [tables])[0].decode(Int.self, at: 0)
                guard existing == 0 else { return false }
                try connection.transaction { try $0.executeScript(script) }
                logger.debug(
                    "created the schema from the model: \(model.entities.count) entity table(s), \(model.joinTables.count) join table(s)")
                return true
            }
        }
    }
}
