import Foundation

/// What an upsert did with one row of its batch.
struct UpsertedRow: Equatable {
    /// What happened to the row.
    enum Outcome: Equatable {
        /// A new row was inserted with the primary key sent.
        case inserted
        /// A row with the same unique key existed (committed by someone else since the
        /// caller looked); its columns were updated and its version bumped.
        case updated
        /// A row with the same unique key existed and already held the values: nothing
        /// was written.
        case unchanged
    }

    /// The row's primary key: the one sent for an inserted row, the existing row's
    /// otherwise.
    let primaryKey: Int64
    /// The row's version after the statement.
    let version: Int64
    let outcome: Outcome
}

/// Conditions of imports' statements: `= ANY($1)` lookups by an attribute that is not
/// unique (a unique one is looked up through `StoreCoordinator.rowsByUniqueValue`), and
/// the exclusion of `pruneMissingObjects`.
extension StoreQuery {
    /// The rows whose `attribute` is one of `values`, as one array parameter (any number
    /// of values is one statement).
    ///
    /// - Throws: `PostgresValueError` naming `Entity.attribute` when a value cannot be
    ///   encoded.
    static func rows(where attribute: AttributeDescription, isIn values: [StoredValue]) throws -> StoreQuery {
        StoreQuery(
            condition: "t.\(Connection.quoteIdentifier(attribute.columnName)) = ANY($1::\(attribute.type.sqlType)[])",
            parameters: [try attribute.encodeColumn(values)], reusesPlan: StoreCoordinator.reusesPlan(keys: values.count))
    }

    /// This query's rows except those whose `attribute` is one of `values` (one more
    /// array parameter). Rows whose attribute is `NULL` are not excluded.
    ///
    /// - Throws: `PostgresValueError` when a value cannot be encoded.
    func excluding(_ attribute: AttributeDescription, values: [StoredValue]) throws -> StoreQuery {
        var query = self
        query.parameters.append(try attribute.encodeColumn(values))
        let column = "t.\(Connection.quoteIdentifier(attribute.columnName))"
        let exclusion =
            "(\(column) IS NULL OR NOT (\(column) = ANY($\(query.parameters.count)::\(attribute.type.sqlType)[])))"
        query.condition = condition.map { "(\($0)) AND \(exclusion)" } ?? exclusion
        return query
    }
}

/// A row of an upsert could be neither inserted nor found: the row that blocked it was
/// deleted again before it could be read, several times over.
struct UpsertVanishedRowError: Error, CustomStringConvertible {
    let entity: String
    let attribute: String

    var description: String {
        "upsert into \(entity): a row with the same \(attribute) kept appearing and disappearing; retry the save"
    }
}

extension StoreCoordinator {
    /// Inserts rows (at version 1; `rows.versions` is not read) with one `INSERT …
    /// SELECT FROM unnest(…) ON CONFLICT (unique) DO UPDATE`: rows whose unique
    /// attribute already exists update that row instead
    /// (the columns in `updating` only, bumping its version, and only when they differ;
    /// `DO NOTHING` when `updating` is empty).
    ///
    /// The rows are sent sorted by the unique attribute's text, and a repeated key is sent
    /// once (its last row), so that concurrent upserts of overlapping keys lock them in
    /// the same order. Rows the statement did not return (the existing row was left as
    /// it was) are looked up with one more statement.
    ///
    /// - Parameters:
    ///   - rows: the rows with every column; `uniqueAttribute` must be among
    ///     `rows.attributes`. Without `rows.keys` the primary keys come from the
    ///     column's sequence (its default).
    ///   - updating: the columns an existing row takes from the new one.
    /// - Returns: for each row of `rows`, in order, what happened to it.
    /// - Throws: `PostgresError` (a missing unique constraint on the column is
    ///   `42P10`; kind `.client` when `uniqueAttribute` is not among the columns),
    ///   `PostgresValueError` naming `Entity.attribute`.
    func upsertRows(
        into entity: EntityDescription, _ rows: RowBatch, uniqueAttribute: AttributeDescription, updating: [String],
        on connection: Connection
    ) throws -> [UpsertedRow] {
        let results = try upsertPasses(
            into: entity, rows, uniqueAttribute: uniqueAttribute, updating: updating, lookingUpExisting: true,
            on: connection)
        var upserted: [UpsertedRow] = []
        upserted.reserveCapacity(results.count)
        for result in results {
            guard let result else { throw UpsertVanishedRowError(entity: entity.name, attribute: uniqueAttribute.name) }
            upserted.append(result)
        }
        return upserted
    }

