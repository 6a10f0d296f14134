import Foundation
import Logging

/// The registered history readers (`pgdatakit_history_readers`) and pruning around them.
///
/// **The pruning rule.** A record older than the retention is deleted unless a *live*
/// reader has not acknowledged it: one whose acknowledged position does not cover the
/// record's transaction, and that acknowledged within `maximumHistoryReaderAge`. A reader
/// silent for longer is ignored (a dead consumer cannot hold the log for ever), and a
/// warning names it whenever pruning deletes records it had not read (it will get
/// `HistoryError.historyExpired`). Registering and dropping are explicit and logged.
extension ChangeLog {
    /// What `readers` returns for one reader.
    struct ReaderRow {
        var name: String
        var token: HistoryToken
        var acknowledgedAt: Date
        var registeredAt: Date
    }

    /// Checks a reader's name: 1 to 128 characters, no control characters (names go into
    /// logs).
    ///
    /// - Throws: `HistoryError.invalidReaderName`.
    static func validateReaderName(_ name: String) throws {
        guard !name.isEmpty else { throw HistoryError.invalidReaderName(reason: "it is empty") }
        guard name.count <= 128 else { throw HistoryError.invalidReaderName(reason: "it is longer than 128 characters") }
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw HistoryError.invalidReaderName(reason: "it contains a control character")
        }
    }

    /// Registers a reader at `start` unless one of that name exists, holding the pruning
    /// lock (so that no prune runs between choosing the start and the reader holding it).
    ///
    /// - Returns: the reader's acknowledged token and whether it was registered now.
    /// - Throws: `HistoryError.invalidReaderName`, `ChangeLogError.notInstalled`,
    ///   `PostgresError`.
    static func registerReader(
        _ name: String, startingAt start: HistoryReader.Start, on connection: Connection
    ) throws -> (token: HistoryToken, registered: Bool) {
        try validateReaderName(name)
        return try mappingHistoryErrors {
            try connection.transaction { _ in
                try connection.execute("SELECT pg_advisory_xact_lock($1)", [pruneLockKey])
                let existing = try connection.query("SELECT token FROM \(readersTable) WHERE name = $1", [name])
                if existing.count > 0 { return (try HistoryToken(parsing: try existing[0].decode(String.self, at: 0)), false) }
                let token: HistoryToken
                switch start {
                case .oldest: token = try oldestToken(on: connection)
                case .now: token = try currentToken(on: connection)
                case .token(let given): token = given
                }
                try connection.execute(
                    "INSERT INTO \(readersTable) (name, token, position) VALUES ($1, $2, $3::pg_snapshot)",
                    [name, token.description, token.snapshotText])
                return (token, true)
            }
        }
    }

    /// Stores a reader's acknowledged token (on `connection`, in whatever transaction it
    /// is in).
    ///
    /// - Throws: `HistoryError.readerNotRegistered`, `ChangeLogError.notInstalled`,
    ///   `PostgresError`.
    static func acknowledge(_ token: HistoryToken, reader name: String, on connection: Connection) throws {
        let updated = try mappingHistoryErrors {
            try connection.execute(
                "UPDATE \(readersTable) SET token = $2, position = $3::pg_snapshot, acknowledged_at = now() WHERE name = $1",
                [name, token.description, token.snapshotText]
            ).affectedRows
        }
        guard updated > 0 else { throw HistoryError.readerNotRegistered(name: name) }
    }

    /// A reader's acknowledged token.
    ///
    /// - Throws: `HistoryError.readerNotRegistered`, `HistoryError.malformedToken` (a row
    ///   changed by hand), `ChangeLogError.notInstalled`, `PostgresError`.
    static func acknowledgedToken(reader name: String, on connection: Connection) throws -> HistoryToken {
        let result = try mappingHistoryErrors {
            try connection.query("SELECT token FROM \(readersTable) WHERE name = $1", [name])
        }
        guard result.count > 0 else { throw HistoryError.readerNotRegistered(name: name) }
        return try HistoryToken(parsing: try result[0].decode(String.self, at: 0))
    }

    /// Deletes a reader.
    ///
    /// - Returns: the dropped reader, or `nil` when none had that name.
    static func dropReader(_ name: String, on connection: Connection) throws -> ReaderRow? {
        let result = try mappingHistoryErrors {
            try connection.query(
                "DELETE FROM \(readersTable) WHERE name = $1 RETURNING name, token, acknowledged_at, registered_at", [name])
        }
        return try result.first.map(readerRow)
    }

    /// Every registered reader, by name.
    static func readers(on connection: Connection) throws -> [ReaderRow] {
        try mappingHistoryErrors {
            try connection.query("SELECT name, token, acknowledged_at, registered_at FROM \(readersTable) ORDER BY name")
                .map(readerRow)
        }
    }

    private static func readerRow(_ row: Row) throws -> ReaderRow {
        ReaderRow(
            name: try row.decode(String.self, at: 0), token: try HistoryToken(parsing: try row.decode(String.self, at: 1)),
            acknowledgedAt: try row.decode(Date.self, at: 2), registeredAt: try row.decode(Date.self, at: 3))
    }

    // MARK: - Pruning

    /// Deletes records older than `age` that no live reader still needs, unless another
    /// process is pruning right now. Readers' positions are cleaned first
    /// (`refreshReaderPositions`).
    ///
    /// - Returns: how many records were deleted, or `nil` when another process held the
    ///   pruning lock.
    /// - Throws: `PostgresError` (`insufficientPrivilege` when the role may not delete,
    ///   or may not read and update the history tables).
    static func prune(
        olderThan age: Duration, maximumReaderAge: Duration, on connection: Connection, logger: Logger
    ) throws -> Int? {
        try connection.transaction { _ in
            let row = try connection.query(
                "SELECT pg_try_advisory_xact_lock($1), to_regclass($2) IS NOT NULL", [pruneLockKey, readersTable])[0]
            guard try row.decode(Bool.self, at: 0) else { return nil }
            let retention = seconds(age)
            guard try row.decode(Bool.self, at: 1) else {
                // The history tables are not installed: no reader to respect.
                return try connection.execute(
                    "DELETE FROM \(table) WHERE created_at < now() - make_interval(secs => $1)", [retention]
                ).affectedRows
            }
            try refreshReaderPositions(on: connection, logger: logger)
            let result = try connection.query(
                """
                WITH pruned AS (
                    DELETE FROM \(table) AS c
                    WHERE c.created_at < now() - make_interval(secs => $1)
                      AND NOT EXISTS (SELECT FROM \(readersTable) AS r
                                      WHERE r.acknowledged_at >= now() - make_interval(secs => $2)
                                        AND NOT pg_visible_in_snapshot(c.transaction_id, r.position))
                    RETURNING c.transaction_id
                )
                SELECT (SELECT count(*) FROM pruned), s.name, s.acknowledged_at
                FROM (SELECT 1) AS one
                LEFT JOIN (
                    SELECT r.name, r.acknowledged_at FROM \(readersTable) AS r
                    WHERE r.acknowledged_at < now() - make_interval(secs => $2)
                      AND EXISTS (SELECT FROM pruned AS p WHERE NOT pg_visible_in_snapshot(p.transaction_id, r.position))
                ) AS s ON true
                """, [retention, seconds(maximumReaderAge)])
            let deleted = try result[0].decode(Int.self, at: 0)
            for row in result where !row.isNull(at: 1) {
                let name = try row.decode(String.self, at: 1)
                let acknowledged = try row.decode(Date.self, at: 2)
                logger.warning(
                    "history reader \(name) last acknowledged at \(acknowledged), longer ago than the maximum reader age (\(maximumReaderAge)): pruning ignored it and deleted change records it had not read, so it will get historyExpired; drop it with dropHistoryReader(named:) if it is gone for good")
            }
            // What is left older than the retention is held by live readers.
            let holding = try connection.query(
                """
                SELECT r.name FROM \(readersTable) AS r
                WHERE r.acknowledged_at >= now() - make_interval(secs => $2)
                  AND EXISTS (SELECT FROM \(table) AS c
                              WHERE c.created_at < now() - make_interval(secs => $1)
                                AND NOT pg_visible_in_snapshot(c.transaction_id, r.position))
                ORDER BY r.name
                """, [retention, seconds(maximumReaderAge)]
            ).map { try $0.decode(String.self, at: 0) }
            if !holding.isEmpty {
                logger.info(
                    "change records older than the retention are kept for history readers that have not read them yet: \(holding.joined(separator: ", "))")
            }
            return deleted
        }
    }

    /// Cleans every reader's position of the transactions that ended without a change
    /// record: those with no record now that were never pruned (above the horizon, or in
    /// the listed window and not listed). Covering them changes nothing (they never had a
    /// record), and it keeps them from counting against the reader once the listed window
    /// has moved past them (rule 3 of the expiry check, see `ChangeLog+History`). A
    /// position changed meanwhile (an acknowledgement) is left as it is.
    static func refreshReaderPositions(on connection: Connection, logger: Logger) throws {
        var readers: [(name: String, text: String, token: HistoryToken)] = []
        for row in try connection.query("SELECT name, token FROM \(readersTable)") {
            let name = try row.decode(String.self, at: 0)
            let text = try row.decode(String.self, at: 1)
            do {
                readers.append((name, text, try HistoryToken(parsing: text)))
            } catch {
                logger.warning("history reader \(name) has an unreadable token (\(error)); it holds nothing")
            }
        }
        let candidates = Set(readers.flatMap { $0.token.running + $0.token.lookup })
        guard !candidates.isEmpty else { return }
        let ended = try connection.query(
            """
            SELECT x::text FROM unnest($1::text::xid8[]) AS x
            CROSS JOIN (SELECT pruned_through, listed_from, pruned_transactions FROM \(horizonTable)) AS h
            WHERE pg_visible_in_snapshot(x, pg_current_snapshot())
              AND NOT EXISTS (SELECT FROM \(table) AS c WHERE c.transaction_id = x)
              AND (h.pruned_through IS NULL OR x::text::bigint > h.pruned_through
                   OR (x::text::bigint >= h.listed_from AND x::text::bigint <> ALL(h.pruned_transactions)))
            """, ["{" + candidates.map(String.init).joined(separator: ",") + "}"])
        var finished: Set<UInt64> = []
        for row in ended { finished.insert(try transactionID(row, at: 0)) }
        guard !finished.isEmpty else { return }
        for reader in readers {
            let cleaned = reader.token.covering(finished)
            guard cleaned != reader.token else { continue }
            try connection.execute(
                "UPDATE \(readersTable) SET token = $2, position = $3::pg_snapshot WHERE name = $1 AND token = $4",
                [reader.name, cleaned.description, cleaned.snapshotText, reader.text])
        }
    }

    /// A duration in seconds, for `make_interval`.
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
