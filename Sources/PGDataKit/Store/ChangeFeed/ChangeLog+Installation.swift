/// Installing the change log only when something of it is missing, so that a role with
/// DML rights only may run the migrator (`CREATE … IF NOT EXISTS` needs the `CREATE`
/// right even when there is nothing to create).
extension ChangeLog {
    /// The names of the indexes `schemaSQL` creates (besides the primary key's), read
    /// from its `CREATE [UNIQUE] INDEX IF NOT EXISTS name` statements, so that an index
    /// added there is looked for here too.
    static var schemaIndexNames: [String] {
        var names: [String] = []
        for marker in ["CREATE INDEX IF NOT EXISTS ", "CREATE UNIQUE INDEX IF NOT EXISTS "] {
            var rest = schemaSQL[...]
            while let found = rest.range(of: marker) {
                let name = rest[found.upperBound...].prefix { !$0.isWhitespace }
                names.append(String(name))
                rest = rest[found.upperBound...]
            }
        }
        return names.sorted()
    }

    /// What `schemaSQL` would still create or change in the connection's current schema
    /// (empty when the change log is installed), and the rights the connection's role
    /// lacks to do it, each as `PRIVILEGE on object`: `CREATE` on the schema for a table or
    /// the trigger function, ownership of the change log's table for an index, its
    /// storage or a trigger. Changes nothing.
    ///
    /// An earlier version's trigger function (its body lacks `prunedFunctionVersion`)
    /// counts as missing only for a role that may replace it (it owns the function and
    /// may create in the schema): a role with DML rights only finds nothing to do, and
    /// the function is replaced at the owner's next install.
    ///
    /// The record column's storage counts as set when it is lz4-compressed or stored
    /// uncompressed (`STORAGE EXTERNAL`, what the schema falls back to where lz4 is
    /// missing): switching an uncompressed column to lz4 after a server upgrade is an
    /// optimisation that waits for the owner's next `migrate`.
    static func missingParts(on connection: Connection) throws -> (parts: [String], lackingRights: [String]) {
        let compressed =
            connection.serverVersion >= 140000
            ? "a.attcompression = 'l' OR a.attstorage = 'e'" : "a.attstorage = 'e'"
        let row = try connection.query(
            """
            SELECT c.oid IS NOT NULL,
                   coalesce(pg_has_role(c.relowner, 'USAGE'), false),
                   ARRAY(SELECT i.relname::text FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid
                         WHERE x.indrelid = c.oid),
                   coalesce((SELECT \(compressed) FROM pg_attribute AS a
                             WHERE a.attrelid = c.oid AND a.attname = 'changes'), false),
                   coalesce(has_schema_privilege(current_schema(), 'CREATE'), false),
                   coalesce(current_schema()::text, '(no schema on the search_path)'),
                   to_regclass($2) IS NOT NULL, to_regclass($3) IS NOT NULL, to_regprocedure($4) IS NOT NULL,
                   ARRAY(SELECT t.tgname::text FROM pg_trigger AS t WHERE t.tgrelid = c.oid),
                   coalesce(position($5 IN pg_get_functiondef(to_regprocedure($4))) > 0, false),
                   coalesce((SELECT pg_has_role(p.proowner, 'USAGE') FROM pg_proc AS p WHERE p.oid = to_regprocedure($4)), false)
            FROM (SELECT to_regclass($1)::oid AS oid) AS r LEFT JOIN pg_class AS c ON c.oid = r.oid
            """, [table, readersTable, horizonTable, prunedFunction + "()", prunedFunctionVersion])[0]
        let schema = try row.decode(String.self, at: 5)
        let mayCreate = try row.decode(Bool.self, at: 4)
        // The history's tables and trigger function: created in the schema.
        var created: [String] = []
        if try !row.decode(Bool.self, at: 6) { created.append("table \(readersTable)") }
        if try !row.decode(Bool.self, at: 7) { created.append("table \(horizonTable)") }
        if try !row.decode(Bool.self, at: 8) {
            created.append("function \(prunedFunction)()")
        } else if try !row.decode(Bool.self, at: 10), mayCreate, try row.decode(Bool.self, at: 11) {
            // An earlier version's body: replaced (`CREATE OR REPLACE`) when this role may;
            // otherwise it keeps working as before until the owner's next install.
            created.append("function \(prunedFunction)() (an earlier version)")
        }
        guard try row.decode(Bool.self, at: 0) else {
            return (["table \(table)"] + created, mayCreate ? [] : ["CREATE on schema \(schema)"])
        }
        // Indexes, storage and triggers: changes to the change log's table.
        let indexes = Set(try row.decode([String].self, at: 2))
        var altered = schemaIndexNames.filter { !indexes.contains($0) }.map { "index \($0)" }
        if try !row.decode(Bool.self, at: 3) { altered.append("storage of \(table).changes") }
        let triggers = Set(try row.decode([String].self, at: 9))
        for trigger in [deleteTrigger, truncateTrigger] where !triggers.contains(trigger) {
            altered.append("trigger \(trigger)")
        }
        var lacking: [String] = []
        if !created.isEmpty, !mayCreate { lacking.append("CREATE on schema \(schema)") }
        if !altered.isEmpty, try !row.decode(Bool.self, at: 1) { lacking.append("ownership of table \(table)") }
        return (altered + created, lacking)
    }

    /// Installs the change log when something of it is missing (one process at a time,
    /// under `setupLockKey`), and does nothing — no DDL, no right needed — when it is
    /// complete.
    ///
    /// - Throws: `MigrationError` with code `.missingPrivilege` when something is
    ///   missing and the role may not create it, or `PostgresError`.
    static func installIfMissing(on connection: Connection) throws {
        let (parts, lacking) = try missingParts(on: connection)
        guard !parts.isEmpty else { return }
        guard lacking.isEmpty else {
            throw MigrationError.missingPrivilege(
                role: try Migrator.currentRole(on: connection), privileges: lacking,
                neededFor: "install the library's schema (missing: \(parts.joined(separator: ", ")))",
                underlying: nil)
        }
        try install(on: connection)
    }
}
