import Foundation

/// Rows to insert or update. The Store binds each column as one array parameter, so a
/// batch is one statement whatever its size.
struct RowBatch {
    /// The primary keys.
    var keys: [Int64] = []
    /// The row versions: the new rows' (1) or, for an update, the versions read.
    var versions: [Int64] = []
    /// The attributes written (each row's value of attribute `a` is `values[row][a.index]`).
    var attributes: [AttributeDescription] = []
    /// Each row's attribute values, in attribute order: an object's value storage,
    /// shared rather than copied value by value.
    var values: [AttributeValues] = []
    /// The to-one foreign-key columns written, each with its keys in row order.
    var foreignKeys: [(column: String, keys: [Int64?])] = []
    /// Where the rows are while the transaction holds their locks (a `tid[]` parameter,
    /// `LockedLocations`; it may name more rows than the batch's): an update then finds
    /// them by location, not by key.
    var locations: (any PostgresEncodable)?
}

/// Identifies the SQL text of a batch update or insert: the entity, the columns it writes
/// (their types follow from the entity) and, for an update, whether it checks versions.
struct WriteStatementKey: Hashable, Sendable {
    let entity: ObjectIdentifier
    let columns: [String]
    let checksVersion: Bool
    /// One row: the statement reads each array's only element (`updateRows`), or, with
    /// `recordsChanges`, each value from a parameter of its own (`bindOneRow`).
    let single: Bool
    /// The statement also writes the change record (see `updateOneRowAndCommit`).
    var recordsChanges = false
    /// The rows are found by location (`RowBatch.locations`).
    var byLocation = false
    /// An `INSERT` (`insertRows`), not an update.
    var inserts = false
    /// A `DELETE` (`deleteOneRowAndCommit`), not an update.
    var deletes = false
}

/// Every statement the contexts send is built here, from an entity description plus a
/// `StoreQuery` or a `RowBatch`; identifiers are quoted, values are bound parameters.
/// Each runs on the connection given (a context's transaction or a borrowed one) and is
/// counted in `statementCount`.
extension StoreCoordinator {
    // MARK: - Reading

    /// The rows of objects (`selectColumns` of the entity) a query describes.
    ///
    /// A query of primary keys only (`StoreQuery.keys(_:of:)`, as refreshes and faults
    /// make) is read from the primary-key index whatever the planner knows of the table
    /// (`rowsByUniqueColumn`), each row once.
    func selectObjects(of entity: EntityDescription, _ query: StoreQuery, on connection: Connection) throws -> QueryResult {
        if let keys = query.primaryKeysOnly(of: entity) {
            return try execute(
                "SELECT \(entity.selectList(alias: "t")) FROM "
                    + Self.rowsByUniqueColumn(entity, entity.primaryKeyColumn, single: Self.isOneKey(keys)),
                [keys], on: connection, reusesPlan: Self.reusesPlan(keys: keys.count))
        }
        return try execute(
            "SELECT \(entity.selectList(alias: "t")) FROM \(entity.quotedTable) AS t" + query.clauses(for: entity),
            query.parameters, on: connection, reusesPlan: query.reusesPlan)
    }

    /// The rows of objects with these keys, locked until the transaction ends: for
    /// deletion `FOR UPDATE`; otherwise `FOR NO KEY UPDATE`, which, like the `UPDATE` that
    /// follows (it changes no key), leaves other transactions free to insert rows that
    /// reference them (their foreign-key checks take `KEY SHARE` locks). Holding
    /// `FOR UPDATE` there made imports of child rows wait for the save, and wait in a
    /// cycle (a deadlock, found only after `deadlock_timeout`, 1 s by default) when that
    /// save then waited for them.
    func lockObjects(
        of entity: EntityDescription, keys: [Int64], forDeletion: Bool, on connection: Connection
    ) throws -> QueryResult {
        let query = StoreQuery.keys(keys, of: entity)
        return try execute(
            "SELECT \(entity.selectList(alias: "t")) FROM \(entity.quotedTable) AS t" + query.clauses(for: entity)
                + (forDeletion ? " FOR UPDATE" : " FOR NO KEY UPDATE"),
            query.parameters, on: connection, reusesPlan: query.reusesPlan)
    }

