/// What the live schema holds for a set of tables (in the connection's current schema):
/// columns with type, nullability and default; unique column sets; the leading column of
/// every index; single-column foreign keys with their `ON DELETE` action; single-column
/// `CHECK` constraints. Read in four catalog queries, whatever the number of tables.
struct SchemaCatalog: Sendable {
    /// One column.
    struct Column: Sendable, Equatable {
        /// `information_schema.columns.udt_name` (`int8`, `text`, …).
        let type: String
        let isNullable: Bool
        /// Whether the column has a default (an identity column counts).
        let hasDefault: Bool
    }

    /// One single-column foreign key.
    struct ForeignKey: Sendable, Equatable {
        /// The constraint's name.
        let name: String
        let referencedTable: String
        /// `NO ACTION`, `RESTRICT`, `CASCADE`, `SET NULL` or `SET DEFAULT`.
        let deleteAction: String
    }

    /// Columns by table, then by name.
    var columns: [String: [String: Column]] = [:]
    /// The column sets of unique indexes (constraints included), by table.
    var uniqueSets: [String: [Set<String>]] = [:]
    /// The first column of every index whose first key is a column, by table.
    var indexLeads: [String: Set<String>] = [:]
    /// Foreign keys by table, then by column.
    var foreignKeys: [String: [String: ForeignKey]] = [:]
    /// The `CHECK` constraints on one column (name, `pg_get_constraintdef` text), by
    /// table, then by column.
    var checks: [String: [String: [(name: String, definition: String)]]] = [:]

    /// Reads the catalog for `tables`.
    ///
    /// - Throws: `PostgresError`.
    static func read(tables: [String], on connection: Connection) throws -> SchemaCatalog {
        var catalog = SchemaCatalog()
        for row in try connection.query(
            """
            SELECT table_name, column_name, udt_name, is_nullable = 'YES',
                   column_default IS NOT NULL OR is_identity = 'YES'
            FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = ANY($1)
            """, [tables])
        {
            catalog.columns[try row.decode(String.self, at: 0), default: [:]][try row.decode(String.self, at: 1)] =
                Column(
                    type: try row.decode(String.self, at: 2), isNullable: try row.decode(Bool.self, at: 3),
                    hasDefault: try row.decode(Bool.self, at: 4))
        }
        for row in try connection.query(
            """
            SELECT t.relname, i.indisunique, array_agg(a.attname::text ORDER BY k.ord),
                   (SELECT l.attname::text FROM pg_attribute l WHERE l.attrelid = t.oid AND l.attnum = i.indkey[0])
            FROM pg_index i
            JOIN pg_class t ON t.oid = i.indrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
            WHERE n.nspname = current_schema() AND t.relname = ANY($1)
            GROUP BY t.oid, t.relname, i.indexrelid, i.indisunique, i.indkey
            """, [tables])
        {
            let table = try row.decode(String.self, at: 0)
            if try row.decode(Bool.self, at: 1) {
                catalog.uniqueSets[table, default: []].append(Set(try row.decode([String].self, at: 2)))
            }
            if let lead = try row.decode(String?.self, at: 3) { catalog.indexLeads[table, default: []].insert(lead) }
        }
        for row in try connection.query(
            """
            SELECT t.relname, a.attname::text, r.relname,
                   CASE c.confdeltype WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT'
                                      WHEN 'r' THEN 'RESTRICT' ELSE 'NO ACTION' END,
                   c.conname::text
            FROM pg_constraint c
            JOIN pg_class t ON t.oid = c.conrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            JOIN pg_class r ON r.oid = c.confrelid
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
            WHERE c.contype = 'f' AND cardinality(c.conkey) = 1 AND n.nspname = current_schema()
              AND t.relname = ANY($1)
            """, [tables])
        {
            catalog.foreignKeys[try row.decode(String.self, at: 0), default: [:]][try row.decode(String.self, at: 1)] =
                ForeignKey(
                    name: try row.decode(String.self, at: 4), referencedTable: try row.decode(String.self, at: 2),
                    deleteAction: try row.decode(String.self, at: 3))
        }
        for row in try connection.query(
            """
            SELECT t.relname, a.attname::text, c.conname::text, pg_get_constraintdef(c.oid)
            FROM pg_constraint c
            JOIN pg_class t ON t.oid = c.conrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
            WHERE c.contype = 'c' AND cardinality(c.conkey) = 1 AND n.nspname = current_schema()
              AND t.relname = ANY($1)
            ORDER BY c.conname
            """, [tables])
        {
            catalog.checks[try row.decode(String.self, at: 0), default: [:]][try row.decode(String.self, at: 1), default: []]
                .append((try row.decode(String.self, at: 2), try row.decode(String.self, at: 3)))
        }
        return catalog
    }

    /// The concrete entities of a hierarchy that a `CHECK` constraint on its
    /// discriminator column does not name (as the literal `'Name'`), by constraint; empty
    /// when every constraint names them all, or none exists.
    func rejectedEntities(table: String, column: String, entities: [String]) -> [(constraint: String, entities: [String])] {
        (checks[table]?[column] ?? []).compactMap { check in
            let missing = entities.filter { !check.definition.contains("'" + $0.replacingOccurrences(of: "'", with: "''") + "'") }
            return missing.isEmpty ? nil : (check.name, missing)
        }
    }
}
