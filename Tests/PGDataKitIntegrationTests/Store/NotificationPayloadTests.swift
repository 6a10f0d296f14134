import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Notifications carry the change record itself when it fits, so a process that holds
/// none of the changed objects does no work for another process's save.
@Suite("Change records in notification payloads")
struct NotificationPayloadTests {
    /// Two managers on one fresh database: a writer and an observer whose main context
    /// holds nothing.
    private func withWriterAndObserver(_ body: (ContextManager, ContextManager, ConnectionConfiguration) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let writer = try ExampleSchema.makeManager(configuration)
            defer { writer.close() }
            let observer = try ContextManager(configuration: configuration, entities: ExampleSchema.entities)
            defer { observer.close() }
            try body(writer, observer, configuration)
        }
    }

    private func wait(_ what: String, _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + patience
        while try !condition() {
            if ContinuousClock.now > deadline { throw TestFailure("timed out waiting until \(what)") }
            usleep(2_000)
        }
    }

    /// The observer's listener session sends nothing while other processes' saves arrive
    /// (the server's view of that session: its last statement and when its state last
    /// changed); once they stop, one read moves its position past them (its state changes
    /// once, then not again); every record arrives once, across a reconnect. (The regular
    /// check for unannounced records is off here: it goes by time, not by saves. The
    /// observer listens on its own session: following the writer's relay it would not
    /// read the log at all, `RelayHostCheckTests`.)
    @Test func anIdleObserverSendsNoQueryPerRemoteSave() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let writer = try ExampleSchema.makeManager(configuration)
            defer { writer.close() }
            var options = ChangeLogOptions(relay: .off)
            options.unannouncedCheckInterval = nil
            let observer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, changeLog: options)
            defer { observer.close() }
            let records = RecordCollector()
            let token = observer.coordinator.observeRemoteChanges { records.append($0) }
            defer { token.cancel() }
            let admin = try Connection(configuration)
            defer { admin.close() }
            try wait("the listener runs") { observer.coordinator.listener.backendPID != nil }
            let pid = try #require(observer.coordinator.listener.backendPID)
            // Quiet first: the listener prunes once when it starts (on its session), and any
            // read after it started is done.
            try wait("the listener's first prune") { observer.coordinator.listener.pruneAttempts >= 1 }
            Thread.sleep(forTimeInterval: ChangeListener.quietReadDelay.seconds + 0.3)
            func session() throws -> String {
                try admin.query(
                    "SELECT query || ' @ ' || state_change::text FROM pg_stat_activity WHERE pid = $1", [pid]
                )[0].decode(String.self, at: 0)
            }
            let before = try session()
            let context = writer.newPrivateContext()
            try context.performAndWait {
                for index in 0..<30 {
                    User(context: context).userID = "u\(index)"
                    try context.save()
                }
            }
            try wait("30 records arrived") { records.all.count >= 30 }
            #expect(try session() == before, "the listener sent a statement while saves arrived")
            #expect(records.all.count == 30)
            #expect(Set(records.all.map(\.id)).count == 30)
            // Quiet: one read, then nothing more.
            Thread.sleep(forTimeInterval: ChangeListener.quietReadDelay.seconds + 0.5)
            let afterQuietRead = try session()
            #expect(afterQuietRead != before, "no read once quiet")
            Thread.sleep(forTimeInterval: ChangeListener.quietReadDelay.seconds + 0.5)
            #expect(try session() == afterQuietRead, "the listener read the log again with nothing new")
            #expect(records.all.count == 30, "the quiet read handed on a record again")
            // The position it stands at is exact: after a lost connection its catch-up
            // read hands on what committed meanwhile, once, and nothing again.
            _ = try admin.query("SELECT pg_terminate_backend($1)", [pid])
            try context.performAndWait {
                for index in 30..<35 {
                    User(context: context).userID = "u\(index)"
                    try context.save()
                }
            }
            try wait("35 records arrived") { records.all.count >= 35 }
            Thread.sleep(forTimeInterval: 0.5)
            #expect(records.all.count == 35)
            #expect(Set(records.all.map(\.id)).count == 35)
        }
    }

    /// A record too large for its notification (its id only) among small ones: every
    /// record is handed on exactly once, in the order of the saves, and the observer's
    /// main context ends equal to the table.
    @Test func largeAndSmallRecordsInterleavedArriveOnceInOrder() throws {
        try withWriterAndObserver { writer, observer, _ in
            let records = RecordCollector()
            let token = observer.coordinator.observeRemoteChanges { records.append($0) }
            defer { token.cancel() }
            try wait("the listener runs") { observer.coordinator.listener.backendPID != nil }
            let context = writer.newPrivateContext()
            var sizes: [Int] = []
            try context.performAndWait {
                for (round, size) in [1, 2_000, 1, 1, 3_000, 1].enumerated() {
                    for index in 0..<size { User(context: context).userID = "r\(round)-\(index)" }
                    try context.save()
                    sizes.append(size)
                }
            }
            try wait("6 records arrived") { records.all.count >= 6 }
            Thread.sleep(forTimeInterval: ChangeListener.quietReadDelay.seconds + 0.5)  // a quiet read adds nothing
            let all = records.all
            #expect(all.count == 6)
            #expect(all.map(\.changes.inserted.count) == sizes)
            #expect(all.map(\.id) == all.map(\.id).sorted())
            let total = try ExampleSchema.count("SELECT count(*) FROM users", in: writer)
            let merged = observer.mainContext.performAndWait { observer.mainContext.registeredObjects.count }
            #expect(total == sizes.reduce(0, +))
            #expect(merged == 0)  // it held nothing, so it loaded nothing
        }
    }

    /// A process that never read its main context and has no other observer reads only
    /// each notification's header (`ChangeListener.add(_:wants:)`); an observer added later
    /// gets every record it is handed whole, and once the main context is read, other
    /// processes' saves merge into it as before.
    @Test func changesAreReadOnceSomeoneWantsThem() throws {
        try withWriterAndObserver { writer, observer, _ in
            let context = writer.newPrivateContext()
            func save(_ body: @escaping (ManagedObjectContext) throws -> Void) throws {
                try context.performAndWait {
                    try body(context)
                    try context.save()
                }
            }
            let listener = observer.coordinator.listener
            try wait("the listener runs") { listener.backendPID != nil }
            let wakes = Atomic<Int>(0)
            let waker = listener.addWaker { wakes.add(1, ordering: .sequentiallyConsistent) }
            defer { listener.remove(waker) }
            let woken = wakes.load(ordering: .sequentiallyConsistent)
            try save { User(context: $0).userID = "before" }
            // Handled with its changes unread (nobody wants them; the listener wakes its
            // wakers after each arrival).
            try wait("the notification was handled") { wakes.load(ordering: .sequentiallyConsistent) > woken }
            let records = RecordCollector()
            let token = observer.coordinator.observeRemoteChanges { records.append($0) }
            defer { token.cancel() }
            try save { User(context: $0).userID = "after" }
            try wait("the next record arrived") { records.all.contains { $0.changes.inserted.count == 1 } }
            #expect(records.all.allSatisfy { $0.changes.inserted.count == 1 })
            let main = observer.mainContext
            let user = try main.performAndWait { try #require(try User.first(in: main, where: "userID == %@", "after")) }
            try save { context in
                let renamed = try #require(try User.first(in: context, where: "userID == %@", "after"))
                renamed.name = "renamed elsewhere"
            }
            try wait("the rename merged into the main context") { main.performAndWait { user.name == "renamed elsewhere" } }
        }
    }
}

