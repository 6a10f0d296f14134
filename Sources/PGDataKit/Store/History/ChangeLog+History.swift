import Foundation

/// The change log's durable history: reading after a `HistoryToken`, the pruning horizon
/// that tells an expired token from a current one, and the registered readers whose
/// positions pruning respects.
///
/// **The horizon, and why an expired token is never a silent gap.** Pruning deletes by
/// age, and the records a token leaves out are not only those after its snapshot: a
/// transaction running when the token was taken (in its running list) may commit later,
/// and its record may be pruned later still. So "the highest pruned transaction is below
/// the token" proves nothing. Instead every `DELETE` and `TRUNCATE` of the change log —
/// by the library's pruner, an older version's, or a DBA's job — fires a trigger that
/// updates `pgdatakit_history_horizon` in the deleting transaction (so the horizon and
/// the deletion become visible together):
///
/// - `pruned_through` (h): the highest transaction id whose records were deleted;
/// - `pruned_transactions`: the deleted transaction ids from `listed_from` on — every
///   one of them (the newest `maximumListedPruned`; when more were deleted, `listed_from`
///   rises to the lowest id kept).
///
/// A read after token T, in one statement (one snapshot S), calls T expired when:
///
/// 1. h ≥ T.xmax (a pruned transaction that T does not cover: T covers nothing from its
///    xmax on), or
/// 2. some transaction x in T's running list is listed as pruned, or
/// 3. some such x is at or below h and below `listed_from`, has ended in S, has no
///    record in the log, and did not abort (`pg_xact_status`) — it may have been pruned
///    before the list reaches back, so it counts as pruned.
///
/// Proof that a token with a pruned, unread record is always called expired: let y be a
/// pruned transaction T does not cover. y ≤ h (h only grows, and covers every deletion
/// visible in S). If y ≥ T.xmax, rule 1 holds. Otherwise y is in T's running list. If
/// y ≥ `listed_from`, it is listed (rule 2). Otherwise y committed (it had a record) and
/// so has ended in S, and its record is gone (all records of one transaction share their
/// `created_at`, so pruning takes them together): rule 3 holds.
///
/// The converse is nearly exact: a token is called expired without having lost a record
/// only under rule 3, for a transaction that ended without a record (another
/// application's or database's write, say) and is older than the listed window — one
/// running for about as long as it takes to prune `maximumListedPruned` records past
/// it. The registered readers' positions are cleaned of transactions known to have ended
/// without a record before every prune (`refreshReaderPositions`).
///
/// `TRUNCATE` (`resetStore`, which also restarts the record ids) raises h to its own
/// transaction's id, lists that id alone, and sets `listed_from` to the oldest
/// transaction running then: a token taken before that id was drawn does not reach it
/// (rule 1), one taken while the truncation ran has it running (rule 2), so every earlier
/// token expires. A transaction that ran through the truncation (of any database: ids
/// are the cluster's) is not below `listed_from`, so its ending without a record expires
/// no later token — the oldest token after a reset, which leaves it out while it runs.
/// (With `listed_from` at h + 1, rule 3 called that token expired.) A record the
/// truncation deleted belongs to a transaction that committed before it, which a token
/// left out only if taken before h was drawn (rule 1).
extension ChangeLog {
    /// How many pruned transaction ids the horizon lists (see above): 800 KB at most.
    static let maximumListedPruned = 100_000
    /// Marks the trigger function's current version in its body: an installed function
    /// without it is replaced (`missingParts`).
    static let prunedFunctionVersion = "pgdatakit horizon 2"

    /// The registered history readers: name, acknowledged token (its text, and its
    /// coverage as a `pg_snapshot` for the pruner), and when it was last acknowledged.
    static let readersTable = "pgdatakit_history_readers"
    /// One row: the highest transaction id whose records were deleted from the log.
    static let horizonTable = "pgdatakit_history_horizon"
    /// The trigger function that raises the horizon, and its two triggers.
    static let prunedFunction = "pgdatakit_changes_pruned"
    static let deleteTrigger = "pgdatakit_changes_pruned"
    static let truncateTrigger = "pgdatakit_changes_truncated"

