import Dispatch
import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// An import's one fetch per batch, in a repeatable-read private context, also locks the
/// rows it returns (`FOR NO KEY UPDATE`, in primary-key order) when it is the first
/// statement of its transaction to lock rows: the save then sends no lock statement for
/// the rows it updates. Rows the save locks after that come after the fetch's in the
/// lock order, or are taken without waiting. The locks are seen from another session.
@Suite("An import's fetch locks the rows it returns")
struct FetchLockTests {
    /// Whether another session can lock user `userID` `FOR NO KEY UPDATE` at once.
    static func canLock(_ userID: String, in manager: ContextManager, mode: String = "FOR NO KEY UPDATE") throws -> Bool {
        let probe = try Connection(manager.coordinator.pool.configuration)
        defer { probe.close() }
        do {
            try probe.execute("SELECT 1 FROM users WHERE user_id = $1 \(mode) NOWAIT", [userID])
            return true
        } catch let error as PostgresError where error.sqlState == .lockNotAvailable {
            return false
        }
    }

    /// The users `userID` `u<first>`… `u<last>` as records named `name`.
    static func records(_ range: ClosedRange<Int>, name: String) -> [JSONValue] {
        range.map { .object(["UserID": .string("u\($0)"), "Name": .string(name)]) }
    }

