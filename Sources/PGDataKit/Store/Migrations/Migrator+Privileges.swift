/// What the migrator looks up before it runs DDL, so that a role without the right to
/// create anything gets a no-op when everything is in place, and an error naming the
/// right when something is not.
extension Migrator {
    /// The bookkeeping table's definition.
    static var ledgerSQL: String {
        """
        CREATE TABLE IF NOT EXISTS \(Connection.quoteIdentifier(tableName)) (
            version bigint PRIMARY KEY,
            name text NOT NULL,
            checksum text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now(),
            execution_ms double precision NOT NULL DEFAULT 0
        )
        """
    }

    /// Creates the bookkeeping table unless it exists (`CREATE TABLE IF NOT EXISTS`
    /// needs `CREATE` on the schema even when the table is there).
    func createLedgerIfMissing(on connection: Connection) throws {
        let row = try connection.query(
            """
            SELECT to_regclass($1) IS NOT NULL, coalesce(has_schema_privilege(current_schema(), 'CREATE'), false),
                   coalesce(current_schema()::text, '(no schema on the search_path)')
            """, [Connection.quoteIdentifier(Migrator.tableName)])[0]
        if try row.decode(Bool.self, at: 0) { return }
        guard try row.decode(Bool.self, at: 1) else {
            throw MigrationError.missingPrivilege(
                role: try Migrator.currentRole(on: connection),
                privileges: ["CREATE on schema \(try row.decode(String.self, at: 2))"],
                neededFor: "create the bookkeeping table \(Migrator.tableName)", underlying: nil)
        }
        try connection.execute(Migrator.ledgerSQL)
    }

    /// The rights that applying a migration needs and the role lacks: `CREATE` on the
    /// current schema (most migrations create something) and `INSERT` on the bookkeeping
    /// table (every migration is recorded there).
    func lackingMigrationRights(on connection: Connection) throws -> [String] {
        let row = try connection.query(
            """
            SELECT coalesce(has_schema_privilege(current_schema(), 'CREATE'), false),
                   coalesce(current_schema()::text, '(no schema on the search_path)'),
                   coalesce(has_table_privilege(to_regclass($1), 'INSERT'), false)
            """, [Connection.quoteIdentifier(Migrator.tableName)])[0]
        var lacking: [String] = []
        if try !row.decode(Bool.self, at: 0) { lacking.append("CREATE on schema \(try row.decode(String.self, at: 1))") }
        if try !row.decode(Bool.self, at: 2) { lacking.append("INSERT on \(Migrator.tableName)") }
        return lacking
    }

    /// The role the connection acts as (`current_user`).
    static func currentRole(on connection: Connection) throws -> String {
        try connection.query("SELECT current_user::text")[0].decode(String.self, at: 0)
    }
}