    /// Inserts the rows whose unique key is new, with one `INSERT … SELECT FROM
    /// unnest(…) ON CONFLICT (unique) DO NOTHING`, keys in the order `upsertRows` sends
    /// them, and leaves the others: a save claims its new keys so, in the global lock
    /// order (see `StoreCoordinator`'s lock order), before it writes the rows that
    /// existed. A claim of `plainClaimMinimum` rows or more sends a plain `INSERT` first
    /// (`plainClaim`), unless the entity's saves met contention lately.
    ///
    /// The statement waits only for concurrent inserts (or deletes) of the same keys,
    /// never for a row another transaction merely locked; under repeatable read a row
    /// committed after the snapshot fails it at once (`40001`).
    ///
    /// - Returns: for each row of `rows`, in order, the primary key it was inserted
    ///   with, or `nil` when a row with its key exists.
    /// - Throws: as `upsertRows`.
    func claimRows(
        into entity: EntityDescription, _ rows: RowBatch, uniqueAttribute: AttributeDescription, on connection: Connection
    ) throws -> [Int64?] {
        try upsertPasses(
            into: entity, rows, uniqueAttribute: uniqueAttribute, updating: [], lookingUpExisting: false, on: connection
        ).map { $0?.primaryKey }
    }

    /// The work of `upsertRows` and `claimRows`: the upsert, and (`lookingUpExisting`)
    /// the lookup of rows it left, up to three times while rows vanish in between.
    /// Returns what happened to each row of `rows` (`nil`: not found).
    private func upsertPasses(
        into entity: EntityDescription, _ rows: RowBatch, uniqueAttribute: AttributeDescription, updating: [String],
        lookingUpExisting: Bool, on connection: Connection
    ) throws -> [UpsertedRow?] {
        guard rows.attributes.contains(where: { $0 === uniqueAttribute }) else {
            throw PostgresError(
                kind: .client,
                message: "upsert into \(entity.name): the unique key \(uniqueAttribute.name) is not among the batch's columns")
        }
        // Sorted by key text; the last row of a repeated key is sent.
        let texts = try Self.keyTexts(of: rows, uniqueAttribute: uniqueAttribute, entity: entity)
        let packed = PackedTexts(texts)
        var (pending, sentRow) = Self.sendOrder(packed, count: texts.count)
        var matcher = SentKeys(packed: packed, sent: pending)
        var results: [UpsertedRow?] = Array(repeating: nil, count: texts.count)
        for _ in 0..<3 {
            matcher.cursor = 0
            try upsert(into: entity, rows, order: pending, uniqueAttribute: uniqueAttribute, updating: updating, on: connection) {
                primaryKey, version, keyText, inserted in
                guard let index = matcher.index(matching: keyText) else { return }
                results[index] = UpsertedRow(primaryKey: primaryKey, version: version, outcome: inserted ? .inserted : .updated)
            }
            pending = pending.filter { results[$0] == nil }
            guard lookingUpExisting, !pending.isEmpty else { break }
            // Existing rows left as they were: one lookup by the unique attribute.
            let quote = Connection.quoteIdentifier
            let found = try execute(
                "SELECT t.\(quote(entity.primaryKeyColumn)), t.\(quote(entity.versionColumn)), t.\(quote(uniqueAttribute.columnName)) "
                    + "FROM " + Self.rowsByUniqueValue(entity, uniqueAttribute),
                [try uniqueAttribute.encodeColumn(pending.map { rows.values[$0][uniqueAttribute.index] })], on: connection,
                reusesPlan: Self.reusesPlan(keys: pending.count))
            matcher.cursor = 0
            for row in found {
                let text = try row.withCell(at: 2) { try uniqueAttribute.encode(try uniqueAttribute.decode($0))?.postgresText() }
                guard let text, let index = matcher.index(of: text) else { continue }
                results[index] = UpsertedRow(
                    primaryKey: try row.int64(at: 0), version: try row.int64(at: 1), outcome: .unchanged)
            }
            // Whatever is still missing was deleted in between: send it again.
            pending = pending.filter { results[$0] == nil }
            if pending.isEmpty { break }
        }
        // Rows of a repeated key share the result of the row sent.
        guard !sentRow.isEmpty else { return results }
        return texts.indices.map { results[sentRow[$0]] }
    }