    /// The history part of the library's schema (after the change log's table). The
    /// trigger function is `SECURITY INVOKER`: whoever deletes from the change log needs
    /// `SELECT, UPDATE` on the horizon. Idempotent.
    static let historySchemaSQL = """
        CREATE TABLE IF NOT EXISTS \(readersTable) (
            name text PRIMARY KEY,
            token text NOT NULL,
            position pg_snapshot NOT NULL,
            acknowledged_at timestamptz NOT NULL DEFAULT now(),
            registered_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE IF NOT EXISTS \(horizonTable) (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            pruned_through bigint,
            listed_from bigint NOT NULL DEFAULT 0,
            pruned_transactions bigint[] NOT NULL DEFAULT '{}',
            pruned_at timestamptz
        );
        INSERT INTO \(horizonTable) (singleton) VALUES (true) ON CONFLICT (singleton) DO NOTHING;
        CREATE OR REPLACE FUNCTION \(prunedFunction)() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $pgdatakit$
        DECLARE
            highest bigint;
            listed bigint[];
            since bigint;
        BEGIN
            PERFORM FROM \(horizonTable) FOR UPDATE;
            IF NOT FOUND THEN
                INSERT INTO \(horizonTable) (singleton) VALUES (true);
            END IF;
            IF TG_OP = 'TRUNCATE' THEN
                -- \(prunedFunctionVersion): the truncation lists its own id; transactions
                -- running through it stay at or above listed_from.
                highest := pg_current_xact_id()::text::bigint;
                UPDATE \(horizonTable) SET pruned_through = greatest(pruned_through, highest),
                    listed_from = least(highest, pg_snapshot_xmin(pg_current_snapshot())::text::bigint),
                    pruned_transactions = ARRAY[highest], pruned_at = now();
                RETURN NULL;
            END IF;
            SELECT max(transaction_id::text::bigint) INTO highest FROM pgdatakit_pruned;
            IF highest IS NULL THEN
                RETURN NULL;
            END IF;
            SELECT h.listed_from, ARRAY(
                       SELECT DISTINCT x FROM unnest(h.pruned_transactions || ARRAY(
                           SELECT DISTINCT transaction_id::text::bigint FROM pgdatakit_pruned
                           ORDER BY 1 DESC LIMIT \(maximumListedPruned + 1))) AS x
                       WHERE x >= h.listed_from ORDER BY x DESC LIMIT \(maximumListedPruned + 1))
            INTO since, listed FROM \(horizonTable) AS h;
            IF cardinality(listed) > \(maximumListedPruned) THEN
                listed := listed[1:\(maximumListedPruned)];
                since := listed[\(maximumListedPruned)];
            END IF;
            UPDATE \(horizonTable) SET pruned_through = greatest(pruned_through, highest), listed_from = since,
                pruned_transactions = listed, pruned_at = now();
            RETURN NULL;
        END
        $pgdatakit$;
        DO $pgdatakit$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = '\(table)'::regclass AND tgname = '\(deleteTrigger)') THEN
                CREATE TRIGGER \(deleteTrigger) AFTER DELETE ON \(table)
                    REFERENCING OLD TABLE AS pgdatakit_pruned FOR EACH STATEMENT EXECUTE FUNCTION \(prunedFunction)();
            END IF;
            IF NOT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = '\(table)'::regclass AND tgname = '\(truncateTrigger)') THEN
                CREATE TRIGGER \(truncateTrigger) AFTER TRUNCATE ON \(table)
                    FOR EACH STATEMENT EXECUTE FUNCTION \(prunedFunction)();
            END IF;
        END
        $pgdatakit$;
        """

    // MARK: - Reading after a token

