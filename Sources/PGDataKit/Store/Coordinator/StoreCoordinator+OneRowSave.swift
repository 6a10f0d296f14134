import Foundation

/// The saves that update, insert or delete one row and nothing else, in one round trip.
extension StoreCoordinator {
    /// What `updateOneRowAndCommit` found.
    enum OneRowSaveResult {
        /// The row was written and the transaction committed: the row's new version.
        case committed(version: Int64)
        /// The row is gone or no longer at the version read: nothing was written (the
        /// empty transaction committed).
        case conflict
    }

    /// Updates one row (with a version check), writes the change record and commits, in
    /// one statement and one round trip (with the `BEGIN`, when the transaction is still
    /// to begin): `BEGIN`, `UPDATE`, record, `COMMIT` — the floor a save can reach; the
    /// record's notification follows the commit (`ChangeNotifier`). The record is inserted from the `UPDATE`'s returned row, so a version miss
    /// writes nothing at all; the statement returns one row whatever happened, with the
    /// transaction's id only when it wrote, so that a connection lost at the `COMMIT`
    /// is settled as for any save (`commit(_:after:…)`).
    ///
    /// - Parameters:
    ///   - rows: one row's key, version and values.
    ///   - changes: the save's change record (this one update).
    /// - Throws: as `commit(_:after:…)`; the connection is then the caller's to roll
    ///   back. On success or conflict it is back in the pool.
    func updateOneRowAndCommit(
        of entity: EntityDescription, _ rows: RowBatch, changes: ContextChanges, on connection: Connection
    ) throws -> OneRowSaveResult {
        let columns = rows.attributes.map(\.columnName) + rows.foreignKeys.map(\.column)
        var parameters = try Self.bindOneRow(rows, spare: 3)
        let origin = parameters.count + 1
        let key = WriteStatementKey(
            entity: ObjectIdentifier(entity), columns: columns, checksVersion: true, single: true, recordsChanges: true)
        let sql = writeStatement(key) {
            let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
            let version = Connection.quoteIdentifier(entity.versionColumn)
            let payload = ChangeLog.payloadExpression(
                record: "r", origin: "$\(origin)", processID: "$\(origin + 1)", changes: "$\(origin + 2)")
            let update = Self.oneRowUpdate(
                of: entity, columns: columns, types: Self.oneRowTypes(rows), checksVersion: true, scalars: true)
            return """
                WITH u AS (\(update)),
                record AS (
                    INSERT INTO \(ChangeLog.table) (origin, origin_pid, changes)
                    SELECT $\(origin), $\(origin + 1), $\(origin + 2)::text::jsonb FROM u
                    RETURNING id, transaction_id, backend_pid, created_at
                )
                SELECT r.id, CASE WHEN r.id IS NOT NULL THEN \(payload) END,
                       pg_current_xact_id_if_assigned()::text, u.\(primaryKey), u.\(version)
                FROM (SELECT 1) AS one LEFT JOIN u ON true LEFT JOIN record AS r ON true
                """
        }
        // Appended in place (`bind` left room): a new array copied every parameter.
        parameters.append(originParameter)
        parameters.append(Int32(getpid()))
        parameters.append(try ChangeLog.encode(changes))
        let written = try commitOneRow(sql, parameters, on: connection) { try? $0.int64(at: 4) }
        return written.map { .committed(version: $0) } ?? .conflict
    }