    /// The rows' unique keys as text, as sent. A NULL key never conflicts (such rows
    /// would be plain inserts, which the column's NOT NULL refuses): it is refused here.
    ///
    /// - Throws: `PostgresValueError` naming `Entity.attribute`.
    private static func keyTexts(
        of rows: RowBatch, uniqueAttribute: AttributeDescription, entity: EntityDescription
    ) throws -> [String] {
        var texts: [String] = []
        texts.reserveCapacity(rows.values.count)
        for row in rows.values {
            guard let text = try keyText(of: uniqueAttribute, in: row) else {
                throw PostgresValueError(
                    code: .unencodable, swiftType: uniqueAttribute.swiftTypeName,
                    column: "\(entity.name).\(uniqueAttribute.name)", reason: "an upsert needs a value for the unique key")
            }
            texts.append(text)
        }
        return texts
    }

    /// The rows an upsert sends, in the order it sends them: sorted by key text, one row
    /// per key.
    ///
    /// Any order all processes share serves: the bytes' (`ExactText`). Texts are one
    /// key when their bytes are equal, as for the unique index (not when Swift's
    /// `String` holds them equal: canonically equivalent texts are two keys). Equal
    /// neighbours are one key: its last row (highest index) is sent, and stands for the
    /// others (`sentRow`, the row sent for each row; empty while no key repeats).
    private static func sendOrder(_ packed: PackedTexts, count: Int) -> (sent: [Int], sentRow: [Int]) {
        var distinct = false
        let sorted = packed.sortedIndices(distinct: &distinct)
        if distinct { return (sorted, []) }  // (each key once: nothing to merge)
        var pending: [Int] = []
        pending.reserveCapacity(sorted.count)
        var sentRow: [Int] = []
        var runStart = 0
        while runStart < sorted.count {
            var runEnd = runStart + 1
            var sent = sorted[runStart]
            while runEnd < sorted.count, packed.equal(sorted[runEnd], sorted[runStart]) {
                sent = Swift.max(sent, sorted[runEnd])
                runEnd += 1
            }
            if runEnd - runStart > 1 {
                if sentRow.isEmpty { sentRow = Array(0..<count) }
                for position in runStart..<runEnd { sentRow[sorted[position]] = sent }
            }
            pending.append(sent)
            runStart = runEnd
        }
        return (pending, sentRow)
    }

    /// A row's unique key as text, as sent (`nil` for `NULL`): strings as they are, read
    /// in place, without the attribute's generic encoding (a NUL in one is refused when
    /// the column is encoded).
    private static func keyText(of attribute: AttributeDescription, in row: AttributeValues) throws -> String? {
        if case .string(let text) = row[attribute.index] { return text }
        return try attribute.encode(row[attribute.index])?.postgresText()
    }

    /// One `INSERT … ON CONFLICT` statement for the rows at `order`; hands `row` each
    /// row written: its primary key, version, unique key's text (valid during the call)
    /// and whether it was inserted (`xmax = 0`: no earlier version of the row was locked
    /// or updated by it).
    private func upsert(
        into entity: EntityDescription, _ rows: RowBatch, order: [Int], uniqueAttribute: AttributeDescription,
        updating: [String], on connection: Connection,
        // Unsafe: `keyText` is valid only during each call of `body`: a cell lent by
        // `row.withBytes` (the row holds the result) or a local string's `withUTF8` bytes.
        row body: (_ primaryKey: Int64, _ version: Int64, _ keyText: UnsafeBufferPointer<UInt8>, _ inserted: Bool) throws -> Void
    ) throws {
        let quote = Connection.quoteIdentifier
        // New rows start at version 1, written in the statement rather than sent.
        var (arrays, types) = try bind(rows, order: order)
        arrays.remove(at: 1)
        types.remove(at: 1)
        var columns = [entity.versionColumn, entity.primaryKeyColumn] + rows.attributes.map(\.columnName)
            + rows.foreignKeys.map(\.column)
        if let discriminator = entity.discriminatorColumn { columns.append(discriminator) }
        if rows.keys.isEmpty {
            arrays.removeFirst()
            types.removeFirst()
            columns.remove(at: 1)
        }
        let unique = quote(uniqueAttribute.columnName)
        let version = quote(entity.versionColumn)
        let insert = "INSERT INTO \(entity.quotedTable) AS t (\(columns.map(quote).joined(separator: ", "))) "
            + "SELECT 1, \(Self.selectFromUnnest(types, appending: entity.discriminatorValue))"
        let returning = " RETURNING t.\(quote(entity.primaryKeyColumn)), t.\(version), t.\(unique), t.xmax = 0"
        var sql = insert + " ON CONFLICT (\(unique)) "
        if updating.isEmpty {
            sql += "DO NOTHING"
        } else {
            let quoted = updating.map(quote)
            sql += "DO UPDATE SET " + quoted.map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
                + ", \(version) = t.\(version) + 1 WHERE (\(quoted.map { "t.\($0)" }.joined(separator: ", "))) "
                + "IS DISTINCT FROM (\(quoted.map { "EXCLUDED.\($0)" }.joined(separator: ", ")))"
        }
        sql += returning
        let result =
            try updating.isEmpty && order.count >= Self.plainClaimMinimum
                && !saveContention.isContended([entity.rootEntityName])
            ? plainClaim(insert + returning, orElse: sql, arrays, of: entity, on: connection)
            : execute(sql, arrays, on: connection)
        // Text and integer columns come back in the text they were sent as; other types
        // are read and written again to compare like with like.
        let sameText = [.string, .int16, .int32, .int64].contains(uniqueAttribute.type)
        // Each row's fields read with one call into libpq (`FieldReader`), not two or
        // three per field through a `Row`: this loop runs after the statement's answer,
        // before the save can send its record and `COMMIT`. A field not in the expected
        // text goes through the `Row`, whose error names the column.
        try result.withFieldReader { reader in
            for index in 0..<result.count {
                reader.load(row: index)
                let primaryKey = try reader.bytes(0).flatMap(Row.decimal) ?? result[index].int64(at: 0)
                let version = try reader.bytes(1).flatMap(Row.decimal) ?? result[index].int64(at: 1)
                let inserted = try Self.boolean(reader.bytes(3)) ?? result[index].bool(at: 3)
                if sameText, let keyText = reader.bytes(2) {
                    try body(primaryKey, version, keyText, inserted)
                } else {
                    var text =
                        try result[index].withCell(at: 2) { try uniqueAttribute.encode(try uniqueAttribute.decode($0))?.postgresText() }
                        ?? ""
                    try text.withUTF8 { try body(primaryKey, version, $0, inserted) }
                }
            }
        }
    }

