import Foundation
import Logging
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

#if canImport(Glibc)
    import Glibc
#endif

/// One `LISTEN` session per host (`ListenerRelay`), with real OS processes: the server
/// shows one relay session however many processes listen, every process still gets every
/// save exactly once (checked against the change log), and losing the host process or
/// the relay's session loses nothing.
@Suite("One listening session per host (the listener relay)", .heavy)
struct ListenerRelayTests {
    /// A fresh relay directory (mode 700) for one test, removed afterwards; each test
    /// meets its own processes only.
    func withRelayDirectory<T>(_ body: (String) throws -> T) throws -> T {
        let path = NSTemporaryDirectory() + "pgdatakit-relay-test-" + UUID().uuidString.prefix(8)
        #expect(mkdir(path, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try body(path)
    }

    func makeManager(_ configuration: ConnectionConfiguration, relay: ListenerRelay) throws -> ContextManager {
        let connection = try Connection(configuration)
        defer { connection.close() }
        try connection.executeScript(try ExampleSchema.extraTables)
        var options = ChangeLogOptions(relay: relay)
        options.relayRetryDelay = .seconds(1)  // as the helper processes (a loaded machine)
        return try ContextManager(configuration: configuration, entities: ExampleSchema.entities, changeLog: options)
    }

    /// Sessions of this database by application name.
    func sessions(_ admin: Connection, named name: String) throws -> Int {
        try admin.query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1", [name]
        )[0].decode(Int.self, at: 0)
    }

    /// Every change record's id, in id order.
    func loggedIDs(_ admin: Connection) throws -> [Int64] {
        try admin.query("SELECT id FROM \(ChangeLog.table) ORDER BY id").map { try $0.decode(Int64.self, at: 0) }
    }

    func insert(_ manager: ContextManager, _ ids: some Sequence<String>) throws {
        for id in ids {
            let context = manager.newPrivateContext()
            try context.performAndWait {
                User(context: context).userID = id
                try context.save()
            }
        }
    }

    /// The watcher's record ids must be the change log's, each once.
    func expectEveryRecordOnce(_ watcher: HelperProcess, _ admin: Connection, _ what: String) throws {
        let logged = try loggedIDs(admin)
        try watcher.waitForRecords(logged.count)
        let seen = watcher.records.map(\.id)
        #expect(seen.count == logged.count, "\(what): \(seen.count) records for \(logged.count) saves")
        #expect(seen.sorted() == logged, "\(what): each logged record once")
    }

    /// A relay of its own on channel `relay_test` in a fresh database and relay
    /// directory, started, for tests of the relay itself; stopped afterwards.
    func withStartedRelay(
        maximumBacklog: Int = NotificationRelay.defaultMaximumBacklog,
        forward: @escaping @Sendable ([String]) -> Void = { _ in },
        _ body: (NotificationRelay, NotificationRelayEndpoint, ConnectionConfiguration) throws -> Void
    ) throws {
        try withRelayDirectory { directory in
            try TestDatabase.withFreshDatabase { configuration in
                let endpoint = try #require(
                    try NotificationRelayEndpoint(configuration: configuration, channel: "relay_test", directory: directory))
                let lock = try #require(try endpoint.tryLock())
                let relay = try NotificationRelay(
                    endpoint: endpoint, lockDescriptor: lock, configuration: configuration, channel: "relay_test",
                    logger: Logger(label: "test"), maximumBacklog: maximumBacklog, forward: forward)
                defer { relay.stop() }
                try relay.start()
                try body(relay, endpoint, configuration)
            }
        }
    }

    @Test func processesOfAHostShareOneListeningSession() throws {
        try withRelayDirectory { directory in
            try TestDatabase.withFreshDatabase(migrations: true) { configuration in
                let admin = try Connection(configuration)
                defer { admin.close() }
                let manager = try makeManager(configuration, relay: .directory(directory))
                defer { manager.close() }
                try eventually("this process's listener is connected") { manager.coordinator.listenerBackendPID != nil }
                #expect(manager.coordinator.hostsListenerRelay, "the first process of the host hosts")
                let watchers = try (0..<3).map { _ in
                    try HelperProcess.startWatcher(configuration, environment: ["PGDATAKIT_TEST_RELAY": directory])
                }
                defer { watchers.forEach { $0.stop() } }
                for watcher in watchers {
                    // A watcher that could not reach the relay in time listens alone first and
                    // follows the relay at its next try (a second later, in the helper).
                    try watcher.waitUntil("the watcher follows the relay") {
                        $0.contains { $0.hasPrefix("relay uses=true hosts=false") }
                    }
                }
                #expect(manager.coordinator.listenerUsesRelay)
                // The server: one session that listens for the four processes, and one
                // log-reading session per process.
                #expect(try sessions(admin, named: ChangeListener.relayApplicationName) == 1)
                #expect(try sessions(admin, named: ChangeListener.applicationName) == 4)
                try insert(manager, (0..<40).map { "shared\($0)" })
                for (index, watcher) in watchers.enumerated() {
                    try expectEveryRecordOnce(watcher, admin, "watcher \(index)")
                    try watcher.waitForState("watcher \(index) merged every save") { $0["count"] as? Int == 40 }
                }
            }
        }
    }

    @Test func whenTheHostingProcessIsKilledAnotherTakesOverAndNothingIsLost() throws {
        try withRelayDirectory { directory in
            try TestDatabase.withFreshDatabase(migrations: true) { configuration in
                let admin = try Connection(configuration)
                defer { admin.close() }
                let environment = ["PGDATAKIT_TEST_RELAY": directory]
                // The first process hosts; kill it with saves before, during and after.
                let host = try HelperProcess.startWatcher(configuration, environment: environment)
                defer { host.stop() }
                try host.waitUntil("the first process hosts the relay") {
                    $0.contains { $0.hasPrefix("relay uses=true hosts=true") }
                }
                let survivor = try HelperProcess.startWatcher(configuration, environment: environment)
                defer { survivor.stop() }
                // Following the relay before the host dies: a watcher that could not reach
                // the relay in time listens alone first (the relay again a second later),
                // and one still alone when the host dies never loses it nor reconnects.
                try survivor.waitUntil("the survivor follows the relay") {
                    $0.contains { $0.hasPrefix("relay uses=true hosts=false") }
                }
                let manager = try makeManager(configuration, relay: .directory(directory))
                defer { manager.close() }
                try eventually("this process follows the relay") { manager.coordinator.listenerUsesRelay }
                try insert(manager, (0..<20).map { "before\($0)" })
                kill(host.running.pid, SIGKILL)
                try insert(manager, (0..<30).map { "during\($0)" })
                try eventually("another process hosts the relay") {
                    try sessions(admin, named: ChangeListener.relayApplicationName) == 1
                        && manager.coordinator.listenerUsesRelay
                }
                try insert(manager, (0..<20).map { "after\($0)" })
                try expectEveryRecordOnce(survivor, admin, "the surviving watcher")
                try survivor.waitForState("the survivor merged every save") { $0["count"] as? Int == 70 }
                #expect((survivor.lastState?["reconnects"] as? Int ?? 0) >= 1, "the survivor caught up after the host died")
            }
        }
    }

    @Test func aTerminatedRelaySessionLosesNothing() throws {
        try withRelayDirectory { directory in
            try TestDatabase.withFreshDatabase(migrations: true) { configuration in
                let admin = try Connection(configuration)
                defer { admin.close() }
                let manager = try makeManager(configuration, relay: .directory(directory))
                defer { manager.close() }
                try eventually("this process hosts the relay") { manager.coordinator.hostsListenerRelay }
                let watcher = try HelperProcess.startWatcher(configuration, environment: ["PGDATAKIT_TEST_RELAY": directory])
                defer { watcher.stop() }
                // (Following the relay before its session is killed: one still listening
                // alone would not notice.)
                try watcher.waitUntil("the watcher follows the relay") {
                    $0.contains { $0.hasPrefix("relay uses=true hosts=false") }
                }
                var kills = 0
                for round in 0..<3 {
                    try eventually("the relay's session is back") {
                        try sessions(admin, named: ChangeListener.relayApplicationName) == 1
                    }
                    try insert(manager, (0..<10).map { "r\(round)-\($0)" })
                    // (Waiting up to 5 s for the session to end: a terminated backend stays
                    // in pg_stat_activity until it exits, and the next round's "back" would
                    // count it.)
                    kills += try admin.query(
                        "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                            + "WHERE datname = current_database() AND application_name = $1",
                        [ChangeListener.relayApplicationName])[0].decode(Int.self, at: 0)
                    // Saves while the relay reconnects reach the watcher only by its catch-up.
                    try insert(manager, (0..<10).map { "r\(round)-gap\($0)" })
                }
                #expect(kills == 3)
                try expectEveryRecordOnce(watcher, admin, "the watcher")
                try watcher.waitForState("the watcher merged every save") { $0["count"] as? Int == 60 }
                #expect((watcher.lastState?["reconnects"] as? Int ?? 0) >= 1)
            }
        }
    }

    @Test func withTheRelayOffEachProcessListensOnItsOwnSession() throws {
        try withRelayDirectory { directory in
            try TestDatabase.withFreshDatabase(migrations: true) { configuration in
                let admin = try Connection(configuration)
                defer { admin.close() }
                let manager = try makeManager(configuration, relay: .off)
                defer { manager.close() }
                let watcher = try HelperProcess.startWatcher(configuration, environment: ["PGDATAKIT_TEST_RELAY": "off"])
                defer { watcher.stop() }
                try watcher.waitUntil("the watcher says how it listens") { $0.contains { $0.hasPrefix("relay ") } }
                #expect(watcher.lines.contains { $0.hasPrefix("relay uses=false hosts=false") })
                #expect(!manager.coordinator.listenerUsesRelay && !manager.coordinator.hostsListenerRelay)
                #expect(try sessions(admin, named: ChangeListener.relayApplicationName) == 0)
                #expect(try sessions(admin, named: ChangeListener.applicationName) == 2)
                try insert(manager, (0..<10).map { "own\($0)" })
                try expectEveryRecordOnce(watcher, admin, "the watcher")
                #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
            }
        }
    }

    @Test func anUnsafeRelayDirectoryMeansListeningAlone() throws {
        try withRelayDirectory { directory in
            let open = directory + "/open"
            #expect(mkdir(open, 0o777) == 0)
            chmod(open, 0o777)
            try TestDatabase.withFreshDatabase(migrations: true) { configuration in
                let admin = try Connection(configuration)
                defer { admin.close() }
                let reader = try makeManager(configuration, relay: .directory(open))
                defer { reader.close() }
                let writer = try ContextManager(
                    configuration: configuration, entities: ExampleSchema.entities,
                    changeLog: ChangeLogOptions(relay: .directory(open)))
                defer { writer.close() }
                try eventually("the reader listens") { reader.coordinator.listenerBackendPID != nil }
                #expect(!reader.coordinator.listenerUsesRelay && !reader.coordinator.hostsListenerRelay)
                #expect(try sessions(admin, named: ChangeListener.relayApplicationName) == 0)
                #expect(try FileManager.default.contentsOfDirectory(atPath: open).isEmpty, "no socket in an open folder")
                let records = Mutex<[Int64]>([])
                let token = reader.coordinator.observeRemoteChanges { record in records.withLock { $0.append(record.id) } }
                defer { token.cancel() }
                try insert(writer, (0..<5).map { "alone\($0)" })
                try eventually("the reader got the saves") { records.withLock { $0.count } == 5 }
                #expect(records.withLock { $0 } == (try loggedIDs(admin)))
            }
        }
    }

    /// A relay that does not answer (its host hangs, or is handing over) makes a process
    /// listen on its own session; it tries the relay again later, and nothing is lost
    /// across the switch.
    @Test func aListenerThatCouldNotReachTheRelayTriesAgainLater() throws {
        try withRelayDirectory { directory in
            try TestDatabase.withFreshDatabase(migrations: true) { configuration in
                let endpoint = try #require(
                    try NotificationRelayEndpoint(
                        configuration: configuration, channel: ChangeLog.channel, directory: directory))
                // A "host" that holds the lock and accepts, and never says anything.
                var lock = try endpoint.tryLock()
                var silent: Int32? = try LocalSocket.listen(at: endpoint.socketPath)
                defer {
                    if let silent { close(silent) }
                    if let lock { close(lock) }
                }
                let admin = try Connection(configuration)
                defer { admin.close() }
                try admin.executeScript(try ExampleSchema.extraTables)
                var options = ChangeLogOptions(relay: .directory(directory))
                options.relayRetryDelay = .seconds(1)
                let reader = try ContextManager(
                    configuration: configuration, entities: ExampleSchema.entities, changeLog: options)
                defer { reader.close() }
                let writer = try ContextManager(
                    configuration: configuration, entities: ExampleSchema.entities,
                    automaticallyMergesRemoteChanges: false, changeLog: ChangeLogOptions(relay: .off))
                defer { writer.close() }
                let records = Mutex<[Int64]>([])
                let token = reader.coordinator.observeRemoteChanges { record in records.withLock { $0.append(record.id) } }
                defer { token.cancel() }
                try eventually("the reader listens on its own session") { reader.coordinator.listenerBackendPID != nil }
                #expect(!reader.coordinator.listenerUsesRelay)
                try insert(writer, (0..<5).map { "own\($0)" })
                // The silent host goes away; the reader hosts the relay at its next try.
                if let descriptor = silent { close(descriptor) }
                silent = nil
                unlink(endpoint.socketPath)
                if let descriptor = lock { close(descriptor) }
                lock = nil
                try insert(writer, (0..<5).map { "switch\($0)" })
                try eventually("the reader follows the relay again") {
                    reader.coordinator.listenerUsesRelay && reader.coordinator.hostsListenerRelay
                }
                try insert(writer, (0..<5).map { "relayed\($0)" })
                let logged = try loggedIDs(admin)
                #expect(logged.count == 15)
                try eventually("the reader got every save") { records.withLock { $0.count } >= logged.count }
                usleep(200_000)
                #expect(records.withLock { $0 } == logged, "every record once, in order")
            }
        }
    }

    /// The relay hands the payloads its followers send to be notified (`T` messages) to
    /// the hosting process, whole and in each follower's order — a long one cut by the
    /// socket too — and drops a follower that sends anything else.
    @Test func payloadsFollowersSendReachTheHostInOrder() throws {
        let forwarded = Mutex<[String]>([])
        try withStartedRelay(forward: { payloads in forwarded.withLock { $0 += payloads } }) { relay, endpoint, _ in
            let first = try #require(try NotificationRelayClient.connect(to: endpoint, channel: "relay_test", timeout: .seconds(5)))
            let second = try #require(try NotificationRelayClient.connect(to: endpoint, channel: "relay_test", timeout: .seconds(5)))
            try eventually("both are registered") { relay.followerCount == 2 }
            let long = String(repeating: "z", count: 300_000)
            for index in 0..<200 {
                try first.send(toNotify: ["a-\(index)", "b-\(index)"])
                if index == 100 { try second.send(toNotify: [long, "after the long one"]) }
            }
            try eventually("every payload arrived") { forwarded.withLock { $0.count } == 402 }
            let all = forwarded.withLock { $0 }
            #expect(all.filter { $0.hasPrefix("a-") || $0.hasPrefix("b-") } == (0..<200).flatMap { ["a-\($0)", "b-\($0)"] })
            let longAt = try #require(all.firstIndex(of: long))
            #expect(all.firstIndex(of: "after the long one") == longAt + 1)
            // Something that is no `T` message: that follower is dropped, the other stays.
            _ = try LocalSocket.send(second.descriptor, [UInt8(ascii: "X"), 0, 0, 0, 1, 0], from: 0)
            try eventually("the sender of something else is dropped") { relay.followerCount == 1 }
            try first.send(toNotify: ["still heard"])
            try eventually("the other is still heard") { forwarded.withLock { $0.last } == "still heard" }
        }
    }

    /// A follower that asks for a pace (`W`) gets every notification, in order, a few
    /// deliveries a second instead of one per burst; with the pace back at zero they come
    /// as they arrive again. A follower without a pace is not held up by the other's.
    @Test func aPacedFollowerGetsEverythingInOrderInFewDeliveries() throws {
        try withStartedRelay { relay, endpoint, configuration in
            let paced = try #require(try NotificationRelayClient.connect(to: endpoint, channel: "relay_test", timeout: .seconds(5)))
            let prompt = try #require(try NotificationRelayClient.connect(to: endpoint, channel: "relay_test", timeout: .seconds(5)))
            try eventually("both are registered") { relay.followerCount == 2 }
            try paced.setPace(.seconds(1))
            try eventually("the relay took the pace") { relay.pacedFollowerCount == 1 }
            let sender = try Connection(configuration)
            defer { sender.close() }
            // Reads what a client is handed until it has `count` payloads: them, and
            // how many reads handed out any.
            @Sendable func collect(_ client: NotificationRelayClient, _ count: Int) throws -> (payloads: [String], deliveries: Int) {
                var payloads: [String] = []
                var deliveries = 0
                let start = ContinuousClock.now
                while payloads.count < count, start.duration(to: .now) < .seconds(30) {
                    _ = try LocalSocket.poll([(client.descriptor, Int16(POLLIN))], timeout: .milliseconds(50))
                    let notifications = try client.receive()
                    if !notifications.isEmpty { deliveries += 1 }
                    payloads += notifications.map(\.payload)
                }
                return (payloads, deliveries)
            }
            // Sixty notifications over about a second, one transaction each.
            let started = ContinuousClock.now
            let promptGot = Mutex<[String]?>(nil)
            let promptReader = Thread { promptGot.withLock { $0 = (try? collect(prompt, 60))?.payloads ?? [] } }
            promptReader.start()
            for index in 0..<60 {
                try sender.execute("SELECT pg_notify('relay_test', $1)", ["n-\(index)"])
                usleep(15_000)
            }
            let (payloads, deliveries) = try collect(paced, 60)
            #expect(payloads == (0..<60).map { "n-\($0)" }, "every notification once, in order")
            // One delivery per second of pace at most (and one for the remainder):
            // sending took about a second, so at most a few.
            let seconds = Int(started.duration(to: .now) / .seconds(1)) + 2
            #expect(deliveries <= seconds, "\(deliveries) deliveries in about \(seconds - 2) s at a 1 s pace")
            // The prompt follower got them all as well, whatever the other's pace.
            try eventually("the prompt follower read its notifications") { promptGot.withLock { $0 != nil } }
            #expect(promptGot.withLock { $0 } == (0..<60).map { "n-\($0)" })
            // The pace back at zero: the next notification comes well within the pace.
            try paced.setPace(.zero)
            try eventually("the relay dropped the pace") { relay.pacedFollowerCount == 0 }
            let sent = ContinuousClock.now
            try sender.execute("SELECT pg_notify('relay_test', 'after')")
            let (after, _) = try collect(paced, 1)
            #expect(after == ["after"])
            #expect(sent.duration(to: .now) < .milliseconds(900), "the notification waited out a pace it no longer had")
        }
    }

    /// A process that follows another's relay and has no use for records (its main
    /// context never handed out) asks the relay for a pace after its first notification;
    /// once its main context is read it asks for none again, and merges the other
    /// process's saves as before.
    @Test func aFollowerWithNoUseForRecordsIsPacedUntilItsMainContextIsRead() throws {
        try withRelayDirectory { directory in
            try TestDatabase.withFreshDatabase(migrations: true) { configuration in
                let host = try makeManager(configuration, relay: .directory(directory))
                defer { host.close() }
                try eventually("the first process hosts the relay") { host.coordinator.hostsListenerRelay }
                // (A second manager of the same process follows the relay as another
                // process would; the schema is there already.)
                let follower = try ContextManager(
                    configuration: configuration, entities: ExampleSchema.entities,
                    changeLog: ChangeLogOptions(relay: .directory(directory)))
                defer { follower.close() }
                try eventually("the second follows it") {
                    follower.coordinator.listenerUsesRelay && !follower.coordinator.hostsListenerRelay
                }
                #expect(!follower.coordinator.listenerIsPaced)
                try insert(host, ["p1"])
                try eventually("the follower asked for a pace") { follower.coordinator.listenerIsPaced }
                let main = follower.mainContext
                let user = try main.performAndWait { try #require(try User.first(in: main, where: "userID == 'p1'")) }
                let context = host.newPrivateContext()
                try context.performAndWait {
                    let remote = try #require(try User.first(in: context, where: "userID == 'p1'"))
                    remote.age = 41
                    try context.save()
                }
                try eventually("the follower's main context merged the save") {
                    main.performAndWait { user.age == 41 }
                }
                try eventually("the follower asked for no pace") { !follower.coordinator.listenerIsPaced }
            }
        }
    }

    /// The relay itself: a process that stops reading is dropped once its backlog passes
    /// the limit (it would catch up from the log), and the others go on getting
    /// everything in order.
    @Test func aProcessThatStopsReadingIsDroppedAndTheOthersGoOn() throws {
        try withStartedRelay(maximumBacklog: 64 << 10) { relay, endpoint, configuration in
            let reader = try #require(try NotificationRelayClient.connect(to: endpoint, channel: "relay_test", timeout: .seconds(5)))
            let stalled = try #require(try NotificationRelayClient.connect(to: endpoint, channel: "relay_test", timeout: .seconds(5)))
            try eventually("both are registered") { relay.followerCount == 2 }
            // Shrink the stalled one's socket buffer so that the relay's backlog grows.
            var small: Int32 = 4_096
            setsockopt(stalled.descriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            let sender = try Connection(configuration)
            defer { sender.close() }
            let payload = String(repeating: "x", count: 1_000)
            var received: [PostgresNotification] = []
            for batch in 0..<10 {
                try sender.execute(
                    "SELECT pg_notify('relay_test', $1 || ':' || i) FROM generate_series(\(batch * 100), \(batch * 100 + 99)) AS i",
                    [payload])
                let start = ContinuousClock.now
                while received.count < (batch + 1) * 100, start.duration(to: .now) < patience {
                    _ = try LocalSocket.poll([(reader.descriptor, Int16(POLLIN))], timeout: .milliseconds(100))
                    received += try reader.receive()
                }
            }
            #expect(received.map(\.payload) == (0..<1_000).map { payload + ":\($0)" })
            #expect(received.allSatisfy { $0.senderPID == sender.backendPID && $0.channel == "relay_test" })
            try eventually("the stalled process is dropped") { relay.followerCount == 1 }
            // It reads what reached it, then learns that it was dropped.
            #expect(throws: LocalSocket.Failure.self) {
                for _ in 0..<10_000 {
                    _ = try LocalSocket.poll([(stalled.descriptor, Int16(POLLIN))], timeout: .seconds(1))
                    _ = try stalled.receive()
                }
            }
        }
    }
}
