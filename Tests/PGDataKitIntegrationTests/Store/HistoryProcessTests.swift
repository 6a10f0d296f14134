import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

#if canImport(Glibc)
    import Glibc
#endif

/// A history consumer as a real process, killed with SIGKILL at random points while
/// four writer processes save, and started again from what it acknowledged.
@Suite("History: a consumer process killed and restarted", .serialized, .heavy)
struct HistoryProcessTests {
    /// Each round starts the consumer (`pgdatakit-test-helper history-consume`), lets it
    /// run for a random while — sometimes not even until its sequence started — and
    /// kills it. Every few rounds two transactions commit in reverse order of their ids
    /// around the kill: the later id before, the earlier one after the restart (once the
    /// restarted consumer has the later one). In the end the consumer's output holds
    /// every record of the change log exactly once, the later id before the earlier.
    @Test func aConsumerKilledTwentyTimesWhileFourWritersSaveGetsEveryRecordOnce() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try TestDatabase.withTemporaryDirectory { folder in
                let output = folder.appendingPathComponent("consumed.txt").path
                let coordinator = try StoreCoordinator(
                    model: try Model(entities: [User.self, Post.self]), configuration: configuration)
                defer { coordinator.close() }
                _ = try coordinator.historyReader(named: "consumer", startingAt: .now)
                let admin = try Connection(configuration)
                defer { admin.close() }
                let writers = try (0..<4).map { try HelperProcess.start("burst", configuration, ["w\($0)", "1000000", "15"]) }
                defer { writers.forEach { $0.stop() } }
                let seed = UInt64.random(in: 0..<UInt64.max)
                var random = SeededGenerator(state: seed)
                var late: [Connection] = []
                defer { late.forEach { $0.close() } }
                var pendingEarlier: Connection?
                var reversed: [(earlier: Int64, later: Int64)] = []
                for round in 0..<20 {
                    let consumer = try HelperProcess.start("history-consume", configuration, ["consumer", output])
                    // The earlier transaction of the last pair commits after the restart.
                    if let pending = pendingEarlier, let pair = reversed.last {
                        // Once the restarted consumer has the later id, the earlier commits.
                        try withSessions(admin) {
                            try consumer.waitUntil("the consumer has record \(pair.later) (seed \(seed))", timeout: .seconds(180)) { _ in
                                (try? consumedIDs(output).contains(pair.later)) ?? false
                            }
                        }
                        try pending.commit()
                        pendingEarlier = nil
                    }
                    if round % 7 == 3 {
                        usleep(UInt32.random(in: 0..<150_000, using: &random))  // maybe before it started
                    } else {
                        try withSessions(admin) {
                            try consumer.waitUntil("the consumer started (round \(round), seed \(seed))", timeout: .seconds(180)) {
                                $0.contains("started")
                            }
                        }
                        usleep(UInt32.random(in: 20_000..<500_000, using: &random))
                    }
                    if round % 4 == 1 {
                        let earlier = try Connection(configuration)
                        let later = try Connection(configuration)
                        late += [earlier, later]
                        let pair = (try openTransactionWithRecord(on: earlier), try openTransactionWithRecord(on: later))
                        try later.commit()
                        pendingEarlier = earlier
                        reversed.append(pair)
                    }
                    kill(consumer.running.pid, SIGKILL)
                    _ = try consumer.waitForExit()
                }
                writers.forEach { $0.stop() }
                // A last run reads to the end of the log (a writer's last COMMIT may land
                // after its process is gone: wait until the log is still too).
                let consumer = try HelperProcess.start("history-consume", configuration, ["consumer", output])
                func logIDs() throws -> [Int64] {
                    try admin.query("SELECT id FROM pgdatakit_changes ORDER BY id").map { try $0.decode(Int64.self, at: 0) }
                }
                let start = ContinuousClock.now
                var expected = try logIDs()
                var consumed = try consumedIDs(output)
                // Until nothing moves any more (or three minutes: 20 restarts leave a backlog
                // behind four writers on a loaded machine).
                while start.duration(to: .now) < .seconds(180) {
                    usleep(200_000)
                    let (log, now) = (try logIDs(), try consumedIDs(output))
                    if log == expected, now.count == consumed.count, now.count >= log.count { break }
                    (expected, consumed) = (log, now)
                }
                consumer.stop()
                consumed = try consumedIDs(output)
                let missed = Set(expected).subtracting(consumed).sorted()
                let extra = Set(consumed).subtracting(expected).sorted()
                let duplicated = Dictionary(grouping: consumed, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
                #expect(reversed.count == 5)
                #expect(expected.count > 500, "the writers saved \(expected.count) records")
                #expect(missed.isEmpty, "missed \(missed.prefix(20)) (seed \(seed))")
                #expect(extra.isEmpty, "not in the log: \(extra.prefix(20)) (seed \(seed))")
                #expect(duplicated.isEmpty, "duplicated \(duplicated.prefix(20)) (seed \(seed))")
                #expect(consumed.count == expected.count)
                for pair in reversed {
                    // Commit order: the later id, committed first, came first.
                    let earlier = try #require(consumed.firstIndex(of: pair.earlier))
                    let later = try #require(consumed.firstIndex(of: pair.later))
                    #expect(later < earlier)
                }
            }
        }
    }

    /// The record ids in the consumer's output, in order (every token must parse).
    func consumedIDs(_ path: String) throws -> [Int64] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { line in
            let fields = line.split(separator: " ")
            guard fields.count == 2, let id = Int64(fields[0]) else { throw TestFailure("bad line: \(line)") }
            _ = try HistoryToken(parsing: String(fields[1]))
            return id
        }
    }

    /// A transaction on `connection` that has written a change record and not committed.
    /// Runs `body`; when it throws, adds what every session of the test database was doing
    /// (state, wait event, statement) to the error: a consumer that never started once
    /// timed out here in full runs with nothing printed, and could not be reproduced alone.
    func withSessions(_ admin: Connection, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            let sessions = (try? admin.query(
                """
                SELECT concat_ws(' | ', pid, application_name, state, wait_event_type, wait_event,
                                 now() - xact_start, left(query, 160))
                FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
                """).map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")) ?? "(not readable)"
            throw TestFailure("\(error)\nsessions of the test database:\n\(sessions)")
        }
    }

    func openTransactionWithRecord(on connection: Connection) throws -> Int64 {
        var changes = ContextChanges()
        changes.deleted = [ObjectID(entityName: "User", primaryKey: 1)]
        try connection.begin()
        return try ChangeLog.write(changes, origin: UUID(), on: connection)
    }
}