    /// The fewest rows a claim sends as a plain `INSERT` first (`plainClaim`): for fewer,
    /// the savepoint's two statements cost about what the conflict checks they spare do.
    static let plainClaimMinimum = 64

    /// A claim's rows inserted by a plain `INSERT` (`sql`) inside a savepoint — `SAVEPOINT`,
    /// the `INSERT` and `RELEASE` in one round trip — which PostgreSQL runs without `ON
    /// CONFLICT`'s speculative insertion: one pass through the unique index per row
    /// instead of a check and then the insertion, a quarter of the statement's time for
    /// 1,000 new keys (the Benchmarks article). The claim's keys were missing when its
    /// import looked, so most such inserts meet no row. When one does after all (`23505`:
    /// a row with one of the keys was committed, or is being inserted, by another
    /// transaction since), the savepoint is rolled back and the `ON CONFLICT DO NOTHING`
    /// claim (`conflictSQL`) runs as it would have, in the same round trip; the entity is
    /// then noted contended (`SaveContention`), so that its saves claim with `ON CONFLICT`
    /// from the start for a while. Any other error is the `INSERT`'s, as it would have
    /// been `conflictSQL`'s (the transaction is failed either way).
    ///
    /// - Throws: `PostgresError`.
    private func plainClaim(
        _ sql: String, orElse conflictSQL: String, _ arrays: [(any PostgresEncodable)?], of entity: EntityDescription,
        on connection: Connection
    ) throws -> QueryResult {
        countStatements(3)
        do {
            return try connection.executePipeline([
                (sql: "SAVEPOINT pgdatakit_claim", parameters: []), (sql: sql, parameters: arrays),
                (sql: "RELEASE SAVEPOINT pgdatakit_claim", parameters: []),
            ])[1]
        } catch let error as PostgresError where error.sqlState == .uniqueViolation {
            countStatements(3)
            let result = try connection.executePipeline([
                (sql: "ROLLBACK TO SAVEPOINT pgdatakit_claim", parameters: []),
                (sql: "RELEASE SAVEPOINT pgdatakit_claim", parameters: []), (sql: conflictSQL, parameters: arrays),
            ])[2]
            saveContention.noteContention(on: [entity.rootEntityName])
            return result
        }
    }

    // Unsafe: `bytes` is a field lent by `FieldReader.bytes(_:)` for the call; only its
    // count and first byte are read, after the count is checked.
    /// A `boolean` field's text (`t` or `f`) as a `Bool`; `nil` for anything else.
    private static func boolean(_ bytes: UnsafeBufferPointer<UInt8>?) -> Bool? {
        guard let bytes, bytes.count == 1 else { return nil }
        switch bytes[0] {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: return nil
        }
    }

