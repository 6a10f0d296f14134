import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Payloads that fit together go as one notification (`ChangeLog.combined`), and a
/// listener reads each of them back (`ChangeLog.separated`).
@Suite("Several saves' payloads in one notification")
struct CombinedPayloadsTests {
    /// A record's payload as the change log writes it, for record `id`, padded with `extra`
    /// bytes of record.
    func payload(_ id: Int64, extra: Int = 0) throws -> String {
        var changes = ContextChanges()
        changes.inserted = [ObjectID(entityName: "User", primaryKey: id)]
        changes.updated = Set((0..<Int64(extra / 8)).map { ObjectID(entityName: "Post", primaryKey: 10_000_000 + $0) })
        let record = ChangeRecord(
            id: id, origin: UUID(), originProcessID: 12, originBackendPID: 34, time: Date(timeIntervalSince1970: 1),
            changes: changes, transactionID: UInt64(1_000 + id))
        return try ChangeLog.payload(of: record)
    }

    func notifications(_ payloads: [String]) -> [PostgresNotification] {
        payloads.map { PostgresNotification(channel: ChangeLog.channel, payload: $0, senderPID: 7) }
    }

    @Test func payloadsThatFitShareANotificationAndReadBackInOrder() throws {
        let payloads = try (1...6).map { try payload($0) }
        let sent = ChangeLog.combined(payloads)
        #expect(sent.count == 1)
        #expect(sent[0].utf8.first == ChangeLog.payloadSeparator)
        #expect(sent[0].utf8.count == payloads.reduce(0) { $0 + $1.utf8.count + 1 })
        #expect(Array(ChangeLog.separated(notifications(sent))) == payloads)
        // Each reads as the record it was.
        for (index, part) in ChangeLog.separated(notifications(sent)).enumerated() {
            guard case .record(let record, _) = ChangeLog.payload(of: part) else {
                Issue.record("payload \(index) did not read as a record")
                continue
            }
            #expect(record.id == Int64(index + 1))
        }
    }

    @Test func aPayloadNeverHoldsTheSeparator() throws {
        // Names are written as JSON strings: a line feed in one is escaped.
        var changes = ContextChanges()
        changes.inserted = [ObjectID(entityName: "Odd\nName", primaryKey: 1)]
        let record = ChangeRecord(
            id: 1, origin: UUID(), originProcessID: 1, originBackendPID: 2, time: Date(timeIntervalSince1970: 1),
            changes: changes, transactionID: 3)
        let text = try ChangeLog.payload(of: record)
        #expect(!text.utf8.contains(ChangeLog.payloadSeparator))
        let sent = ChangeLog.combined([text, text])
        #expect(Array(ChangeLog.separated(notifications(sent))) == [text, text])
    }

    @Test func aPayloadAloneGoesAsItIs() throws {
        let one = try payload(1)
        #expect(ChangeLog.combined([one]) == [one])
        #expect(ChangeLog.combined([]) == [])
        // A bare id (a record too large for its payload) and a single payload read as they are.
        #expect(Array(ChangeLog.separated(notifications(["42", one]))) == ["42", one])
        #expect(Array(ChangeLog.separated([])).isEmpty)
    }

    @Test func noNotificationIsLongerThanPostgreSQLTakesAndNothingIsLostOrReordered() throws {
        // Sizes around the limit: some pairs fit, some do not; one fills a notification alone.
        let sizes = [3_000, 3_000, 2_500, 7_000, 100, 7_900, 10, 10, 4_000, 3_990]
        let payloads = try sizes.enumerated().map { try payload(Int64($0.offset + 1), extra: $0.element) }
        let full = String(repeating: "9", count: ChangeLog.maximumNotificationBytes)  // as long as one may be
        let all = payloads + [full, "1", "2"]
        let sent = ChangeLog.combined(all)
        #expect(sent.allSatisfy { $0.utf8.count <= ChangeLog.maximumNotificationBytes })
        #expect(sent.count < all.count, "some shared a notification")
        #expect(sent.contains(full), "the full one went alone, unchanged")
        #expect(Array(ChangeLog.separated(notifications(sent))) == all)
        // Combinations among single payloads, in order.
        let mixed = ["7"] + sent + ["8"] + sent
        #expect(Array(ChangeLog.separated(notifications(mixed))) == ["7"] + all + ["8"] + all)
        #expect(!all.contains { $0.utf8.contains(ChangeLog.payloadSeparator) }, "no payload holds the separator")
    }
}
