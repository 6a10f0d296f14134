import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

#if canImport(Glibc)
    import Glibc
#endif

/// A promoted standby hands out again the transaction ids that the old primary had
/// given to transactions the standby never heard of: its next id is one past the last it
/// replayed. Nothing keyed by transaction id alone survives a failover unchecked. Each
/// test pauses the primary's WAL sender (`SIGSTOP`), so what the primary writes next
/// never reaches the standby, stops the primary, promotes the standby, and makes a new
/// transaction take such an id before the library's session reaches the new primary
/// (through a proxy that refuses connections until then).
@Suite("Transaction ids reused after a failover", .serialized, .heavy)
struct FailoverIDReuseTests {
    /// The topology, a database on it, a proxy in front of the standby that refuses
    /// connections, and the multi-host configuration through that proxy.
    func withFailoverRig(
        _ body: (ReplicatedPostgres, CuttingProxy, ConnectionConfiguration) throws -> Void
    ) throws {
        try ReplicatedPostgres.withTopology { topology in
            let database = "reuse"
            try topology.createDatabase(database)
            let proxy = try CuttingProxy(inFrontOf: topology.standbyConfiguration(database)) { _ in }
            defer { proxy.close() }
            proxy.refuseConnections(true)
            let port = try #require(proxy.configuration.overrides["port"].flatMap { Int($0) })
            var configuration = topology.failoverConfiguration(database, secondPort: port)
            configuration.overrides["sslmode"] = "disable"
            configuration.overrides["gssencmode"] = "disable"
            try body(topology, proxy, configuration)
        }
    }

