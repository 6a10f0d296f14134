import Foundation

/// The library's change log: one row per save in `pgdatakit_changes`, written in the
/// save's own transaction, announced with `NOTIFY pgdatakit_changes, '<id>'`.
///
/// Reading never asks for "ids above the last one seen": ids are taken before commit, so
/// transaction 11 can become visible before transaction 10 and such a reader would skip
/// 10 for good. Each row instead stores its transaction id (`xid8`), and a reader keeps
/// the PostgreSQL snapshot of its previous read as its position. The next read takes a
/// new snapshot and returns exactly the rows whose transaction is visible in the new
/// snapshot but was not in the old one — every commit once, whatever the id order, and
/// also after a reconnect, because a snapshot is just text.
package enum ChangeLog {
    /// The table (in the connection's current schema) and notification channel.
    static let table = "pgdatakit_changes"
    static let channel = "pgdatakit_changes"
    /// Serialises creating the table and pruning across processes.
    static let setupLockKey: Int64 = 0x7067_646b_6368_0001
    static let pruneLockKey: Int64 = 0x7067_646b_6368_0002

    /// The library's own schema: the change-log table and its indexes (PostgreSQL 13 or
    /// later for `xid8` and `pg_current_snapshot()`), and the history's tables and
    /// pruning trigger (`historySchemaSQL`). Idempotent.
    static let schemaSQL = """
        CREATE TABLE IF NOT EXISTS \(table) (
            id bigserial PRIMARY KEY,
            transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
            origin uuid NOT NULL,
            origin_pid integer NOT NULL,
            backend_pid integer NOT NULL DEFAULT pg_backend_pid(),
            created_at timestamptz NOT NULL DEFAULT now(),
            changes jsonb NOT NULL
        );
        CREATE INDEX IF NOT EXISTS \(table)_transaction_id ON \(table) (transaction_id);
        CREATE INDEX IF NOT EXISTS \(table)_created_at ON \(table) (created_at);
        \(storageSQL)
        \(historySchemaSQL)
        """

    /// A large save's record (thousands of ids) is compressed with lz4 rather than the
    /// default pglz, which took about as long as the rest of writing the record; where
    /// lz4 is unavailable (PostgreSQL 13, or a server built without it) the record is
    /// stored uncompressed instead. Changed only when not set yet, so that running the
    /// schema again takes no lock on the table.
    static let storageSQL = """
        DO $pgdatakit$
        BEGIN
            BEGIN
                IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '\(table)'::regclass AND attname = 'changes'
                               AND attcompression = 'l') THEN
                    EXECUTE 'ALTER TABLE \(table) ALTER COLUMN changes SET COMPRESSION lz4';
                END IF;
            EXCEPTION WHEN OTHERS THEN
                IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '\(table)'::regclass AND attname = 'changes'
                               AND attstorage = 'e') THEN
                    EXECUTE 'ALTER TABLE \(table) ALTER COLUMN changes SET STORAGE EXTERNAL';
                END IF;
            END;
        END
        $pgdatakit$;
        """

    /// Creates the table and its indexes when missing, one process at a time. Run by the
    /// migrator (with an owner role), never at runtime.
    static func install(on connection: Connection) throws {
        try connection.transaction { _ in
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [setupLockKey])
            try connection.executeScript(schemaSQL)
        }
    }

    /// Checks, without changing anything, that the table exists and that the connection's
    /// role may use it: `SELECT` (listeners), `INSERT` and `USAGE` on its id sequence
    /// (saves). Pruning is optional: it takes `DELETE` on the table and, where the
    /// history's tables are installed, `SELECT, UPDATE` on both (the deletion trigger
    /// raises the horizon; the pruner reads and cleans the readers' positions).
    ///
    /// - Returns: the grants pruning lacks (empty: this role may prune).
    /// - Throws: `ChangeLogError.notInstalled` or `.missingPrivilege`, or `PostgresError`.
    static func check(on connection: Connection) throws -> [String] {
        let exists = try connection.query("SELECT to_regclass($1) IS NOT NULL", [table])
        guard try exists[0].decode(Bool.self, at: 0) else { throw ChangeLogError.notInstalled(table: table) }
        let row = try connection.query(
            """
            SELECT has_table_privilege($1, 'SELECT'), has_table_privilege($1, 'INSERT'),
                   has_table_privilege($1, 'DELETE'), pg_get_serial_sequence($1, 'id'),
                   has_sequence_privilege(pg_get_serial_sequence($1, 'id'), 'USAGE'),
                   to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL,
                   coalesce(has_table_privilege(to_regclass($2), 'SELECT'), false),
                   coalesce(has_table_privilege(to_regclass($2), 'UPDATE'), false),
                   coalesce(has_table_privilege(to_regclass($3), 'SELECT'), false),
                   coalesce(has_table_privilege(to_regclass($3), 'UPDATE'), false)
            """, [table, readersTable, horizonTable])[0]
        var missing: [String] = []
        if try !row.decode(Bool.self, at: 0) { missing.append("SELECT on \(table)") }
        if try !row.decode(Bool.self, at: 1) { missing.append("INSERT on \(table)") }
        if try row.decode(Bool?.self, at: 4) != true {
            missing.append("USAGE on \(try row.decode(String?.self, at: 3) ?? table + "_id_seq")")
        }
        if !missing.isEmpty { throw ChangeLogError.missingPrivilege(missing) }
        guard try row.decode(Bool.self, at: 2) else { return ["DELETE on \(table)"] }
        guard try row.decode(Bool.self, at: 5) else { return [] }
        var forPruning: [String] = []
        for (column, grant) in [(6, "SELECT on \(readersTable)"), (7, "UPDATE on \(readersTable)"),
                                (8, "SELECT on \(horizonTable)"), (9, "UPDATE on \(horizonTable)")]
        where try !row.decode(Bool.self, at: column) {
            forPruning.append(grant)
        }
        return forPruning
    }

    /// Writes the record of a save inside its transaction and queues its notification
    /// in that same transaction (when there is one), as writers did before
    /// `ChangeNotifier` (listeners take either: tests play such writers, and transactions
    /// that commit in any order, with it). Two statements.
    ///
    /// - Returns: the record's id.
    @discardableResult
    static func write(_ changes: ContextChanges, origin: UUID, on connection: Connection) throws -> Int64 {
        let statement = try writeStatement(changes, origin: origin)
        let result = try connection.execute(statement.sql, statement.parameters)
        try connection.execute("SELECT pg_notify($1, $2)", [channel, try result[0].decode(String.self, at: payloadColumn)])
        return try result[0].decode(Int64.self, at: recordIDColumn)
    }

    /// The column of `writeStatement(_:origin:)`'s row that holds the transaction's id.
    static let transactionIDColumn = 2
    /// The column of `writeStatement(_:origin:)`'s row that holds the record's id.
    static let recordIDColumn = 0
    /// The column of `writeStatement(_:origin:)`'s row that holds the record's
    /// notification payload (sent once the transaction committed: `ChangeNotifier`).
    static let payloadColumn = 1

    /// The statement that writes the record of a save inside its transaction, for
    /// sending it together with the `COMMIT`. The transaction gets its id before the
    /// record draws its own (the subquery runs first), so that a record id drawn before a
    /// snapshot was taken always belongs to a transaction that snapshot knows of
    /// (`HistoryToken.floor` relies on it; saves have written their rows, and so have
    /// their id, before anyway). Its one row: the record's id, the record's notification
    /// payload (`payloadColumn`), and the transaction's id (`xid8` as text, column
    /// `transactionIDColumn`), by which a save whose `COMMIT` went unanswered looks up
    /// whether it committed.
    ///
    /// The transaction does not notify: a notifying transaction holds PostgreSQL's
    /// notification lock across its commit's flush. The payload goes out after the
    /// commit (`ChangeNotifier`). It carries the whole record when it fits
    /// (`payload(of:)`), so that listeners need not read the log; a larger record's
    /// payload is its id. `encoded`: the record's text (`encode(_:)` of `changes`), when
    /// the caller made it already.
    ///
    /// - Throws: `PostgresValueError` when the record cannot be encoded.
    static func writeStatement(_ changes: ContextChanges, encoded: String? = nil, origin: any PostgresEncodable) throws
        -> (sql: String, parameters: [(any PostgresEncodable)?])
    {
        (writeSQL, [origin, Int32(getpid()), try encoded ?? encode(changes)])
    }

    /// `writeStatement`'s text, written once (building it was a tenth of a one-object
    /// insert's client work).
    private static let writeSQL = """
        WITH record AS (
            INSERT INTO \(table) (transaction_id, origin, origin_pid, changes)
            SELECT t.x, $1, $2, $3::text::jsonb FROM (SELECT pg_current_xact_id() AS x OFFSET 0) AS t
            RETURNING id, transaction_id, backend_pid, created_at
        )
        SELECT id, \(payloadExpression(record: "record", origin: "$1", processID: "$2", changes: "$3")),
               pg_current_xact_id()::text
        FROM record
        """

    /// The payload of a record's notification, as an SQL expression: `record` names the
    /// inserted row (its `id`, `transaction_id`, `backend_pid`, `created_at`), the others
    /// the parameters holding the origin (`uuid`), the process id (`integer`) and the
    /// record's text. The whole record (`payloadVersionWithoutSnapshot`) when it fits,
    /// else the record's id. It carries no snapshot: the notification is sent after the
    /// commit, so notifications no longer arrive in commit order and a writer's snapshot
    /// says nothing about what a listener has received (`ChangeFeedPosition`).
    static func payloadExpression(record: String, origin: String, processID: String, changes: String) -> String {
        """
        CASE WHEN octet_length(\(changes)::text) <= \(payloadChangesLimit)
            THEN concat_ws(' ', '\(payloadVersionWithoutSnapshot)', \(record).id, \(record).transaction_id,
                           \(origin)::uuid, \(processID)::integer, \(record).backend_pid,
                           (extract(epoch FROM \(record).created_at) * 1000000)::bigint, \(changes)::text)
            ELSE \(record).id::text END
        """
    }

    // MARK: - Notification payloads

    /// The notification payload of a record read from the log, as its writer's
    /// (`payloadExpression`): the whole record when it fits, else its id. The process
    /// hosting the relay passes such payloads on for records no notification announced.
    ///
    /// - Throws: `PostgresValueError` when the record cannot be encoded.
    static func payload(of record: ChangeRecord) throws -> String {
        let changes = try encode(record.changes)
        guard changes.utf8.count <= payloadChangesLimit else { return String(record.id) }
        let micros = Int64(exactly: (record.time.timeIntervalSince1970 * 1_000_000).rounded()) ?? 0
        return [
            payloadVersionWithoutSnapshot, String(record.id), String(record.transactionID),
            record.origin.uuidString.lowercased(), String(record.originProcessID), String(record.originBackendPID),
            String(micros), changes,
        ].joined(separator: " ")
    }

    /// The first word of an earlier writer's payload (one that notified inside its
    /// transaction): a whole record and a snapshot, which is not used (see
    /// `payloadExpression`).
    static let payloadVersion = "r2"
    /// The first word of a payload that carries a whole record, no snapshot.
    static let payloadVersionWithoutSnapshot = "r1"
    /// The key a one-object insert's record is written with before the key is drawn
    /// (`StoreCoordinator.insertOneRowAndCommit`, whose statement replaces its text,
    /// `keyPlaceholderText`, with the key). No row has it: keys come from sequences that
    /// start at 1.
    static let keyPlaceholder = Int64.min
    /// `keyPlaceholder` as the record's text writes it.
    static let keyPlaceholderText = "-9223372036854775808"

    /// How many times `keyPlaceholderText` occurs in a record's text, byte by byte (a
    /// one-object insert's save checks it; Foundation's `components(separatedBy:)` cost
    /// more than the rest of the save, and walking the placeholder's own UTF-8 view by
    /// index about 4,000 instructions a record). A failed match restarts at the byte that
    /// failed: the placeholder's first byte, `-`, occurs in it only there.
    static func placeholderCount(in record: String) -> Int {
        let placeholder = placeholderBytes
        func count<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> Int {
            var count = 0
            var matched = 0
            for byte in bytes {
                if byte == placeholder[matched] {
                    matched += 1
                    if matched == placeholder.count {
                        count += 1
                        matched = 0
                    }
                } else {
                    matched = byte == placeholder[0] ? 1 : 0
                }
            }
            return count
        }
        // (A native string's bytes in place; the view's iterator otherwise.)
        return record.utf8.withContiguousStorageIfAvailable { count($0) } ?? count(record.utf8)
    }

    /// `keyPlaceholderText`'s bytes.
    private static let placeholderBytes = Array(keyPlaceholderText.utf8)

    /// The longest record text a payload carries (PostgreSQL allows 8,000 bytes in all;
    /// the rest of an `r1` payload takes at most about 120).
    static let payloadChangesLimit = 7_600

    /// What a notification on the channel says.
    package enum Payload {
        /// The whole record, with its transaction's id. (An earlier writer's `r2` payload
        /// also carried a snapshot, which is skipped: it cannot move a listener's
        /// position, see `ChangeFeedPosition`.)
        case record(ChangeRecord, transaction: UInt64)
        /// A record of the reading process's own saves (`payload(of:ownOrigin:)`): its
        /// transaction's id, its changes left unread.
        case own(transaction: UInt64)
        /// Only the record's id (a record too large for a payload, or a writer of an
        /// earlier version): the log must be read.
        case reference(Int64)
        /// Something else: the log must be read.
        case unreadable
    }

    /// The position to read from: the current snapshot, as text (sealed: see
    /// `sealedRead(_:on:)`).
    static func currentPosition(on connection: Connection) throws -> String {
        try sealedRead(("SELECT pg_current_snapshot()::text", []), on: connection)[0].decode(String.self, at: 0)
    }

    /// Runs a statement that takes a snapshot for a listener's position so that the
    /// position stays right on a standby promoted after it, and returns its result.
    ///
    /// A snapshot counts every transaction that ended before it as seen. A promoted
    /// standby knows only the transactions it received, and gives the ids of those it
    /// never received to new transactions (its next id is one past the last it
    /// replayed). A committed transaction is always received first under synchronous
    /// replication (it becomes visible only once the standby has its commit), but one
    /// that rolled back is not waited for: if the snapshot was taken after such a
    /// rollback and the primary then died before the standby received it, a new
    /// transaction on the promoted standby with the same id would count as seen, and its
    /// change record would be skipped for good.
    ///
    /// So under synchronous replication (`synchronous_standby_names` set) the statement
    /// runs in a transaction that also writes (an insert into the change log, undone by a
    /// savepoint: WAL, but no row and no notification), and its result is used only once
    /// that transaction has committed: PostgreSQL waits for the standby to have the
    /// commit, and so everything written before the snapshot, rollbacks included. On a
    /// server without synchronous standbys the insert inserts nothing and the commit
    /// writes nothing. All in one round trip.
    ///
    /// - Throws: `PostgresError`; the open transaction is then failed (the listener
    ///   drops the connection).
    static func sealedRead(
        _ statement: (sql: String, parameters: [(any PostgresEncodable)?]), on connection: Connection
    ) throws -> QueryResult {
        let results = try connection.executePipeline([
            (sql: "BEGIN", parameters: []),
            (sql: "SAVEPOINT pgdatakit_seal", parameters: []),
            (sql: sealSQL, parameters: []),
            (sql: "ROLLBACK TO SAVEPOINT pgdatakit_seal", parameters: []),
            statement,
            (sql: "COMMIT", parameters: []),
        ])
        return results[4]
    }

    /// The write that makes a read's commit wait for the synchronous standby.
    static let sealSQL = """
        INSERT INTO \(table) (origin, origin_pid, changes)
        SELECT '00000000-0000-0000-0000-000000000000'::uuid, 0, '{}'::jsonb
        WHERE current_setting('synchronous_standby_names') <> ''
        """

    /// Whether the log holds records committed after `position` (other than
    /// `skippingOrigin`'s, when given, and those of the transactions in `excluding`, an
    /// `xid8[]` literal): one statement, not sealed (the listener keeps no snapshot from
    /// it; it reads the log when the answer is yes).
    static func hasRecords(
        after position: String, skippingOrigin: UUID?, excluding: String = "{}", on connection: Connection
    ) throws -> Bool {
        try connection.query(
            """
            SELECT EXISTS (SELECT FROM \(table) AS c
                           WHERE c.transaction_id >= pg_snapshot_xmin($1::pg_snapshot)
                             AND NOT pg_visible_in_snapshot(c.transaction_id, $1::pg_snapshot)
                             AND c.origin IS DISTINCT FROM $2::uuid
                             AND NOT EXISTS (SELECT FROM unnest($3::text::xid8[]) AS d(x) WHERE d.x = c.transaction_id))
            """, [position, skippingOrigin, excluding])[0].decode(Bool.self, at: 0)
    }

    /// The records committed after `position` (oldest id first) and the new position, in
    /// one statement (one snapshot), sealed (`sealedRead(_:on:)`). Records written by
    /// `skippingOrigin`, when given, are passed over.
    ///
    /// - Parameter delivered: transactions whose records were delivered already (from
    ///   notification payloads), left out, as an `xid8[]` literal (an anti-join on a
    ///   hash of them: thousands cost what a few do).
    static func read(
        after position: String, skippingOrigin: UUID?, delivered: String = "{}", on connection: Connection
    ) throws -> (records: [ChangeRecord], position: String) {
        let (entries, next) = try readEntries(
            after: position, skippingOrigin: skippingOrigin, delivered: delivered, leavingLargeRecordsOf: nil,
            on: connection)
        return (entries.compactMap(\.record), next)
    }

    /// A transaction id column (`xid8` as text) of a row.
    ///
    /// - Throws: `PostgresValueError` when it is not a transaction id.
    static func transactionID(_ row: Row, at column: Int) throws -> UInt64 {
        let text = try row.string(at: column)
        guard let value = UInt64(text) else {
            throw PostgresValueError(
                code: .invalidText, swiftType: "UInt64", column: "#\(column)", row: row.index, text: text)
        }
        return value
    }

    // MARK: - The record's JSON

    /// One entity's part of a record; updates grouped by their set of changed keys.
    struct EntityChanges {
        struct Update {
            var keys: [String]
            var ids: [Int64]
        }
        var entity: String
        var inserted: [Int64] = []
        var updated: [Update] = []
        var deleted: [Int64] = []
    }

    static func encode(_ changes: ContextChanges) throws -> String {
        if let record = ChangeRecordWriter.oneObject(changes) { return record }
        // Appended in place (a copy per id would make a large save quadratic). A save
        // touches few entities and few sets of changed keys, so they are found by a
        // linear search that starts at the last one used (no hashing per id).
        var entries: [EntityChanges] = []
        var last = -1
        func entry(_ name: String) -> Int {
            if last >= 0, entries[last].entity == name { return last }
            if let found = entries.firstIndex(where: { $0.entity == name }) {
                last = found
            } else {
                entries.append(EntityChanges(entity: name))
                last = entries.count - 1
            }
            return last
        }
        for id in changes.inserted {
            guard let key = id.primaryKey else { continue }
            entries[entry(id.entityName)].inserted.append(key)
        }
        for id in changes.deleted {
            guard let key = id.primaryKey else { continue }
            entries[entry(id.entityName)].deleted.append(key)
        }
        // Updates by entity and set of changed keys (saves share one set per shape).
        var updates: [(entity: Int, keys: Set<String>, ids: [Int64])] = []
        var lastUpdate = -1
        for id in changes.updated {
            guard let key = id.primaryKey else { continue }
            let position = entry(id.entityName)
            let keys = changes.changedKeys[id] ?? []
            if lastUpdate < 0 || updates[lastUpdate].entity != position || updates[lastUpdate].keys != keys {
                if let found = updates.firstIndex(where: { $0.entity == position && $0.keys == keys }) {
                    lastUpdate = found
                } else {
                    updates.append((position, keys, []))
                    lastUpdate = updates.count - 1
                }
            }
            updates[lastUpdate].ids.append(key)
        }
        for update in updates {
            var ids = update.ids
            sortKeys(&ids)
            entries[update.entity].updated.append(EntityChanges.Update(keys: update.keys.sorted(), ids: ids))
        }
        // The concrete entities of sub-entity objects (`ContextChanges.entityNames`), by
        // the entry (root entity) their ids are in, each with its ids.
        var kinds: [String: [(name: String, ids: [Int64])]] = [:]
        if !changes.entityNames.isEmpty {
            var byEntry: [String: [String: [Int64]]] = [:]
            for (id, name) in changes.entityNames {
                guard let key = id.primaryKey else { continue }
                byEntry[id.entityName, default: [:]][name, default: []].append(key)
            }
            for (entity, byName) in byEntry {
                kinds[entity] = byName.sorted { $0.key < $1.key }.map { ($0.key, $0.value.sorted()) }
            }
        }
        let ordered = entries.sorted { $0.entity < $1.entity }.map { entry -> EntityChanges in
            var entry = entry
            sortKeys(&entry.inserted)
            sortKeys(&entry.deleted)
            entry.updated.sort { $0.keys.lexicographicallyPrecedes($1.keys) }
            return entry
        }
        return json(ordered, kinds: kinds)
    }

    /// Sorts keys in ascending order. The keys of a save are mostly one run of a
    /// sequence (and come out of a set in no order): when they span at most four times
    /// their count, they are counted into a table and read back in order, in linear time.
    static func sortKeys(_ keys: inout [Int64]) {
        guard keys.count > 64, let low = keys.min(), let high = keys.max() else {
            keys.sort()
            return
        }
        let (span, overflow) = high.subtractingReportingOverflow(low)
        guard !overflow, span / 4 < Int64(keys.count) else {
            keys.sort()
            return
        }
        var counts = [UInt8](repeating: 0, count: Int(span) + 1)
        for key in keys {
            let slot = Int(key &- low)
            guard counts[slot] < UInt8.max else {
                keys.sort()  // (a key hundreds of times over: not a save's)
                return
            }
            counts[slot] += 1
        }
        var position = 0
        for (offset, count) in counts.enumerated() where count > 0 {
            for _ in 0..<count {
                keys[position] = low &+ Int64(offset)
                position += 1
            }
        }
    }

    /// The JSON `JSONEncoder` would write for the entries, written directly (a record of
    /// a large save holds thousands of ids).
    private static func json(_ entries: [EntityChanges], kinds: [String: [(name: String, ids: [Int64])]] = [:]) -> String {
        var capacity = 2
        for entry in entries {
            capacity += 72 + entry.entity.utf8.count + 21 * (entry.inserted.count + entry.deleted.count)
            for update in entry.updated {
                capacity += 20 + 21 * update.ids.count
                for key in update.keys { capacity += key.utf8.count + 3 }
            }
        }
        var writer = ChangeRecordWriter(capacity: capacity)
        for entry in entries {
            writer.open(entry.entity)
            writer.list(entry.inserted)
            writer.append(RecordPieces.updated)
            for (position, update) in entry.updated.enumerated() {
                if position > 0 { writer.bytes.append(UInt8(ascii: ",")) }
                writer.updateKeys(update.keys)
                writer.list(update.ids)
                writer.bytes.append(UInt8(ascii: "}"))
            }
            writer.append(RecordPieces.deleted)
            writer.list(entry.deleted)
            if !kinds.isEmpty, let entities = kinds[entry.entity] {
                writer.append(RecordPieces.entities)
                for (position, kind) in entities.enumerated() {
                    if position > 0 { writer.bytes.append(UInt8(ascii: ",")) }
                    JSONValue.appendQuoted(kind.name, to: &writer.bytes)
                    writer.bytes.append(UInt8(ascii: ":"))
                    writer.list(kind.ids)
                }
                writer.bytes.append(UInt8(ascii: "}"))
            }
            writer.bytes.append(UInt8(ascii: "}"))
        }
        return writer.finish()
    }
}