    /// One row of a history read's page: a record's id and transaction, and whether it
    /// is one of the first `limit` by id (`false`) or another record of one of their
    /// transactions (`true`).
    struct PageEntry: Equatable {
        var id: Int64
        var transaction: UInt64
        var extra = false
    }

    /// The records committed after `token` — the first `limit` by id, with any other
    /// records of their transactions — each carrying the token after it, in one
    /// statement (one snapshot), sealed (`sealedRead(_:on:)`). Records of every origin,
    /// this process's own included.
    ///
    /// Cost: with the token's read hint (`HistoryToken.floor`, which every token the
    /// library hands out has except `oldest…`), in the order of the page's size: the
    /// first part walks the primary key from the hint, the rest looks up the few
    /// transactions that were running. Without it, every record of an uncovered
    /// transaction is looked at once.
    ///
    /// - Throws: `HistoryError.historyExpired` (see the horizon above),
    ///   `HistoryError.tokenAhead`, `ChangeLogError.unreadableRecord`,
    ///   `ChangeLogError.notInstalled` (no history tables), `PostgresError`.
    static func readHistory(after token: HistoryToken, limit: Int, on connection: Connection) throws -> HistoryPage {
        let limit = min(max(limit, 1), maximumHistoryPage)
        let (sql, parameters) = historyQuery(after: token, limit: limit)
        let result = try mappingHistoryErrors { try sealedRead((sql, parameters), on: connection) }
        guard result.count > 0 else { throw HistoryError.malformedToken(reason: "the server returned no row") }
        let header = result[0]
        let snapshot = try HistoryToken(
            snapshot: try header.decode(String.self, at: 0), floor: try header.decode(Int64?.self, at: 1) ?? 0)
        let full = try header.decode(Int.self, at: 2) >= limit
        if try header.decode(Bool.self, at: 4) {
            throw HistoryError.historyExpired(token: token, oldestAvailable: try oldestToken(on: connection))
        }
        guard snapshot.hasSeen(everythingUpTo: token) else {
            throw HistoryError.tokenAhead(token: token, current: snapshot)
        }
        let beyond = try header.decode(String?.self, at: 5).map(parseTransactionList) ?? []
        var entries: [PageEntry] = []
        var records: [ChangeRecord] = []
        entries.reserveCapacity(result.count)
        records.reserveCapacity(result.count)
        for row in result where !row.isNull(at: 6) {
            let id = try row.int64(at: 6)
            let changes: ContextChanges
            do {
                changes = try decode(try row.string(at: 13))
            } catch {
                throw ChangeLogError.unreadableRecord(id: id, reason: "\(error)")
            }
            let transaction = try transactionID(row, at: 8)
            entries.append(PageEntry(id: id, transaction: transaction, extra: try row.bool(at: 7)))
            records.append(
                ChangeRecord(
                    id: id, origin: try row.decode(UUID.self, at: 9), originProcessID: try row.decode(Int32.self, at: 10),
                    originBackendPID: try row.decode(Int32.self, at: 11), time: try row.decode(Date.self, at: 12),
                    changes: changes, transactionID: transaction))
        }
        let tokens = HistoryToken.tokens(after: token, read: snapshot, page: entries, beyond: beyond, full: full)
        return HistoryPage(
            records: zip(records, tokens.records).map { $0.with(historyToken: $1) }, token: tokens.end, hasMore: full)
    }