    /// Deletes one row (with a version check), writes the change record and commits, in
    /// one statement and one round trip (with the `BEGIN`, when the transaction is still
    /// to begin): what `updateOneRowAndCommit` is to an update. (Otherwise the row is
    /// locked first, then deleted, then the record written: three round trips.) A version
    /// miss deletes nothing and writes no record.
    ///
    /// - Parameters:
    ///   - key, version: the row's primary key and the version read.
    ///   - changes: the save's change record (this one delete).
    /// - Returns: `true` when the row was deleted and the transaction committed; `false`
    ///   when the row is gone or no longer at `version` (the empty transaction committed).
    /// - Throws: as `commit(_:after:…)` (a foreign key that refuses the delete, as the
    ///   `DELETE` raises it); the connection is then the caller's to roll back.
    func deleteOneRowAndCommit(
        of entity: EntityDescription, key: Int64, version: Int64, changes: ContextChanges, on connection: Connection
    ) throws -> Bool {
        let statementKey = WriteStatementKey(
            entity: ObjectIdentifier(entity), columns: [], checksVersion: true, single: true, recordsChanges: true, deletes: true)
        let sql = writeStatement(statementKey) {
            let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
            let version = Connection.quoteIdentifier(entity.versionColumn)
            let payload = ChangeLog.payloadExpression(record: "r", origin: "$3", processID: "$4", changes: "$5")
            return """
                WITH d AS (
                    DELETE FROM \(entity.quotedTable) AS t WHERE t.\(primaryKey) = $1 AND t.\(version) = $2
                    RETURNING t.\(primaryKey) AS id
                ),
                record AS (
                    INSERT INTO \(ChangeLog.table) (origin, origin_pid, changes)
                    SELECT $3, $4, $5::text::jsonb FROM d
                    RETURNING id, transaction_id, backend_pid, created_at
                )
                SELECT r.id, CASE WHEN r.id IS NOT NULL THEN \(payload) END,
                       pg_current_xact_id_if_assigned()::text, d.id
                FROM (SELECT 1) AS one LEFT JOIN d ON true LEFT JOIN record AS r ON true
                """
        }
        let parameters: [(any PostgresEncodable)?] = [key, version, originParameter, Int32(getpid()), try ChangeLog.encode(changes)]
        return try commitOneRow(sql, parameters, on: connection) { try? $0.int64(at: 3) } != nil
    }

    /// Sends a one-row save's statement (it writes the change record when it writes the
    /// row: the record's id in column 0, `NULL` otherwise) and the `COMMIT`
    /// (`commit(_:after:…)`); notes the record as this process's own as soon as it is
    /// read, and queues its notification's payload once committed. `read` takes what the
    /// caller needs from the statement's row, when it wrote.
    private func commitOneRow<T>(
        _ sql: String, _ parameters: [(any PostgresEncodable)?], on connection: Connection, read: (Row) -> T?
    ) throws -> T? {
        countStatements(2)
        var value: T?
        var announcement: String?
        try commit(
            connection, after: (sql: sql, parameters: parameters), transactionIDColumn: ChangeLog.transactionIDColumn,
            recordIDColumn: ChangeLog.recordIDColumn
        ) { result in
            guard let row = result.first, !row.isNull(at: 0) else { return }
            if let id = try? row.int64(at: 0) { self.listener.ownRecords.note(id) }
            announcement = try? row.decode(String.self, at: ChangeLog.payloadColumn)
            value = read(row)
        }
        if let announcement { notifier.post(announcement) }
        return value
    }