    /// The primary keys of the rows a query describes.
    func selectKeys(of entity: EntityDescription, _ query: StoreQuery, on connection: Connection) throws -> [Int64] {
        try execute(
            "SELECT \(entity.qualifiedPrimaryKey) FROM \(entity.quotedTable) AS t" + query.clauses(for: entity), query.parameters, on: connection,
            reusesPlan: query.reusesPlan)
            .map { try $0.decode(Int64.self, at: 0) }
    }

    /// The primary key and concrete entity (the discriminator column) of each row a
    /// query of an entity with sub-entities describes, in the query's order: the first
    /// step of a fetch of such an entity.
    func selectKinds(of entity: EntityDescription, _ query: StoreQuery, on connection: Connection) throws
        -> [(key: Int64, entity: String)]
    {
        guard let column = entity.discriminatorColumn else { return try selectKeys(of: entity, query, on: connection).map { ($0, entity.name) } }
        return try execute(
            "SELECT \(entity.qualifiedPrimaryKey), t.\(Connection.quoteIdentifier(column)) FROM \(entity.quotedTable) AS t"
                + query.clauses(for: entity), query.parameters, on: connection, reusesPlan: query.reusesPlan
        ).map { (try $0.decode(Int64.self, at: 0), try $0.decode(String.self, at: 1)) }
    }

    /// How many rows a query describes (its limit and offset apply).
    func count(of entity: EntityDescription, _ query: StoreQuery, on connection: Connection) throws -> Int {
        let result = try execute(
            "SELECT count(*) FROM (SELECT 1 FROM \(entity.quotedTable) AS t" + query.clauses(for: entity) + ") AS counted",
            query.parameters, on: connection)
        return try result[0].decode(Int.self, at: 0)
    }

    /// Values of SQL expressions over alias `t` for the rows a query describes;
    /// `distinct` drops duplicate rows.
    func selectValues(
        _ expressions: [String], distinct: Bool, of entity: EntityDescription, _ query: StoreQuery,
        on connection: Connection
    ) throws -> QueryResult {
        try execute(
            "SELECT \(distinct ? "DISTINCT " : "")\(expressions.joined(separator: ", ")) FROM \(entity.quotedTable) AS t"
                + query.clauses(for: entity),
            query.parameters, on: connection)
    }

    /// One aggregate (`sum`, `avg`, `min`, `max`) of an SQL expression over alias `t`
    /// for the rows a query describes: one row, one column.
    func aggregate(
        _ function: String, of expression: String, of entity: EntityDescription, _ query: StoreQuery,
        on connection: Connection
    ) throws -> QueryResult {
        try execute(
            "SELECT \(function)(\(expression)) FROM \(entity.quotedTable) AS t" + query.clauses(for: entity), query.parameters,
            on: connection)
    }

