import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

#if canImport(Glibc)
    import Glibc
#endif

/// On a host whose processes share a relay, the hosting process reads the change log for
/// all of them: it checks for records no notification announced, passes on what its reads
/// find, then each read's position, which the others adopt. So the host's other processes
/// send no statement to follow other processes' saves — neither the once-a-second check
/// nor the reads that move their positions on — and a save whose process died before
/// its notification still reaches them within the check interval.
///
/// Heavy: its tests wait for seconds (20 writer processes started and killed, quiet
/// spells). On the cooperative pool's two threads, beside the other process-killing test
/// (`NotificationAfterCommitTests`), they left none for async tests, and a pool test's
/// tasks timed out waiting for a connection their holders could not give back.
@Suite("The relay's host reads the log for the host", .heavy)
struct RelayHostCheckTests {
    /// A fresh database with the example schema, a process-like manager hosting the relay
    /// (with `hostReconnectDelay` as its listener's backoff) and a second one following
    /// it, whose records `body` gets.
    private func withHostAndFollower(
        hostReconnectDelay: Duration = .milliseconds(50),
        _ body: (_ host: ContextManager, _ follower: ContextManager, RecordCollector, ConnectionConfiguration) throws -> Void
    ) throws {
        let directory = NSTemporaryDirectory() + "pgdatakit-relay-check-" + UUID().uuidString.prefix(8)
        #expect(mkdir(directory, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try ExampleSchema.makeManager(configuration).close()  // the schema
            let options = ChangeLogOptions(relay: .directory(directory))
            var hostOptions = options
            hostOptions.reconnectDelay = hostReconnectDelay
            hostOptions.maximumReconnectDelay = max(hostReconnectDelay, options.maximumReconnectDelay)
            let host = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, changeLog: hostOptions)
            defer { host.close() }
            let hostToken = host.coordinator.observeRemoteChanges { _ in }
            defer { hostToken.cancel() }
            try eventually("the first manager hosts the relay") {
                host.coordinator.hostsListenerRelay && host.coordinator.listenerUsesRelay
            }
            let follower = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, changeLog: options)
            defer { follower.close() }
            let records = RecordCollector()
            let token = follower.coordinator.observeRemoteChanges { records.append($0) }
            defer { token.cancel() }
            try eventually("the second manager follows the relay and pruned once") {
                follower.coordinator.listenerUsesRelay && !follower.coordinator.hostsListenerRelay
                    && follower.coordinator.listener.pruneAttempts >= 1 && host.coordinator.listener.pruneAttempts >= 1
            }
            try body(host, follower, records, configuration)
        }
    }

    /// When the server last saw the follower's log session change state (a statement
    /// makes it active, then idle).
    private func lastActivity(of follower: ContextManager, _ admin: Connection) throws -> String {
        let pid = try #require(follower.coordinator.listenerBackendPID)
        let rows = try admin.query("SELECT state_change::text FROM pg_stat_activity WHERE pid = $1", [pid])
        return try #require(rows.first).decode(String.self, at: 0)
    }

    /// A writer process killed after its save committed and before its notification went
    /// out: the follower gets the record from the relay's host, within the default check
    /// interval (one second; the test allows half a second more for a loaded machine), 20
    /// times out of 20, and its own session runs no statement meanwhile.
    @Test(.timeLimitOnceRunning(.seconds(180)))
    func aSaveWhoseProcessDiedReachesAFollowerThroughTheHost() throws {
        try withHostAndFollower { _, follower, records, configuration in
            let admin = try Connection(configuration)
            defer { admin.close() }
            let before = try lastActivity(of: follower, admin)
            let delays = try killWritersBeforeTheirNotifications(
                20, configuration, environment: ["PGDATAKIT_TEST_RELAY": "off"]
            ) { records.all.count }
            let slowest = delays.max() ?? .zero
            #expect(slowest < .milliseconds(1_500), "slowest \(slowest)")
            #expect(Set(records.all.map(\.id)).count == 20)
            #expect(try lastActivity(of: follower, admin) == before, "the follower's session ran a statement")
            print("unannounced saves through the relay's host: slowest \(slowest), all \(delays)")
        }
    }

    /// Another process saves 60 times: the follower gets each record once, and its
    /// session runs no statement — not while the saves come, and not after they stop,
    /// when without the host's positions it would read the log to confirm what the
    /// payloads delivered (three seconds later, as a follower; waited for here).
    @Test func aFollowerAdoptsTheHostsPositionsInsteadOfReadingTheLog() throws {
        try withHostAndFollower { host, follower, records, configuration in
            let admin = try Connection(configuration)
            defer { admin.close() }
            let before = try lastActivity(of: follower, admin)
            var options = ChangeLogOptions(relay: .off)
            options.unannouncedCheckInterval = nil
            let writer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, changeLog: options)
            defer { writer.close() }
            for index in 0..<60 {
                let context = writer.newPrivateContext()
                try context.performAndWait {
                    User(context: context).userID = "adopted-\(index)"
                    try context.save()
                }
            }
            try eventually("every save arrived") { records.all.count == 60 }
            Thread.sleep(forTimeInterval: 4)
            let logged = try admin.query("SELECT id FROM \(ChangeLog.table) ORDER BY id").map { try $0.decode(Int64.self, at: 0) }
            #expect(records.all.map(\.id).sorted() == logged, "each record once")
            #expect(try lastActivity(of: follower, admin) == before, "the follower's session ran a statement")
            #expect(host.coordinator.hostsListenerRelay)
        }
    }

    /// The hosting process stops checking for the host — its listener's session dropped
    /// and waits a minute to reconnect (as it also stops while it listens on a session of
    /// its own) — so its positions stop coming: after three check intervals without one,
    /// the follower checks the log itself, and a save whose process died reaches it within
    /// the interval again (half a second more allowed for a loaded machine), 5 times out
    /// of 5, while the host's listener is still away.
    @Test(.timeLimitOnceRunning(.seconds(180)))
    func aFollowerChecksTheLogItselfWhileTheHostDoesNot() throws {
        try withHostAndFollower(hostReconnectDelay: .seconds(60)) { host, follower, records, configuration in
            let admin = try Connection(configuration)
            defer { admin.close() }
            let hostListener = try #require(host.coordinator.listenerBackendPID)
            _ = try admin.query("SELECT pg_terminate_backend($1)", [hostListener])
            try eventually("the host's listener lost its session") { host.coordinator.listenerBackendPID == nil }
            let before = try lastActivity(of: follower, admin)
            Thread.sleep(forTimeInterval: 3.5)
            let delays = try killWritersBeforeTheirNotifications(
                5, configuration, environment: ["PGDATAKIT_TEST_RELAY": "off"]
            ) { records.all.count }
            let slowest = delays.max() ?? .zero
            #expect(slowest < .milliseconds(1_500), "slowest \(slowest)")
            #expect(Set(records.all.map(\.id)).count == 5)
            #expect(try lastActivity(of: follower, admin) != before, "the follower never checked the log")
            #expect(host.coordinator.listenerBackendPID == nil, "the host's listener came back meanwhile")
            print("unannounced saves while the relay's host did not check: slowest \(slowest), all \(delays)")
        }
    }

    /// A following process hands its saves' payloads to the hosting process through the
    /// relay, whose notifier sends them with its own: the follower opens no notifier
    /// session and commits no notifying transaction (the server shows one notifier
    /// session), and a process on a session of its own gets each save once. Once the
    /// hosting process has closed, the follower notifies on its own session again.
    @Test(.timeLimitOnceRunning(.seconds(120)))
    func aFollowersSavesAreNotifiedByTheHostingProcess() throws {
        try withHostAndFollower { host, follower, _, configuration in
            let admin = try Connection(configuration)
            defer { admin.close() }
            let observer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, changeLog: ChangeLogOptions(relay: .off))
            defer { observer.close() }
            let records = RecordCollector()
            let token = observer.coordinator.observeRemoteChanges { records.append($0) }
            defer { token.cancel() }
            func save(_ name: String) throws {
                let context = follower.newPrivateContext()
                try context.performAndWait {
                    User(context: context).userID = name
                    try context.save()
                }
            }
            for index in 0..<30 { try save("routed-\(index)") }
            try eventually("every save reached the observer") { records.all.count == 30 }
            #expect(Set(records.all.map(\.id)).count == 30, "each once")
            try eventually("the hosting process sent them") { host.coordinator.notifier.counts.payloads == 30 }
            let routed = follower.coordinator.notifier.counts
            #expect(routed.transactions == 0 && routed.payloads == 0 && routed.routed == 30)
            let sessions = try admin.query(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
                [ChangeNotifier.applicationName])
            #expect(try sessions[0].decode(Int.self, at: 0) == 1, "the hosting process's notifier only")

            host.close()
            try eventually("the follower hosts the relay now") { follower.coordinator.hostsListenerRelay }
            for index in 0..<5 { try save("own-\(index)") }
            try eventually("the later saves reached the observer") { records.all.count == 35 }
            try eventually("on the follower's own session") { follower.coordinator.notifier.counts.payloads == 5 }
        }
    }
}