    /// The rows of objects (`selectColumns` of the entity) whose unique `attribute` is
    /// one of `values`: one statement with one array parameter, which looks each value up
    /// in the attribute's unique index (`rowsByUniqueValue`). Each row comes once, also
    /// for a value given twice (or two values the column's collation holds equal).
    ///
    /// With `locating`, each row's location (`ctid`) follows the entity's columns (see
    /// `RowLocation`).
    ///
    /// - Throws: `PostgresError`, `PostgresValueError` naming `Entity.attribute`.
    func selectObjects(
        of entity: EntityDescription, whereUnique attribute: AttributeDescription, isIn values: [StoredValue],
        locating: Bool = false, on connection: Connection
    ) throws -> QueryResult {
        try execute(
            "SELECT \(entity.selectList(alias: "t"))\(locating ? ", t.ctid" : "") FROM "
                + Self.rowsByUniqueValue(entity, attribute, locating: locating),
            [try attribute.encodeColumn(values)], on: connection, reusesPlan: Self.reusesPlan(keys: values.count))
    }

    /// The primary keys of the rows whose `attribute` is one of `values`, with each row's
    /// value of the attribute (one statement). For linking imported objects to related
    /// rows known by a remote key, without loading those rows as objects. A unique
    /// attribute is looked up value by value in its index (`rowsByUniqueValue`); any
    /// other with `= ANY($1)`, every row that matches.
    ///
    /// - Throws: `PostgresError`, `PostgresValueError`.
    func selectKeys(
        of entity: EntityDescription, where attribute: AttributeDescription, isIn values: [StoredValue],
        on connection: Connection
    ) throws -> [(primaryKey: Int64, value: StoredValue)] {
        let columns = "SELECT \(entity.qualifiedPrimaryKey), t.\(Connection.quoteIdentifier(attribute.columnName)) FROM "
        let result: QueryResult
        if attribute.isUnique || entity.uniqueKeys.contains([attribute.name]) {
            result = try execute(
                columns + Self.rowsByUniqueValue(entity, attribute), [try attribute.encodeColumn(values)], on: connection,
                reusesPlan: Self.reusesPlan(keys: values.count))
        } else {
            let query = try StoreQuery.rows(where: attribute, isIn: values)
            result = try execute(
                columns + "\(entity.quotedTable) AS t" + query.clauses(for: entity), query.parameters, on: connection,
                reusesPlan: query.reusesPlan)
        }
        return try result.map { row in
            (try row.decode(Int64.self, at: 0), try row.withCell(at: 1) { try attribute.decode($0) })
        }
    }

    /// The rows (as `t`) whose unique `attribute` is one of the values of array
    /// parameter `$1`, read from the attribute's unique index (`rowsByUniqueColumn`).
    static func rowsByUniqueValue(
        _ entity: EntityDescription, _ attribute: AttributeDescription, locating: Bool = false
    ) -> String {
        rowsByUniqueColumn(entity, attribute.columnName, sqlType: attribute.type.sqlType, locating: locating)
    }
}

/// The rows an upsert sent, by key text (sorted, one row per key), for matching the
/// rows of its answer. A struct the answer's closure changes in place: captured
/// variables of a local function would be boxed and each access checked at run time
/// (callgrind: about 80 instructions, two per row answered).
private struct SentKeys {
    /// The sent keys' texts.
    let packed: PackedTexts
    /// The rows sent, sorted by key text.
    let sent: [Int]
    /// Where the next answer row is expected: rows mostly come back in the order sent,
    /// so the next one is tried before a binary search.
    var cursor = 0

    // Unsafe: `bytes` is borrowed for the call (a key cell `upsert` hands to its `row`
    // closure, or `withUTF8` text) and only compared, never kept.
    /// The row sent with the key text `bytes`, if any.
    mutating func index(matching bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        if cursor < sent.count, packed.compare(sent[cursor], with: bytes) == 0 {
            cursor += 1
            return sent[cursor - 1]
        }
        var low = 0
        var high = sent.count
        while low < high {
            let middle = (low + high) / 2
            if packed.compare(sent[middle], with: bytes) < 0 { low = middle + 1 } else { high = middle }
        }
        return low < sent.count && packed.compare(sent[low], with: bytes) == 0 ? sent[low] : nil
    }

    /// The row sent with key `text`, if any.
    mutating func index(of text: String) -> Int? {
        var text = text
        return text.withUTF8 { index(matching: $0) }
    }
}