    static func importRecords(_ records: [JSONValue], in context: ManagedObjectContext) throws -> [User] {
        try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) {
            record, user in user.name = record["Name"]?.stringValue
        }
    }

    @Test func theFetchLocksItsRowsAndTheSaveSendsNoLockStatement() throws {
        let saved = try RowLocationSaveTests.withImporter(seeding: 40, expecting: "imported", version: 2) { manager, importer in
            let users = try Self.importRecords(Self.records(0...39, name: "imported"), in: importer)
            #expect(users.allSatisfy { importer.holdsRowLock(of: $0) && importer.rowLocation(of: $0) != nil })
            // Locked against other writers, not against rows that reference them.
            #expect(try !Self.canLock("u7", in: manager))
            #expect(try Self.canLock("u7", in: manager, mode: "FOR KEY SHARE"))
            let position = try #require(manager.coordinator.model.insertOrder.firstIndex { $0.name == "User" })
            let highest = try #require(users.compactMap(\.objectID.primaryKey).max())
            #expect(importer.transaction.lockFrontier == .init(entityPosition: position, primaryKey: highest))
            let before = manager.coordinator.statementCount
            try importer.save()
            // The UPDATE (by location), the change record and the COMMIT: no lock statement.
            #expect(manager.coordinator.statementCount - before == 3)
            let updatesByLocation = manager.coordinator.updateStatements.withLock { $0.keys.filter(\.byLocation).count }
            #expect(updatesByLocation == 1)
            #expect(try Self.canLock("u7", in: manager))
        }
        #expect(saved == 40)
    }

    /// A record that turns out unchanged keeps its row locked until the batch ends (the
    /// save, which then writes nothing, or a rollback).
    @Test func anUnchangedRecordStaysLockedUntilTheBatchEnds() throws {
        let saved = try RowLocationSaveTests.withImporter(seeding: 10, expecting: "seeded", version: 1) { manager, importer in
            _ = try Self.importRecords(Self.records(0...9, name: "seeded"), in: importer)
            #expect(!importer.hasChanges)
            #expect(try !Self.canLock("u3", in: manager))
            try importer.save()
            #expect(try Self.canLock("u3", in: manager))
            _ = try Self.importRecords(Self.records(0...9, name: "seeded"), in: importer)
            #expect(try !Self.canLock("u3", in: manager))
            importer.rollback()
            #expect(try Self.canLock("u3", in: manager))
        }
        #expect(saved == 10)
    }

    /// Only the first fetch of a transaction to lock rows locks: a second batch before
    /// the save reads its rows' locations without locking them, and the save locks those
    /// rows by key — without waiting, as they come before the first batch's in the lock
    /// order (seeded users `u0`… have ascending keys).
    @Test func aSecondBatchInTheSameTransactionDoesNotLockInItsFetch() throws {
        let saved = try RowLocationSaveTests.withImporter(seeding: 20, expecting: "imported", version: 2) { manager, importer in
            let later = try Self.importRecords(Self.records(10...19, name: "imported"), in: importer)
            let earlier = try Self.importRecords(Self.records(0...9, name: "imported"), in: importer)
            #expect(later.allSatisfy { importer.holdsRowLock(of: $0) })
            #expect(earlier.allSatisfy { !importer.holdsRowLock(of: $0) && importer.rowLocation(of: $0) != nil })
            #expect(try Self.canLock("u3", in: manager) && !Self.canLock("u13", in: manager))
            try importer.save()
        }
        #expect(saved == 20)
    }

    /// A row the save must lock that comes before the fetch's rows in the lock order,
    /// held by another session: the save fails at once with `lockNotAvailable`
    /// (transient, as an import retries) instead of waiting while it holds the fetch's
    /// rows, which could close a cycle. Nothing is written; once the row is free, the
    /// save goes through.
    @Test func aRowBeforeTheFetchsRowsHeldElsewhereFailsTheSaveAtOnce() throws {
        try ExampleSchema.withManager { manager in
            try RowLocationSaveTests.seedUsers(40, in: manager)
            let holder = try Connection(manager.coordinator.pool.configuration)
            defer { holder.close() }
            let importer = manager.newPrivateContext(name: "importer")
            try importer.performAndWait {
                _ = try Self.importRecords(Self.records(20...39, name: "imported"), in: importer)
                let early = try #require(try User.fetch(in: importer, where: "userID == %@", "u5").first)
                early.name = "edited"
                try holder.execute("BEGIN")
                try holder.execute("SELECT 1 FROM users WHERE user_id = 'u5' FOR NO KEY UPDATE")
                let started = ContinuousClock.now
                let error = #expect(throws: PostgresError.self) { try importer.save() }
                #expect(error?.sqlState == .lockNotAvailable && error?.isTransient == true)
                #expect(ContinuousClock.now - started < .seconds(4), "it did not wait for the lock timeout")
                #expect(importer.hasChanges, "the changes are kept for a retry")
                try holder.execute("COMMIT")
                try importer.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'imported' AND version = 2", in: manager) == 20)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'edited' AND version = 2", in: manager) == 1)
        }
    }

    /// A row that comes after the fetch's rows in the lock order is waited for as
    /// before.
    @Test func aRowAfterTheFetchsRowsHeldElsewhereIsWaitedFor() throws {
        try ExampleSchema.withManager { manager in
            try RowLocationSaveTests.seedUsers(40, in: manager)
            let holder = try Connection(manager.coordinator.pool.configuration)
            defer { holder.close() }
            let importer = manager.newPrivateContext(name: "importer")
            try importer.performAndWait {
                _ = try Self.importRecords(Self.records(0...19, name: "imported"), in: importer)
                let late = try #require(try User.fetch(in: importer, where: "userID == %@", "u30").first)
                late.name = "edited"
            }
            try holder.execute("BEGIN")
            try holder.execute("SELECT 1 FROM users WHERE user_id = 'u30' FOR NO KEY UPDATE")
            let failure = Mutex<String?>(nil)
            let saving = DispatchGroup()
            DispatchQueue.global().async(group: saving) {
                do { try importer.performAndWait { try importer.save() } } catch { failure.withLock { $0 = "\(error)" } }
            }
            try eventually("the save waits for the held row") {
                try holder.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )[0].decode(Int.self, at: 0) == 1
            }
            try holder.execute("COMMIT")
            saving.wait()
            #expect(failure.withLock { $0 } == nil)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE version = 2", in: manager) == 21)
        }
    }

    /// At read committed (the import operations' level) the fetch locks nothing.
    @Test func aReadCommittedImportsFetchLocksNothing() throws {
        let saved = try RowLocationSaveTests.withImporter(
            seeding: 10, isolation: .readCommitted, expecting: "imported", version: 2
        ) { manager, importer in
            let users = try Self.importRecords(Self.records(0...9, name: "imported"), in: importer)
            #expect(users.allSatisfy { !importer.holdsRowLock(of: $0) })
            #expect(try Self.canLock("u3", in: manager))
            try importer.save()
        }
        #expect(saved == 10)
    }
}
