import Foundation

/// One row of a read of the change log (`ChangeLog.readEntries`): a record, or one of the
/// reading process's own records too large for a notification payload, left undecoded.
enum ChangeLogEntry: Sendable, Equatable {
    /// A record, decoded.
    case record(ChangeRecord)
    /// One of the reader's own records whose changes are longer than a payload holds
    /// (`ChangeLog.payloadChangesLimit`): the relay's host passes it on by its id, as its
    /// writer's notification did (`ChangeLog.payloadExpression`), and delivers it to no
    /// one itself, so its changes are not read.
    case largeOwnRecord(id: Int64)

    /// The record, when decoded.
    var record: ChangeRecord? {
        if case .record(let record) = self { return record }
        return nil
    }

    /// The record's id in the change log.
    var id: Int64 {
        switch self {
        case .record(let record): return record.id
        case .largeOwnRecord(let id): return id
        }
    }
}

extension ChangeLog {
    /// `read(after:skippingOrigin:delivered:on:)`, for the relay's host: the records of
    /// `ownOrigin` (the host's own) whose changes are longer than a payload holds come
    /// back as `.largeOwnRecord` ids, their changes neither sent nor decoded (an import's
    /// saves of thousands of objects each, read back a second's worth at a time, were
    /// megabytes decoded for nothing). `nil`: every record decoded.
    static func readEntries(
        after position: String, skippingOrigin: UUID?, delivered: String = "{}", leavingLargeRecordsOf ownOrigin: UUID?,
        on connection: Connection
    ) throws -> (entries: [ChangeLogEntry], position: String) {
        let result = try sealedRead((
            """
            SELECT pg_current_snapshot()::text, c.id, c.origin, c.origin_pid, c.backend_pid, c.created_at,
                   CASE WHEN c.origin = $4::uuid AND octet_length(c.changes::text) > $5::integer THEN NULL
                        ELSE c.changes::text END,
                   c.transaction_id::text
            FROM (SELECT 1) AS one
            LEFT JOIN (
                SELECT * FROM \(table) AS c
                WHERE c.transaction_id >= pg_snapshot_xmin($1::pg_snapshot)
                  AND NOT pg_visible_in_snapshot(c.transaction_id, $1::pg_snapshot)
                  AND c.origin IS DISTINCT FROM $2::uuid
                  AND NOT EXISTS (SELECT FROM unnest($3::text::xid8[]) AS d(x) WHERE d.x = c.transaction_id)
            ) AS c ON true
            ORDER BY c.id
            """,
            [position, skippingOrigin, delivered, ownOrigin, payloadChangesLimit]), on: connection)
        var newPosition = position
        var entries: [ChangeLogEntry] = []
        for row in result {
            newPosition = try row.decode(String.self, at: 0)
            if row.isNull(at: 1) { continue }
            let id = try row.decode(Int64.self, at: 1)
            if row.isNull(at: 6) {
                entries.append(.largeOwnRecord(id: id))
                continue
            }
            let changes: ContextChanges
            do {
                changes = try decode(try row.decode(String.self, at: 6))
            } catch {
                throw ChangeLogError.unreadableRecord(id: id, reason: "\(error)")
            }
            entries.append(
                .record(
                    ChangeRecord(
                        id: id, origin: try row.decode(UUID.self, at: 2),
                        originProcessID: try row.decode(Int32.self, at: 3),
                        originBackendPID: try row.decode(Int32.self, at: 4),
                        time: try row.decode(Date.self, at: 5), changes: changes,
                        transactionID: try transactionID(row, at: 7))))
        }
        return (entries, newPosition)
    }
}