    /// The statement `readHistory` sends: the page of records after a token (one
    /// statement, one round trip), with the header row that moves the token on.
    ///
    /// With a read hint, the first part of the page comes from three index scans: ids
    /// above the floor (the primary key), and ids at or below it of the lookup
    /// transactions and of every transaction from `lookupFrom` on (the transaction-id
    /// index, a range that holds only what committed since the token's read; `id + 0`
    /// keeps a generic plan from scanning the primary key up to the floor instead). The
    /// page's rows are then read by primary key, one probe each (`OFFSET 0` keeps a
    /// generic plan, which cannot know the page is small, from hashing the whole table
    /// instead).
    private static func historyQuery(
        after token: HistoryToken, limit: Int
    ) -> (sql: String, parameters: [(any PostgresEncodable)?]) {
        let first: String
        var parameters: [(any PostgresEncodable)?] = [token.snapshotText, limit, "{" + token.running.map(String.init).joined(separator: ",") + "}"]
        if let floor = token.floor {
            parameters += [floor, token.lookupLiteral, String(token.lookupFrom)]
            first = """
                SELECT id, transaction_id FROM (
                    (SELECT id, transaction_id FROM \(table)
                     WHERE id > $4 AND NOT pg_visible_in_snapshot(transaction_id, $1::pg_snapshot)
                     ORDER BY id LIMIT $2)
                    UNION ALL
                    (SELECT id, transaction_id FROM \(table)
                     WHERE transaction_id = ANY($5::text::xid8[]) AND id <= $4
                       AND NOT pg_visible_in_snapshot(transaction_id, $1::pg_snapshot))
                    UNION ALL
                    (SELECT id, transaction_id FROM \(table)
                     WHERE transaction_id >= $6::text::xid8 AND id + 0 <= $4
                       AND NOT pg_visible_in_snapshot(transaction_id, $1::pg_snapshot))
                ) AS u ORDER BY id LIMIT $2
                """
        } else {
            first = """
                SELECT id, transaction_id FROM (
                    SELECT id, transaction_id FROM \(table)
                    WHERE transaction_id = ANY($3::text::xid8[]) OR transaction_id >= pg_snapshot_xmax($1::pg_snapshot)
                    OFFSET 0
                ) AS pending ORDER BY id LIMIT $2
                """
        }
        let sql = """
            WITH first AS MATERIALIZED (
                \(first)
            ), extra AS (
                SELECT c.id, c.transaction_id FROM \(table) AS c
                WHERE c.transaction_id IN (SELECT transaction_id FROM first) AND c.id > (SELECT max(id) FROM first)
            ), page AS (
                SELECT id, transaction_id, false AS extra FROM first
                UNION ALL
                SELECT id, transaction_id, true FROM extra
            ), horizon AS (
                SELECT (SELECT pruned_through FROM \(horizonTable)) AS h
            )
            SELECT pg_current_snapshot()::text, (SELECT max(id) FROM \(table)), (SELECT count(*) FROM first),
                   (SELECT h FROM horizon),
                   (SELECT CASE
                        WHEN h IS NULL THEN false
                        WHEN h >= pg_snapshot_xmax($1::pg_snapshot)::text::bigint THEN true
                        ELSE EXISTS (
                            SELECT FROM pg_snapshot_xip($1::pg_snapshot) AS x(x)
                            WHERE CASE
                                WHEN x::text::bigint > h THEN false
                                WHEN x::text::bigint >= (SELECT listed_from FROM \(horizonTable))
                                    THEN x::text::bigint = ANY((SELECT pruned_transactions FROM \(horizonTable))::bigint[])
                                WHEN pg_visible_in_snapshot(x, pg_current_snapshot())
                                     AND NOT EXISTS (SELECT FROM \(table) AS c WHERE c.transaction_id = x)
                                    THEN pg_xact_status(x) IS DISTINCT FROM 'aborted'
                                ELSE false END)
                    END FROM horizon),
                   CASE WHEN (SELECT count(*) FROM first) >= $2 THEN ARRAY(
                       SELECT DISTINCT c.transaction_id::text FROM \(table) AS c
                       WHERE (c.transaction_id = ANY($3::text::xid8[])
                              OR (c.transaction_id >= pg_snapshot_xmax($1::pg_snapshot)
                                  AND c.transaction_id <= (SELECT transaction_id FROM page ORDER BY transaction_id DESC LIMIT 1)))
                         AND NOT pg_visible_in_snapshot(c.transaction_id, $1::pg_snapshot)
                         AND c.transaction_id NOT IN (SELECT transaction_id FROM page))::text
                   END,
                   p.id, p.extra, p.transaction_id::text, c.origin, c.origin_pid, c.backend_pid, c.created_at,
                   c.changes::text
            FROM (SELECT 1) AS one
            LEFT JOIN (
                page AS p CROSS JOIN LATERAL (
                    SELECT c.origin, c.origin_pid, c.backend_pid, c.created_at, c.changes FROM \(table) AS c
                    WHERE c.id = p.id OFFSET 0) AS c
            ) ON true
            ORDER BY p.id
            """
        return (sql, parameters)
    }