    /// Saves one new user in a private context of `manager`.
    func saveUser(_ userID: String, _ manager: ContextManager) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            User(context: context).userID = userID
            try context.save()
        }
    }

    /// Waits until `condition` holds.
    @Test func aSaveLostWithThePrimaryIsNotTakenForTheNewTransactionWithItsID() throws {
        try withFailoverRig { topology, proxy, configuration in
            let manager = try ContextManager(
                configuration: configuration, entities: [User.self, Post.self], automaticallyMergesRemoteChanges: false)
            defer { manager.close() }
            manager.coordinator.commitOutcomeTimeout = .seconds(60)
            try saveUser("before", manager)
            let primary = try Connection(topology.primaryConfiguration("reuse"))
            defer { primary.close() }
            let walSender = try topology.walSenderPID()
            kill(walSender, SIGSTOP)

            // The save's COMMIT is written on the primary and waits for the standby.
            let outcome = OutcomeBox()
            let saving = Thread { [self] in
                do {
                    try saveUser("lost", manager)
                    outcome.set(nil)
                } catch {
                    outcome.set(error)
                }
            }
            saving.start()
            var lostID: UInt64 = 0
            try eventually("the save waits for the standby") {
                let rows = try primary.query(
                    "SELECT backend_xid::text FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND datname = 'reuse'")
                // (`backend_xid` comes from the server's status snapshot, taken before the
                // wait events are read: a session that got its id and began to wait in
                // between shows the wait with no id yet. Asked again, not decoded as text.)
                lostID = try rows.first.flatMap { try $0.decode(String?.self, at: 0).flatMap { UInt64($0) } } ?? 0
                return lostID != 0
            }
            try topology.stopPrimary(withPausedWALSender: walSender)
            try topology.promoteStandby()

            // Another process's transactions on the new primary, until one has that id.
            let promoted = try Connection(topology.standbyConfiguration("reuse"))
            defer { promoted.close() }
            var ids: [UInt64] = []
            while ids.count < 50, (ids.last ?? 0) < lostID {
                let id = try promoted.transaction { connection in
                    try connection.execute("INSERT INTO users (user_id) VALUES ($1)", ["new-\(ids.count)"])
                    return try connection.query("SELECT pg_current_xact_id()::text")[0].decode(String.self, at: 0)
                }
                ids.append(UInt64(id) ?? 0)
            }
            try #require(ids.contains(lostID), "the new primary did not give out \(lostID) again: \(ids)")

            // Now the save's lookup reaches the new primary.
            proxy.refuseConnections(false)
            try eventually("the save returns", timeout: .seconds(60)) { outcome.isSet }
            let stored = try promoted.query("SELECT count(*) FROM users WHERE user_id = 'lost'")[0].decode(Int.self, at: 0)
            #expect(stored == 0)
            let error = try #require(outcome.error, "the save was reported committed, but the new primary does not have it")
            let failure = try #require(error as? PostgresError, "\(error)")
            #expect(failure.transactionDidNotCommit)
            #expect(failure.isTransient)
        }
    }

    @Test func aListenerCatchesUpWithARecordWhoseIDTheOldPrimaryHadGivenOut() throws {
        try withFailoverRig { topology, proxy, configuration in
            let observer = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { observer.close() }
            let received = RecordIDs()
            let token = observer.coordinator.observeRemoteChanges { received.append($0.id) }
            defer { token.cancel() }
            let oldWriter = try ContextManager(
                configuration: topology.primaryConfiguration("reuse"), entities: [User.self, Post.self],
                automaticallyMergesRemoteChanges: false)
            defer { oldWriter.close() }
            try saveUser("before", oldWriter)
            try eventually("the first record reaches the observer") { received.ids.count == 1 }

            // Transactions that roll back do not wait for the standby: their ids are spent
            // on the primary only. A second later, with notifications quiet, the observer's
            // listener reads the log to move its position on, past those ids.
            let primary = try Connection(topology.primaryConfiguration("reuse"))
            defer { primary.close() }
            let walSender = try topology.walSenderPID()
            kill(walSender, SIGSTOP)
            for _ in 0..<3 {
                try primary.executeScript("BEGIN; INSERT INTO users (user_id) VALUES ('rolled back'); ROLLBACK")
            }
            let spent = try UInt64(
                primary.query("SELECT pg_snapshot_xmax(pg_current_snapshot())::text")[0].decode(String.self, at: 0)) ?? 0
            usleep(1_500_000)

            try topology.stopPrimary(withPausedWALSender: walSender)
            try topology.promoteStandby()
            let newWriter = try ContextManager(
                configuration: topology.standbyConfiguration("reuse"), entities: [User.self, Post.self],
                automaticallyMergesRemoteChanges: false)
            defer { newWriter.close() }
            try saveUser("after the failover", newWriter)
            let promoted = try Connection(topology.standbyConfiguration("reuse"))
            defer { promoted.close() }
            let row = try promoted.query("SELECT id, transaction_id::text FROM pgdatakit_changes ORDER BY id DESC LIMIT 1")[0]
            let recordID = try row.decode(Int64.self, at: 0)
            let transactionID = UInt64(try row.decode(String.self, at: 1)) ?? .max
            try #require(transactionID < spent, "the new primary did not give out a spent id again: \(transactionID)")

            proxy.refuseConnections(false)
            try eventually("the observer's listener reconnects") { observer.coordinator.listenerReconnectCount >= 1 }
            try eventually("the record reaches the observer") { received.ids.contains(recordID) }
            #expect(received.ids.count == 2)
        }
    }
}

/// What a save on another thread ended with.
final class OutcomeBox: @unchecked Sendable {
    // Safe: every access holds `lock`.
    private let lock = NSLock()
    private var done = false
    private var failure: (any Error)?

    func set(_ error: (any Error)?) {
        lock.withLock {
            done = true
            failure = error
        }
    }

    var isSet: Bool { lock.withLock { done } }
    var error: (any Error)? { lock.withLock { failure } }
}

/// Record ids an observer received.
final class RecordIDs: @unchecked Sendable {
    // Safe: every access holds `lock`.
    private let lock = NSLock()
    private var received: [Int64] = []

    func append(_ id: Int64) { lock.withLock { received.append(id) } }
    var ids: [Int64] { lock.withLock { received } }
}