    /// Inserts one row under a key drawn from the entity's sequence, writes the change
    /// record and commits, in one statement and one round trip (with the `BEGIN`, when
    /// the transaction is still to begin): what `updateOneRowAndCommit` is to an update.
    /// (Otherwise a new object's key is reserved first, then the row inserted, then the
    /// record written: three round trips.) The record names the new key, which only the
    /// statement knows: `record` is its text with `ChangeLog.keyPlaceholder` where the key
    /// goes, replaced by the statement before the record and its notification's payload
    /// are made of it, so both read exactly as a save that reserved the key first writes
    /// them.
    ///
    /// - Parameters:
    ///   - rows: the row's version and values (no key).
    ///   - record: the change record's text, the key a placeholder.
    /// - Returns: the new row's key (`nil` only were the committed statement's answer
    ///   unreadable: it inserts its row or fails, and answers with the key).
    /// - Throws: as `commit(_:after:…)` (a unique or foreign-key violation of the row, as
    ///   its `INSERT` raises it); the connection is then the caller's to roll back. On
    ///   success it is back in the pool.
    func insertOneRowAndCommit(into entity: EntityDescription, _ rows: RowBatch, record: String, on connection: Connection) throws
        -> Int64?
    {
        let columns = rows.attributes.map(\.columnName) + rows.foreignKeys.map(\.column)
        var parameters = try Self.bindOneRow(rows, spare: 3)
        // $1, $2: the table and key column (for the sequence), then one value per column,
        // then the record's origin, process and text.
        let origin = columns.count + 3
        let key = WriteStatementKey(
            entity: ObjectIdentifier(entity), columns: columns, checksVersion: false, single: true, recordsChanges: true,
            inserts: true)
        let sql = writeStatement(key) {
            let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
            var names = [primaryKey, Connection.quoteIdentifier(entity.versionColumn)] + columns.map(Connection.quoteIdentifier)
            var values = ["k.id", "1"]
            let types = Self.oneRowTypes(rows)
            for index in columns.indices { values.append("$\(index + 3)::\(types[index + 2])") }
            if let discriminator = entity.discriminatorColumn, let value = entity.discriminatorValue {
                names.append(Connection.quoteIdentifier(discriminator))
                values.append(value)
            }
            let payload = ChangeLog.payloadExpression(
                record: "r", origin: "$\(origin)", processID: "$\(origin + 1)", changes: "c.t")
            return """
                WITH k AS (SELECT nextval(pg_get_serial_sequence($1, $2)) AS id),
                i AS (
                    INSERT INTO \(entity.quotedTable) (\(names.joined(separator: ", ")))
                    SELECT \(values.joined(separator: ", ")) FROM k
                    RETURNING \(primaryKey) AS id
                ),
                c AS (SELECT i.id, replace($\(origin + 2)::text, '\(ChangeLog.keyPlaceholderText)', i.id::text) AS t FROM i),
                record AS (
                    INSERT INTO \(ChangeLog.table) (origin, origin_pid, changes)
                    SELECT $\(origin), $\(origin + 1), c.t::jsonb FROM c
                    RETURNING id, transaction_id, backend_pid, created_at
                )
                SELECT r.id, \(payload), pg_current_xact_id_if_assigned()::text, c.id
                FROM c, record AS r
                """
        }
        // In place of the key and version `bindOneRow` put first (this row has neither yet):
        // the table and key column, and the record's parameters appended.
        parameters[0] = entity.quotedTable
        parameters[1] = entity.primaryKeyColumn
        parameters.append(originParameter)
        parameters.append(Int32(getpid()))
        parameters.append(record)
        return try commitOneRow(sql, parameters, on: connection) { try? $0.int64(at: 3) }
    }

    /// One row's parameters for a save of that row alone: `$1` its key and `$2` its
    /// version (`NULL` for a row that has none yet), then each attribute's value as its
    /// text (`AttributeDescription.encodeText`), then each foreign key, each cast in the
    /// statement to its column's type (`oneRowTypes`) — no array of one value each, which
    /// cost an allocation per column and a parse per array on the server. Room is left
    /// for `spare` more.
    ///
    /// - Throws: `PostgresValueError` naming the attribute whose value cannot be sent.
    static func bindOneRow(_ rows: RowBatch, spare: Int) throws -> [(any PostgresEncodable)?] {
        var parameters: [(any PostgresEncodable)?] = []
        parameters.reserveCapacity(2 + rows.attributes.count + rows.foreignKeys.count + spare)
        parameters.append(rows.keys.first.map { $0 as any PostgresEncodable })
        parameters.append(rows.versions.first.map { $0 as any PostgresEncodable })
        // (The row's values hold every attribute of the entity: `AttributeValues` checks
        // the index, as the batch form's columns do.)
        let values = rows.values.first ?? AttributeValues()
        for attribute in rows.attributes { parameters.append(try attribute.encodeText(values[attribute.index])) }
        for (_, keys) in rows.foreignKeys { parameters.append(keys.first.flatMap { $0.map { $0 as any PostgresEncodable } }) }
        return parameters
    }

    /// The column types of `bindOneRow`'s parameters, in order (for the statement's casts).
    static func oneRowTypes(_ rows: RowBatch) -> [String] {
        ["bigint", "bigint"] + rows.attributes.map(\.type.sqlType) + rows.foreignKeys.map { _ in "bigint" }
    }
}