    /// The most records one history read returns.
    static let maximumHistoryPage = 100_000

    /// The transaction ids of a `text[]` literal of `xid8`s (`{1,2,3}`).
    static func parseTransactionList(_ literal: String) throws -> [UInt64] {
        let inner = literal.dropFirst().dropLast()
        guard literal.hasPrefix("{"), literal.hasSuffix("}") else {
            throw HistoryError.malformedToken(reason: "the server returned an unreadable transaction list")
        }
        guard !inner.isEmpty else { return [] }
        return try inner.split(separator: ",").map { part in
            guard let value = UInt64(part) else {
                throw HistoryError.malformedToken(reason: "the server returned an unreadable transaction list")
            }
            return value
        }.sorted()
    }

    /// The position after everything committed so far (sealed), with its read hint: the
    /// highest record id visible (every record not covered is of a transaction running
    /// now — listed in the snapshot, or at or above its xmax, `lookupFrom` — or of one
    /// that gets its id later and so draws a higher record id).
    static func currentToken(on connection: Connection) throws -> HistoryToken {
        let row = try sealedRead(
            ("SELECT pg_current_snapshot()::text, (SELECT max(id) FROM \(table))", []), on: connection)[0]
        return try HistoryToken(snapshot: try row.decode(String.self, at: 0), floor: try row.decode(Int64?.self, at: 1) ?? 0)
    }

    /// The oldest position from which every later record is still in the log (sealed):
    /// everything up to the horizon h is covered except the transactions at or below h
    /// that still have records or are running. Before anything was pruned, the position
    /// before every record.
    ///
    /// - Throws: `ChangeLogError.notInstalled` (no history tables), `PostgresError`.
    static func oldestToken(on connection: Connection) throws -> HistoryToken {
        let row = try mappingHistoryErrors {
            try sealedRead(
                (
                    """
                    SELECT pg_current_snapshot()::text, h.pruned_through,
                           ARRAY(SELECT DISTINCT c.transaction_id::text FROM \(table) AS c
                                 WHERE h.pruned_through IS NOT NULL
                                   AND c.transaction_id <= h.pruned_through::text::xid8)::text
                    FROM (SELECT (SELECT pruned_through FROM \(horizonTable)) AS pruned_through) AS h
                    """, []
                ), on: connection)[0]
        }
        let snapshot = try HistoryToken(snapshot: try row.decode(String.self, at: 0), floor: nil)
        guard let highest = try row.decode(Int64?.self, at: 1), highest >= 0 else {
            return HistoryToken(xmax: 1, running: [], floor: 0)  // nothing pruned: before every record
        }
        let held = try parseTransactionList(try row.decode(String.self, at: 2))
        let xmax = UInt64(highest) + 1
        return HistoryToken(xmax: xmax, running: held + snapshot.running.filter { $0 < xmax }, floor: nil)
    }

    /// Runs `body`, turning a missing history table into `ChangeLogError.notInstalled`.
    static func mappingHistoryErrors<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PostgresError where error.sqlState == .undefinedTable {
            let table = error.message.contains(readersTable) ? readersTable : horizonTable
            throw ChangeLogError.notInstalled(table: table)
        }
    }
}
