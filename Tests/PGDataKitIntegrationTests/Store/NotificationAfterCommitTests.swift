import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Saves notify after their commit, in a transaction of their own (`ChangeNotifier`):
/// their commits never wait on PostgreSQL's notification lock. Notifications then no
/// longer come in commit order, and one can be missing (its process died between the
/// commit and the notification) or arrive before its record is visible. Every record
/// still reaches every listener exactly once.
@Suite("Notifications sent after the commit")
struct NotificationAfterCommitTests {
    /// A fresh database with the example schema, and an observer whose check for
    /// unannounced records runs every `check` (`nil`: never).
    private func withObserver(
        check: Duration?, _ body: (ContextManager, RecordCollector, ConnectionConfiguration) throws -> Void
    ) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try ExampleSchema.makeManager(configuration).close()  // the schema
            var options = ChangeLogOptions(relay: .off)
            options.unannouncedCheckInterval = check
            let observer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, changeLog: options)
            defer { observer.close() }
            let records = RecordCollector()
            let token = observer.coordinator.observeRemoteChanges { records.append($0) }
            defer { token.cancel() }
            // It prunes once its position is taken: records written from then on are after it.
            try waitFor("the listener's first prune") { observer.coordinator.listener.pruneAttempts >= 1 }
            try body(observer, records, configuration)
        }
    }

    private func waitFor(_ what: String, timeout: Duration = patience, _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            if ContinuousClock.now > deadline { throw TestFailure("timed out waiting until \(what)") }
            usleep(2_000)
        }
    }

    /// Writes a change record of one inserted user in a transaction of `connection`
    /// without notifying, and returns the record's id and its notification payload.
    private func writeUnannounced(_ key: Int64, on connection: Connection) throws -> (id: Int64, payload: String) {
        var changes = ContextChanges()
        changes.inserted = [ObjectID(entityName: "User", primaryKey: key)]
        let statement = try ChangeLog.writeStatement(changes, origin: UUID())
        let row = try connection.execute(statement.sql, statement.parameters)[0]
        return (
            try row.decode(Int64.self, at: ChangeLog.recordIDColumn),
            try row.decode(String.self, at: ChangeLog.payloadColumn)
        )
    }

    /// The save's transaction sends no notification; the notifier's own transaction
    /// does, with the record in its payload: the server's view of the notifier's
    /// session (`application_name`), and an observer that gets the record from the
    /// payload alone.
    @Test func aSaveCommitsWithoutNotifyingAndItsNotifierAnnouncesIt() throws {
        try withObserver(check: nil) { _, records, configuration in
            let writer = try ContextManager(configuration: configuration, entities: ExampleSchema.entities)
            defer { writer.close() }
            let context = writer.newPrivateContext()
            try context.performAndWait {
                User(context: context).userID = "announced"
                try context.save()
            }
            try waitFor("the record arrived") { records.all.count == 1 }
            let admin = try Connection(configuration)
            defer { admin.close() }
            let notifiers = try admin.query(
                "SELECT query FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
                [ChangeNotifier.applicationName])
            #expect(notifiers.count == 1)
            // (One notification goes as a plain parameter, several as one array; payloads that fit
            // share a notification: OneRowSaveTests, CombinedPayloadsTests.)
            #expect(try notifiers.first?.decode(String.self, at: 0) == ChangeNotifier.notifyOneSQL, "its last statement")
            let counts = writer.coordinator.notifier.counts
            #expect(counts.payloads == 1 && counts.transactions == 1)
        }
    }

    /// Transaction A commits first, B after it; B's notification comes first and
    /// carries a snapshot (as earlier writers sent) in which A is committed. A's
    /// notification follows. The listener must not take B's snapshot as its position,
    /// or A would count as delivered: both arrive, once each, with no read of the log
    /// (the check is off).
    @Test func aNotificationOvertakenByALaterCommitIsNotLost() throws {
        try withObserver(check: nil) { _, records, configuration in
            let a = try Connection(configuration)
            defer { a.close() }
            let b = try Connection(configuration)
            defer { b.close() }
            try a.execute("BEGIN")
            let first = try writeUnannounced(1, on: a)
            try a.execute("COMMIT")
            try b.execute("BEGIN")
            let second = try writeUnannounced(2, on: b)
            let snapshot = try b.query("SELECT pg_current_snapshot()::text")[0].decode(String.self, at: 0)
            let x = try b.query("SELECT pg_current_xact_id()::text")[0].decode(String.self, at: 0)
            // B's payload as a writer that sent its snapshot did (`r2`): id, xid, snapshot, the rest.
            let parts = second.payload.split(separator: " ", maxSplits: 3).map(String.init)
            #expect(parts[0] == ChangeLog.payloadVersionWithoutSnapshot && parts[2] == x)
            let withSnapshot = [ChangeLog.payloadVersion, parts[1], parts[2], snapshot, parts[3]].joined(separator: " ")
            try b.execute("SELECT pg_notify($1, $2)", [ChangeLog.channel, withSnapshot])
            try b.execute("COMMIT")
            try waitFor("B arrived") { records.all.contains { $0.id == second.id } }
            try a.execute("SELECT pg_notify($1, $2)", [ChangeLog.channel, first.payload])
            try waitFor("A arrived") { records.all.contains { $0.id == first.id } }
            Thread.sleep(forTimeInterval: 0.3)
            #expect(records.all.map(\.id).sorted() == [first.id, second.id].sorted())
        }
    }

    /// Payloads that fit together go out as one notification (`ChangeLog.combined`), and
    /// a listener reads each. Here the records' transactions (one each, as saves have)
    /// are still open when their notification comes and the check is off, so only the
    /// notification can deliver them; a later read of the log (a record announced by id)
    /// finds them committed and delivers none of them again.
    @Test func severalPayloadsInOneNotificationEachReachTheListenerOnce() throws {
        try withObserver(check: nil) { _, records, configuration in
            let writers = try (1...3).map { _ in try Connection(configuration) }
            defer { writers.forEach { $0.close() } }
            let sender = try Connection(configuration)
            defer { sender.close() }
            var written: [(id: Int64, payload: String)] = []
            for (index, writer) in writers.enumerated() {
                try writer.execute("BEGIN")
                written.append(try writeUnannounced(Int64(index + 1), on: writer))
            }
            let sent = ChangeLog.combined(written.map(\.payload))
            #expect(sent.count == 1)
            try sender.execute("SELECT pg_notify($1, $2)", [ChangeLog.channel, sent[0]])
            try waitFor("the three records arrived from the one notification") { records.all.count == 3 }
            for writer in writers { try writer.execute("COMMIT") }
            try sender.execute("BEGIN")
            let fourth = try writeUnannounced(4, on: sender)
            try sender.execute("COMMIT")
            try sender.execute("SELECT pg_notify($1, $2)", [ChangeLog.channel, String(fourth.id)])
            try waitFor("the fourth arrived from the log") { records.all.contains { $0.id == fourth.id } }
            Thread.sleep(forTimeInterval: 0.3)
            #expect(records.all.map(\.id).sorted() == (written.map(\.id) + [fourth.id]).sorted())
        }
    }

    /// A notification that carries only a record's id arrives while the record's
    /// transaction is still open: the listener's read finds nothing. When the
    /// transaction commits (without notifying), the regular check finds the record:
    /// delivered once, within the check interval (here 250 ms; the test allows more for
    /// a loaded machine).
    @Test func aNotificationBeforeItsRecordIsVisibleIsSettledByTheCheck() throws {
        try withObserver(check: .milliseconds(250)) { _, records, configuration in
            let writer = try Connection(configuration)
            defer { writer.close() }
            let other = try Connection(configuration)
            defer { other.close() }
            try writer.execute("BEGIN")
            let record = try writeUnannounced(7, on: writer)
            try other.execute("SELECT pg_notify($1, $2)", [ChangeLog.channel, String(record.id)])
            Thread.sleep(forTimeInterval: 0.4)
            #expect(records.all.isEmpty, "a record handed on before it committed")
            try writer.execute("COMMIT")
            let committed = ContinuousClock.now
            try waitFor("the record arrived", timeout: .seconds(10)) { !records.all.isEmpty }
            let delay = committed.duration(to: .now)
            #expect(delay < .seconds(2), "\(delay)")
            Thread.sleep(forTimeInterval: 0.6)
            #expect(records.all.map(\.id) == [record.id])
        }
    }

    /// With the check off, a record no notification announces waits for the next read
    /// (here: the quiet read after another process's notification) — the check is what
    /// bounds the wait.
    @Test func withoutTheCheckAnUnannouncedRecordWaitsForTheNextRead() throws {
        try withObserver(check: nil) { _, records, configuration in
            let writer = try Connection(configuration)
            defer { writer.close() }
            try writer.execute("BEGIN")
            let silent = try writeUnannounced(1, on: writer)
            try writer.execute("COMMIT")
            Thread.sleep(forTimeInterval: 1.5)
            #expect(records.all.isEmpty)
            try writer.execute("BEGIN")
            let loud = try writeUnannounced(2, on: writer)
            try writer.execute("SELECT pg_notify($1, $2)", [ChangeLog.channel, loud.payload])
            try writer.execute("COMMIT")
            try waitFor("both arrived", timeout: .seconds(10)) { records.all.count == 2 }
            #expect(records.all.map(\.id) == [loud.id, silent.id], "the payload first, then the quiet read")
        }
    }

    /// A writer process killed after its save committed and before its notification
    /// went out (its notifier held back): every observer gets the record from the log,
    /// within the check interval (the default, one second; the test allows half a second
    /// more for a loaded machine), 20 times out of 20.
    @Test(.timeLimit(.minutes(3)))
    func aSaveWhoseProcessDiedBeforeItsNotificationStillArrives() throws {
        try withObserver(check: ChangeLogOptions().unannouncedCheckInterval) { _, records, configuration in
            let delays = try killWritersBeforeTheirNotifications(20, configuration) { records.all.count }
            let slowest = delays.max() ?? .zero
            #expect(slowest < .milliseconds(1_500), "slowest \(slowest)")
            #expect(Set(records.all.map(\.id)).count == 20)
            print("unannounced saves after their writer was killed: slowest \(slowest), all \(delays)")
        }
    }
}