    /// Streams the rows of objects a query describes through a server-side cursor, in
    /// pages of `pageSize`, inside the connection's open transaction.
    func forEachPage(
        of entity: EntityDescription, _ query: StoreQuery, pageSize: Int, on connection: Connection,
        _ body: (QueryResult) throws -> Void
    ) throws {
        let cursor = "pgdatakit_cursor_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try execute(
            "DECLARE \(cursor) NO SCROLL CURSOR FOR SELECT \(entity.selectList(alias: "t")) FROM \(entity.quotedTable) AS t"
                + query.clauses(for: entity),
            query.parameters, on: connection)
        // FETCH takes a 32-bit count: a larger page size reads everything at once.
        let count = Swift.min(Int(Int32.max), Swift.max(1, pageSize))
        while true {
            let page = try execute("FETCH FORWARD \(count) FROM \(cursor)", on: connection)
            if page.isEmpty { break }
            try body(page)
        }
        try execute("CLOSE \(cursor)", on: connection)
    }

    // MARK: - Writing

    /// Takes `count` new primary keys from the entity's sequence (one statement).
    func reserveKeys(for entity: EntityDescription, count: Int, on connection: Connection) throws -> [Int64] {
        try execute(
            "SELECT nextval(pg_get_serial_sequence($1, $2)) FROM generate_series(1, $3)",
            [entity.quotedTable, entity.primaryKeyColumn, count], on: connection
        ).map { try $0.decode(Int64.self, at: 0) }
    }

    /// Inserts rows with one `INSERT … SELECT FROM unnest(…)`.
    func insertRows(into entity: EntityDescription, _ rows: RowBatch, on connection: Connection) throws {
        let (arrays, types) = try bind(rows)
        let key = WriteStatementKey(
            entity: ObjectIdentifier(entity), columns: rows.attributes.map(\.columnName) + rows.foreignKeys.map(\.column),
            checksVersion: false, single: false, inserts: true)
        let sql = writeStatement(key) {
            var columns = [entity.primaryKeyColumn, entity.versionColumn] + key.columns
            if let discriminator = entity.discriminatorColumn { columns.append(discriminator) }
            return "INSERT INTO \(entity.quotedTable) (\(columns.map(Connection.quoteIdentifier).joined(separator: ", "))) "
                + "SELECT \(Self.selectFromUnnest(types, appending: entity.discriminatorValue))"
        }
        try execute(sql, arrays, on: connection)
    }

    /// Updates rows with one `UPDATE … FROM unnest(…)`, bumping their versions. With
    /// `checksVersion` only rows still at the version read are written.
    ///
    /// Each row is found by one probe of the primary-key index and read by `ctid`
    /// (`rowsByKey`), never by a join the planner may turn into a scan of the whole
    /// table. Without `checksVersion`, a row a concurrent transaction rewrote in between
    /// (found by key, but no longer at the tuple probed) is written by a second
    /// statement by key: only then, and only for those rows.
    ///
    /// `bound`: the rows' arrays already bound (`bind(_:order:)` of `rows`).
    ///
    /// - Returns: the new version of each row written, by primary key; a row missing
    ///   here was changed or deleted elsewhere (a conflict).
    func updateRows(
        of entity: EntityDescription, _ rows: RowBatch, bound: (arrays: [(any PostgresEncodable)?], types: [String])? = nil,
        checksVersion: Bool, on connection: Connection
    ) throws -> [RowKey: Int64] {
        let assigned = rows.attributes.map(\.columnName) + rows.foreignKeys.map(\.column)
        let version = Connection.quoteIdentifier(entity.versionColumn)
        let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
        let attributes = rows.attributes
        func updateClause() -> String {
            var assignments = assigned.enumerated().map {
                let type = $0.offset < attributes.count ? attributes[$0.offset].type.sqlType : "bigint"
                return "\(Connection.quoteIdentifier($0.element)) = \(Self.unnested("v.c\($0.offset + 2)", type: type))"
            }
            assignments.append("\(version) = t.\(version) + 1")
            return "UPDATE \(entity.quotedTable) AS t SET \(assignments.joined(separator: ", ")) "
        }
        let tail = (checksVersion ? " AND t.\(version) = v.c1" : "") + " RETURNING t.\(primaryKey), t.\(version)"
        var written: [RowKey: Int64] = [:]
        written.reserveCapacity(rows.keys.count)
        var (arrays, types) = try bound ?? bind(rows)
        let single = rows.keys.count == 1
        var key = WriteStatementKey(
            entity: ObjectIdentifier(entity), columns: assigned, checksVersion: checksVersion, single: single)
        if !single, let locations = rows.locations {
            key.byLocation = true
            arrays.append(locations)
        }
        let sql = writeStatement(key) {
            single
                ? Self.oneRowUpdate(of: entity, columns: assigned, types: types, checksVersion: checksVersion)
                : updateClause() + (key.byLocation ? Self.rowsByLocation(entity, types) : Self.rowsByKey(entity, types)) + tail
        }
        for row in try execute(sql, arrays, on: connection, reusesPlan: Self.reusesPlan(keys: rows.keys.count)) {
            written[RowKey(try row.int64(at: 0))] = try row.int64(at: 1)
        }
        if key.byLocation, written.count < rows.keys.count {
            // Rows the transaction itself moved since its locks found them (a trigger of
            // an earlier statement, say), found again by key: only a row not at its
            // version (or gone) is a conflict.
            let missing = rows.keys.indices.filter { written[RowKey(rows.keys[$0])] == nil }
            let (again, _) = try bind(rows, order: missing)
            key.byLocation = false
            let byKey = writeStatement(key) { updateClause() + Self.rowsByKey(entity, types) + tail }
            for row in try execute(byKey, again, on: connection, reusesPlan: Self.reusesPlan(keys: missing.count)) {
                written[RowKey(try row.int64(at: 0))] = try row.int64(at: 1)
            }
        }
        guard !checksVersion, written.count < rows.keys.count else { return written }
        let update = updateClause()
        let missing = rows.keys.indices.filter { written[RowKey(rows.keys[$0])] == nil }
        let (again, _) = try bind(rows, order: missing)
        let byKey = "FROM unnest(\(Self.unnestList(types))) AS v(\(Self.aliases(types.count))) WHERE t.\(primaryKey) = v.c0"
        for row in try execute(update + byKey + tail, again, on: connection, reusesPlan: Self.reusesPlan(keys: missing.count)) {
            written[RowKey(try row.int64(at: 0))] = try row.int64(at: 1)
        }
        return written
    }

    /// The SQL text of an update or insert statement, built once per key (at most 1,024
    /// kept).
    func writeStatement(_ key: WriteStatementKey, _ make: () -> String) -> String {
        if let cached = writeStatements.withLock({ $0[key] }) { return cached }
        let sql = make()
        writeStatements.withLock { statements in
            if statements.count >= 1_024 { statements.removeAll() }
            statements[key] = sql
        }
        return sql
    }

    /// The `UPDATE` of one row by primary key (the common save), from the same array
    /// parameters as the batch form (`$1` keys, `$2` versions, then `columns`): each
    /// array's only element, found by the primary-key index, a plan PostgreSQL keeps after
    /// five executions whatever the table's size. (The batch form over more than
    /// `shortListLength` rows is planned at each execution, see `reusesPlan(keys:)`.)
    /// With `scalars`, each parameter is the value itself, cast to its column's type
    /// (`$3::bigint`), as a save of one row alone binds them (`bindOneRow`).
    /// Returns the row's key and new version.
    static func oneRowUpdate(
        of entity: EntityDescription, columns: [String], types: [String], checksVersion: Bool, scalars: Bool = false
    ) -> String {
        let version = Connection.quoteIdentifier(entity.versionColumn)
        let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
        func parameter(_ number: Int, _ type: String) -> String {
            scalars ? "$\(number)::\(type)" : unnested("($\(number)::\(transportType(type))[])[1]", type: type)
        }
        var assignments = columns.enumerated().map {
            "\(Connection.quoteIdentifier($0.element)) = " + parameter($0.offset + 3, types[$0.offset + 2])
        }
        assignments.append("\(version) = t.\(version) + 1")
        return "UPDATE \(entity.quotedTable) AS t SET \(assignments.joined(separator: ", ")) "
            + "WHERE t.\(primaryKey) = \(parameter(1, "bigint"))"
            + (checksVersion ? " AND t.\(version) = \(parameter(2, "bigint"))" : "")
            + " RETURNING t.\(primaryKey), t.\(version)"
    }

    /// Deletes rows by primary key with one `DELETE … USING unnest(…)`, each row found by
    /// one index probe and read by `ctid` (`rowsByKey`). With `checksVersion` only rows
    /// still at the versions read go; without it, rows rewritten concurrently in between
    /// go by a second statement by key (only then).
    ///
    /// - Returns: the keys of the rows deleted.
    func deleteRows(
        of entity: EntityDescription, keys: [Int64], versions: [Int64], checksVersion: Bool,
        locations: (any PostgresEncodable)? = nil, on connection: Connection
    ) throws -> Set<Int64> {
        let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
        let version = Connection.quoteIdentifier(entity.versionColumn)
        let delete = "DELETE FROM \(entity.quotedTable) AS t "
        let tail = (checksVersion ? " AND t.\(version) = v.c1" : "") + " RETURNING t.\(primaryKey)"
        let types = ["bigint", "bigint"]
        var deleted: Set<Int64> = []
        var byKey = (keys: keys, versions: versions)
        if let locations {
            deleted = Set(
                try execute(
                    delete + Self.rowsByLocation(entity, types, using: true) + tail,
                    [keys, versions, locations], on: connection,
                    reusesPlan: Self.reusesPlan(keys: keys.count)
                ).map { try $0.decode(Int64.self, at: 0) })
            // Rows the transaction moved since its locks found them: by key.
            let missing = deleted.count < keys.count ? keys.indices.filter { !deleted.contains(keys[$0]) } : []
            byKey = (missing.map { keys[$0] }, missing.map { versions[$0] })
        }
        if !byKey.keys.isEmpty {
            deleted.formUnion(
                try execute(
                    delete + Self.rowsByKey(entity, types, using: true) + tail, [byKey.keys, byKey.versions], on: connection,
                    reusesPlan: Self.reusesPlan(keys: byKey.keys.count))
                    .map { try $0.decode(Int64.self, at: 0) })
        }
        guard !checksVersion, deleted.count < keys.count else { return deleted }
        let missing = keys.filter { !deleted.contains($0) }
        let result = try execute(
            delete + "USING unnest($1::bigint[]) AS v(c0) WHERE t.\(primaryKey) = v.c0 RETURNING t.\(primaryKey)",
            [missing], on: connection, reusesPlan: Self.reusesPlan(keys: missing.count))
        for row in result { deleted.insert(try row.decode(Int64.self, at: 0)) }
        return deleted
    }

    /// `FROM` (or `USING`) the `unnest` of a batch's arrays (`v.c0` the primary key,
    /// `v.c1` the version, …), then `WHERE` the table's rows are those at the `ctid`s of
    /// the batch's keys, joined to their batch rows by key.
    ///
    /// The `ctid`s come first, from one probe of the primary-key index per key (a lateral
    /// join, computed once as an array): the table is then read by `ctid` only, a TID
    /// scan, and joined to the batch, both a batch long. The plain equi-join on the key
    /// is planned as a hash join over a scan of the whole table once the table has
    /// statistics (and without them too); a join on `ctid` leaves the planner free to do
    /// the same, and a version check on the joined rows lets it merge-join on versions,
    /// which are mostly equal (seconds for a batch of 1,000 in 20,000 rows). The key
    /// join also keeps out rows of other partitions of a partitioned table that share a
    /// `ctid`. A concurrent rewrite of a row in between leaves the row out (its tuple
    /// moved), as a version check would.
    static func rowsByKey(_ entity: EntityDescription, _ types: [String], using: Bool = false) -> String {
        let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
        return (using ? "USING" : "FROM") + " unnest(\(unnestList(types))) AS v(\(aliases(types.count))) "
            + "WHERE t.ctid = ANY(ARRAY(SELECT l.r FROM unnest($1::bigint[]) AS k(v) CROSS JOIN LATERAL "
            + "(SELECT u.ctid AS r FROM \(entity.quotedTable) AS u WHERE u.\(primaryKey) = k.v LIMIT 1) AS l)) "
            + "AND t.\(primaryKey) = v.c0"
    }

    /// `rowsByKey` for rows the transaction locked, whose locations the lock statement
    /// gave (`LockedLocations`): the locations are array parameter `$n+1` (after the `n`
    /// arrays of `types`), read with a TID scan and no probe of the primary-key index.
    /// The key join stays (the locations may name other rows the save locked, and a
    /// location names one row version of one table).
    static func rowsByLocation(_ entity: EntityDescription, _ types: [String], using: Bool = false) -> String {
        (using ? "USING" : "FROM") + " unnest(\(unnestList(types))) AS v(\(aliases(types.count))) "
            + "WHERE t.ctid = \(anyElement(of: types.count + 1, type: "tid")) AND t.\(Connection.quoteIdentifier(entity.primaryKeyColumn)) = v.c0"
    }

    /// `ANY(ARRAY(SELECT unnest($n::type[])))`: the elements of array parameter `$n`, for
    /// `column = …` over an indexed column (`ctid` included: a TID scan), read through the
    /// index in every plan. A generic plan reads a plain `column = ANY($n::type[])` so
    /// too, but a custom plan (every plan behind a pooler, where statements are not
    /// prepared, and the first five of a prepared statement) sees the array's length and
    /// counts a random page read per element, which costs more than reading the whole
    /// table once a batch is more than a small share of it, or while the table has no
    /// statistics: 1,000 locations in up to a few hundred thousand rows read every row
    /// (5–10 ms there against 0.3 ms), 1,000 keys of a new table too. The subquery hides
    /// the length, as a generic plan does.
    static func anyElement(of parameter: Int, type: String) -> String {
        "ANY(ARRAY(SELECT unnest($\(parameter)::\(type)[])))"
    }

    /// `(SELECT * FROM table AS u WHERE u.column = ANY(ARRAY(SELECT unnest($1::type[]))))
    /// AS t`: the rows (as `t`) whose unique `column` holds one of the values of array
    /// parameter `$1`, each row once, in no particular order.
    ///
    /// The array is read in a subquery (`anyElement(of:type:)`), whose length the planner
    /// does not see: it reads the values from the column's unique index (a bitmap or
    /// index scan) whatever it knows of the table. A plain `= ANY($1)` in a custom plan
    /// read a new or emptied table being imported into whole (milliseconds per batch,
    /// growing with the table), and did so for a few percent of its rows once it had
    /// statistics. The form before this one, a lateral join with one index probe per
    /// value, was planned afresh at every execution and cost a quarter more server time:
    /// for 1,000 values in 100,000 rows, 1.0 ms (none found) and 1.5 ms (all found)
    /// against 0.75 and 1.15 ms.
    ///
    /// With `single` (the array holds one value: a merge's refresh of one object, the
    /// common case) the statement reads the array's only element.
    ///
    /// With `locating` (and not `single`), the rows carry their `ctid` (`RowLocation`,
    /// `locationColumn`).
    static func rowsByUniqueColumn(
        _ entity: EntityDescription, _ column: String, sqlType: String = "bigint", single: Bool = false,
        locating: Bool = false
    ) -> String {
        if single {
            return "(SELECT * FROM \(entity.quotedTable) AS u "
                + "WHERE u.\(Connection.quoteIdentifier(column)) = ($1::\(sqlType)[])[1] LIMIT 1) AS t"
        }
        return "(SELECT *\(locating ? ", " + locationColumn(entity) : "") FROM \(entity.quotedTable) AS u "
            + "WHERE u.\(Connection.quoteIdentifier(column)) = \(anyElement(of: 1, type: sqlType))) AS t"
    }

    /// `ctid`, the row's location (`SELECT *` leaves system columns out), for rows of the
    /// entity's table itself: `NULL` for rows of a partitioned table's partitions or of a
    /// table's inheritance children, which share locations with its own (a user column
    /// cannot be named `ctid`).
    static func locationColumn(_ entity: EntityDescription) -> String {
        let table = entity.quotedTable.replacingOccurrences(of: "'", with: "''")
        return "CASE WHEN u.tableoid = '\(table)'::regclass THEN u.ctid END AS ctid"
    }

    /// Whether the keys are one key (given once or more): `rowsByUniqueColumn`'s
    /// `single` form then reads it. (The other form reads each row once however often
    /// its key is given.)
    static func isOneKey(_ keys: [Int64]) -> Bool {
        guard let first = keys.first else { return false }
        return keys.allSatisfy { $0 == first }
    }

    /// `c0, c1, …`: the column aliases of an `unnest` of `count` arrays.
    static func aliases(_ count: Int) -> String {
        (0..<count).map { "c\($0)" }.joined(separator: ", ")
    }

    /// Deletes the rows a query describes with one statement (its order and window do
    /// not apply), locking them in primary-key order first.
    ///
    /// - Returns: the keys of the rows deleted, each with its concrete entity in an entity
    ///   hierarchy (`nil` outside one).
    func deleteRows(of entity: EntityDescription, matching query: StoreQuery, on connection: Connection) throws
        -> [(key: Int64, entity: String?)]
    {
        // The rows are locked in primary-key order first, as every save locks them (see
        // `lockRows`), then deleted.
        let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
        var sql = "DELETE FROM \(entity.quotedTable) AS d USING (SELECT t.\(primaryKey) AS k FROM \(entity.quotedTable) AS t"
        if let condition = query.condition(for: entity) { sql += " WHERE " + condition }
        sql += " ORDER BY 1 FOR UPDATE OF t) AS l WHERE d.\(primaryKey) = l.k"
        return try execute(sql + " RETURNING d.\(primaryKey)" + Self.returningDiscriminator(of: entity), query.parameters, on: connection)
            .map(Self.keyAndEntity)
    }

    /// Writes the change record of a write transaction and commits it, in one round trip,
    /// then returns the connection to the pool and hands the record's notification to
    /// the notifier (sent after the commit, outside it: `ChangeNotifier`). Empty changes write no record
    /// (`commitWriteAndRelease(_:)`). When the connection breaks before the `COMMIT`'s
    /// answer, the outcome is looked up by the transaction id the record returned (see
    /// `commit(_:after:transactionIDColumn:onAnswer:)`): a transaction that committed
    /// returns normally. On failure the connection stays with the caller, who rolls back
    /// with `rollbackAndRelease(_:)`. `encoded`: the record's text when the caller made
    /// it already (`SavePipeline.RecordAhead`).
    ///
    /// - Throws: `PostgresError` (the record's, or the commit's: also when the
    ///   transaction had failed and PostgreSQL rolled it back instead; a lost connection
    ///   only when the transaction did not commit, marked `transactionDidNotCommit`),
    ///   `SaveOutcomeUnknownError` when that could not be found out,
    ///   `PostgresValueError`.
    func recordChangesAndCommit(_ changes: ContextChanges, encoded: String? = nil, on connection: Connection) throws {
        guard !changes.isEmpty else {
            try commitWriteAndRelease(connection)
            return
        }
        let record = try ChangeLog.writeStatement(changes, encoded: encoded, origin: originParameter)
        countStatements(2)
        // The record's id is noted as soon as it is read, before the COMMIT's result (its
        // notification follows the commit): this process's listener need not read.
        var announcement: String?
        try commit(
            connection, after: record, transactionIDColumn: ChangeLog.transactionIDColumn,
            recordIDColumn: ChangeLog.recordIDColumn
        ) { result in
            if let id = try? result.first?.int64(at: 0) { self.listener.ownRecords.note(id) }
            announcement = try? result.first?.decode(String.self, at: ChangeLog.payloadColumn)
        }
        if let announcement { notifier.post(announcement) }
    }

    // MARK: - Binding

    /// The batch's arrays as parameters, with their SQL element types: the rows at
    /// `order` (all of them, in their order, when `nil`). `spare`: room for that many
    /// more parameters, which the caller appends in place.
    func bind(_ rows: RowBatch, order: [Int]? = nil, spare: Int = 0) throws -> (arrays: [(any PostgresEncodable)?], types: [String]) {
        var arrays: [(any PostgresEncodable)?] = []
        arrays.reserveCapacity(2 + rows.attributes.count + rows.foreignKeys.count + spare)
        arrays.append(Self.integers(rows.keys, order: order))
        arrays.append(Self.integers(rows.versions, order: order))
        var types = ["bigint", "bigint"]
        for attribute in rows.attributes {
            arrays.append(try attribute.encodeColumn(rows: rows.values, order: order))
            types.append(attribute.type.sqlType)
        }
        for (_, keys) in rows.foreignKeys {
            var array = BinaryArrayBuilder(element: .int8, capacity: keys.count)
            for position in 0..<(order?.count ?? keys.count) {
                if let key = keys[order?[position] ?? position] { array.append(key) } else { array.appendNull() }
            }
            arrays.append(BinaryArray<Int64>(bytes: array.finish()))
            types.append("bigint")
        }
        return (arrays, types)
    }

    /// A `bigint[]` parameter of the integers at `order` (all, when `nil`); empty for
    /// no integers (an upsert without keys leaves them to the sequence).
    private static func integers(_ values: [Int64], order: [Int]?) -> BinaryArray<Int64> {
        var array = BinaryArrayBuilder(element: .int8, capacity: values.count)
        if values.isEmpty {
            // (No keys at all, whatever `order` says.)
        } else if let order {
            for index in order { array.append(values[index]) }
        } else {
            for value in values { array.append(value) }
        }
        return BinaryArray(bytes: array.finish())
    }

    /// `$1::bigint[], $2::text[], …`. An array attribute's column (`text[]`) travels as
    /// `text[]` of array literals, one a row (PostgreSQL has no arrays of arrays, and
    /// `unnest` of a two-dimensional array would flatten it): see `unnested`.
    static func unnestList(_ types: [String]) -> String {
        types.enumerated().map { "$\($0.offset + 1)::\(transportType($0.element))[]" }.joined(separator: ", ")
    }

    /// The element type a column of `type` travels as in an array parameter: `text` (an
    /// array literal a row) for array types, the type itself for the others.
    static func transportType(_ type: String) -> String {
        type.hasSuffix("[]") ? "text" : type
    }

    /// A value read from an array parameter (`v.c2`, `($3::text[])[1]`) as a value of the
    /// column's `type`: an array literal cast to its array type, other values as they are.
    static func unnested(_ expression: String, type: String) -> String {
        type.hasSuffix("[]") ? "(\(expression))::\(type)" : expression
    }

    /// `* FROM unnest(…)` of `types`, for `INSERT … SELECT`: when a column is an array,
    /// `v.c0, v.c1, (v.c2)::text[], … FROM unnest(…) AS v(c0, …)` instead, arrays cast
    /// (the common statement stays as it was).
    /// `constant`, when given, follows the unnested columns (a hierarchy's discriminator).
    static func selectFromUnnest(_ types: [String], appending constant: String? = nil) -> String {
        guard types.contains(where: { $0.hasSuffix("[]") }) else {
            // (Without a constant, the statement as before: no empty segment to append.)
            guard let constant else { return "* FROM unnest(\(unnestList(types)))" }
            return "*, \(constant) FROM unnest(\(unnestList(types)))"
        }
        let tail = constant.map { ", " + $0 } ?? ""
        return types.enumerated().map { unnested("v.c\($0.offset)", type: $0.element) }.joined(separator: ", ")
            + tail + " FROM unnest(\(unnestList(types))) AS v(\(aliases(types.count)))"
    }
}