/// Records handed to an observer, in order.
final class RecordCollector: Sendable {
    private let records = Mutex<[ChangeRecord]>([])

    func append(_ record: ChangeRecord) { records.withLock { $0.append(record) } }
    var all: [ChangeRecord] { records.withLock { $0 } }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// A process that only writes opens no listening session (SeveralProcesses.md's advice past the
/// notification ceiling: fewer listening sessions per host).
@Suite("Writers that do not merge do not listen")
struct WriterWithoutListenerTests {
    @Test(arguments: [false, true])
    func aManagerThatDoesNotMergeOpensNoListenerSession(merges: Bool) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let setup = try ExampleSchema.makeManager(configuration)
            setup.close()
            let writer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, automaticallyMergesRemoteChanges: merges)
            defer { writer.close() }
            let context = writer.newPrivateContext()
            try context.performAndWait {
                User(context: context).userID = "w"
                try context.save()
            }
            func listeners() throws -> Int {
                try writer.coordinator.pool.withConnection { connection in
                    try connection.query(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
                        [ChangeListener.applicationName]
                    )[0].decode(Int.self, at: 0)
                }
            }
            if merges {
                // (The check itself: a merging manager's session does show.)
                let deadline = ContinuousClock.now + patience
                while try listeners() == 0 && ContinuousClock.now < deadline { usleep(10_000) }
                #expect(try listeners() == 1)
            } else {
                Thread.sleep(forTimeInterval: 0.3)
                #expect(writer.coordinator.listenerBackendPID == nil)
                #expect(try listeners() == 0)
            }
        }
    }
}
