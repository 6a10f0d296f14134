import Foundation
import Logging
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The change log's durable history within one test process: reads after a token,
/// paging, the live sequence, expiry and the registered readers that pruning respects.
/// (A consumer killed and restarted as a real process: `HistoryProcessTests`.)
@Suite("History: reads after a token, expiry, readers")
struct HistoryTests {
    /// A manager over a fresh migrated database and an owner connection to it.
    func withHistory(_ body: (ContextManager, Connection, ConnectionConfiguration) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { manager.close() }
            let admin = try Connection(configuration)
            defer { admin.close() }
            try body(manager, admin, configuration)
        }
    }

    /// `withHistory` for async tests.
    func withHistoryAsync(_ body: (ContextManager, Connection, ConnectionConfiguration) async throws -> Void) async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
        defer { manager.close() }
        let admin = try Connection(configuration)
        defer { admin.close() }
        try await body(manager, admin, configuration)
    }

    /// Iterates `sequence` until it ends or throws, `count` records came, or `timeout`
    /// passed (then it is cancelled, and ends).
    func drain(
        _ sequence: HistorySequence, upTo count: Int = .max, timeout: Duration = .seconds(90),
        _ each: @escaping @Sendable (ChangeRecord) throws -> Void = { _ in }
    ) async throws -> [ChangeRecord] {
        let reading = Task(executorPreference: OwnThreadExecutor.current) {
            var records: [ChangeRecord] = []
            for try await record in sequence {
                records.append(record)
                try each(record)
                if records.count >= count { break }
            }
            return records
        }
        let watchdog = Task(executorPreference: OwnThreadExecutor.current) {
            try await Task.sleep(for: timeout)
            reading.cancel()
        }
        defer { watchdog.cancel() }
        return try await reading.value
    }

    /// `count` saves of one new user each.
    func save(_ count: Int, _ prefix: String, in manager: ContextManager) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            for index in 0..<count {
                User(context: context).userID = "\(prefix)-\(index)"
                try context.save()
            }
        }
    }

    /// Every record id in the change log, ascending.
    func recordIDs(_ admin: Connection) throws -> [Int64] {
        try admin.query("SELECT id FROM pgdatakit_changes ORDER BY id").map { try $0.decode(Int64.self, at: 0) }
    }

    /// A transaction on `connection` that has written a change record and not committed.
    func openTransactionWithRecord(on connection: Connection) throws -> Int64 {
        var changes = ContextChanges()
        changes.deleted = [ObjectID(entityName: "User", primaryKey: 1)]
        try connection.begin()
        return try ChangeLog.write(changes, origin: UUID(), on: connection)
    }

    /// Everything after `token`, page by page.
    func readAll(
        after token: HistoryToken, limit: Int, on coordinator: StoreCoordinator
    ) throws -> (records: [ChangeRecord], token: HistoryToken, pages: Int) {
        var token = token
        var records: [ChangeRecord] = []
        var pages = 0
        while true {
            let page = try coordinator.history(after: token, limit: limit)
            pages += 1
            records += page.records
            token = page.token
            if !page.hasMore { return (records, token, pages) }
        }
    }

    /// Prunes everything no live reader holds, as the listener does (waiting while a
    /// listener holds the pruning lock).
    func prune(_ admin: Connection, maximumReaderAge: Duration = .seconds(3_600), logger: Logger = Logger(label: "test"))
        throws -> Int?
    {
        for _ in 0..<500 {
            if let pruned = try ChangeLog.prune(olderThan: .zero, maximumReaderAge: maximumReaderAge, on: admin, logger: logger) {
                return pruned
            }
            usleep(10_000)
        }
        return nil
    }

    // MARK: - Reading after a token

    @Test func pagesAfterATokenReturnEveryRecordOnceWithTheTokenAfterEach() throws {
        try withHistory { manager, admin, _ in
            let coordinator = manager.coordinator
            try save(2, "before", in: manager)
            let start = try coordinator.currentHistoryToken()
            try save(25, "after", in: manager)
            let all = try readAll(after: start, limit: 7, on: coordinator)
            #expect(all.pages == 4)
            let expected = Array(try recordIDs(admin).suffix(25))
            #expect(all.records.map(\.id) == expected)
            // Own saves are part of the history (unlike observeRemoteChanges).
            #expect(all.records.allSatisfy { $0.origin == coordinator.origin && $0.historyToken != nil })
            #expect(all.records.allSatisfy { $0.transactionID > 0 })
            // The token after record k: reading after it starts at record k + 1.
            for k in [0, 6, 7, 13, 24] {
                let token = try #require(all.records[k].historyToken)
                let rest = try readAll(after: token, limit: 1_000, on: coordinator)
                #expect(rest.records.map(\.id) == Array(expected.dropFirst(k + 1)), "after record \(k)")
            }
            // A token survives its text, and the last one has nothing after it.
            let again = try HistoryToken(parsing: all.token.description)
            let end = try coordinator.history(after: again, limit: 10)
            #expect(end.records.isEmpty && !end.hasMore)
            // Tokens along the feed never go back.
            let tokens = all.records.compactMap(\.historyToken)
            #expect(tokens == tokens.sorted())
            #expect(tokens.allSatisfy { all.token.hasSeen(everythingUpTo: $0) })
        }
    }

    @Test func theOldestTokenReadsEverythingAndLimitsAreClamped() throws {
        try withHistory { manager, admin, _ in
            try save(5, "u", in: manager)
            let oldest = try manager.coordinator.oldestHistoryToken()
            let page = try manager.coordinator.history(after: oldest, limit: 0)  // taken as 1
            #expect(page.records.count == 1 && page.hasMore)
            #expect(try readAll(after: oldest, limit: .max, on: manager.coordinator).records.map(\.id) == recordIDs(admin))
        }
    }

    /// Record ids are drawn before commit: the later id commits first. A token taken in
    /// between leaves the earlier transaction out, so it comes with the next read — the
    /// case a reader of "ids above the last" gets wrong.
    @Test func twoTransactionsCommittingInReverseOrderAroundAToken() throws {
        try withHistory { manager, _, configuration in
            let coordinator = manager.coordinator
            let start = try coordinator.currentHistoryToken()
            let first = try Connection(configuration)
            let second = try Connection(configuration)
            defer { [first, second].forEach { $0.close() } }
            let earlier = try openTransactionWithRecord(on: first)
            let later = try openTransactionWithRecord(on: second)
            #expect(earlier < later)
            try second.commit()
            let page = try coordinator.history(after: start, limit: 100)
            #expect(page.records.map(\.id) == [later])
            let afterLater = try #require(page.records.first?.historyToken)
            #expect(try coordinator.history(after: afterLater, limit: 100).records.isEmpty)
            try first.commit()
            #expect(try coordinator.history(after: afterLater, limit: 100).records.map(\.id) == [earlier])
            #expect(try coordinator.history(after: page.token, limit: 100).records.map(\.id) == [earlier])
            // From the start now, one read sees both committed: oldest id first.
            #expect(try readAll(after: start, limit: 1, on: coordinator).records.map(\.id) == [earlier, later])
        }
    }

    @Test func aTokenFromAnotherDatabaseIsAheadNotSilentlyWrong() throws {
        try withHistory { manager, _, _ in
            let current = try manager.coordinator.currentHistoryToken()
            let ahead = HistoryToken(xmax: current.xmax + 1_000, running: [], floor: 0)
            #expect {
                _ = try manager.coordinator.history(after: ahead, limit: 10)
            } throws: { error in
                guard let error = error as? HistoryError, error.code == .tokenAhead else { return false }
                return error.token == ahead
            }
        }
    }

    // MARK: - The live sequence

    /// Replay and live in one sequence, while other threads keep saving through the
    /// handover and two transactions commit in reverse order of their ids: every record
    /// exactly once, in commit order. The poll timer is off, so only the listener's
    /// wake-ups bring live records.
    @Test(.onItsOwnThread) func theSequenceReplaysThenGoesLiveExactlyOnceInCommitOrder() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let writer = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
        defer { writer.close() }
        let reader = try StoreCoordinator(model: writer.coordinator.model, configuration: configuration)
        defer { reader.close() }
        let start = try reader.currentHistoryToken()
        try save(300, "backlog", in: writer)
        var sequence = reader.history(after: start)
        sequence.pollInterval = .seconds(600)
        sequence.pageSize = 50
        let writers = DispatchGroup()
        let failures = ErrorBox()
        for thread in 0..<3 {
            writers.enter()
            Thread.detachNewThread {
                defer { writers.leave() }
                do { try self.save(100, "live\(thread)", in: writer) } catch { failures.append(error) }
            }
        }
        let first = try Connection(configuration)
        let second = try Connection(configuration)
        defer { [first, second].forEach { $0.close() } }
        let earlier = try openTransactionWithRecord(on: first)
        let later = try openTransactionWithRecord(on: second)
        try second.commit()
        let committedEarlier = Mutex(false)
        let received = try await drain(sequence, upTo: 602, timeout: .seconds(120)) { record in
            if record.id == later {
                // The later id has been delivered; the earlier one commits only now.
                try first.commit()
                committedEarlier.withLock { $0 = true }
            }
        }
        await withCheckedContinuation { continuation in writers.notify(queue: .global()) { continuation.resume() } }
        if let failure = failures.first { throw failure }
        #expect(committedEarlier.withLock { $0 })
        let admin = try Connection(configuration)
        defer { admin.close() }
        let all = try recordIDs(admin)
        #expect(all.count == 602)
        let missed = Set(all).subtracting(received.map(\.id)).sorted()
        // Once (a loaded full run) two records in the middle were missed: say whether the
        // last token covers their transactions (a read skipped them) or not (no wake-up
        // came after they committed).
        var diagnosis = ""
        if !missed.isEmpty, let last = received.last?.historyToken {
            let rows = try admin.query(
                "SELECT id, transaction_id::text FROM pgdatakit_changes WHERE id = ANY($1::bigint[]) ORDER BY id", [missed])
            for row in rows {
                let transaction = UInt64(try row.decode(String.self, at: 1)) ?? 0
                diagnosis += "\nrecord \(try row.decode(Int64.self, at: 0)), transaction \(transaction): "
                    + (last.covers(transaction) ? "covered by the last token (a read skipped it)" : "not covered (no read after it)")
            }
            diagnosis += "\nreceived \(received.count), last token \(last)"
        }
        #expect(missed.isEmpty, "missed \(missed.count): \(missed.prefix(10))…\(diagnosis)")
        #expect(Set(received.map(\.id)).count == received.count, "duplicates")
        let position = try #require(received.firstIndex { $0.id == later })
        #expect(received.firstIndex { $0.id == earlier }.map { $0 > position } == true)
        let tokens = received.compactMap(\.historyToken)
        #expect(tokens.count == received.count && tokens == tokens.sorted())
    }

    @Test(.onItsOwnThread) func closingTheCoordinatorEndsTheSequence() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let coordinator = try StoreCoordinator(
            model: try Model(entities: [User.self, Post.self]), configuration: configuration)
        let token = try coordinator.currentHistoryToken()
        let ended = Task(executorPreference: OwnThreadExecutor.current) {
            var count = 0
            for try await _ in coordinator.history(after: token) { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(300))
        coordinator.close()
        #expect(try await ended.value == 0)
    }

    // MARK: - Expiry

    @Test(.onItsOwnThread) func aTokenBeforePrunedRecordsIsExpiredAndNamesTheOldestPositionHeld() async throws {
        try await withHistoryAsync { manager, admin, _ in
            let coordinator = manager.coordinator
            let start = try coordinator.currentHistoryToken()
            try save(3, "old", in: manager)
            #expect(try prune(admin) == 3)
            try save(2, "new", in: manager)
            do {
                _ = try coordinator.history(after: start, limit: 10)
                Issue.record("expected historyExpired")
            } catch let error as HistoryError where error.code == .historyExpired {
                #expect(error.token == start)
                let oldest = try #require(error.oldestAvailable)
                #expect(try coordinator.history(after: oldest, limit: 10).records.count == 2)
            }
            // A sequence fails the same way, rather than skipping.
            await #expect(throws: HistoryError.self) { _ = try await drain(coordinator.history(after: start)) }
        }
    }

    /// The trap: transaction A (its record written, not committed) is running when the
    /// token is taken, so the token leaves it out although A's id is below every id the
    /// token covers. A commits, and only A's record is pruned: the highest pruned
    /// transaction (A) is below the token's bound, and yet the token lost a record.
    @Test func aPrunedLateCommitterExpiresATokenThatLeftItOut() throws {
        try withHistory { manager, admin, configuration in
            let coordinator = manager.coordinator
            let late = try Connection(configuration)
            defer { late.close() }
            let lateID = try openTransactionWithRecord(on: late)
            try save(2, "meanwhile", in: manager)
            let token = try coordinator.currentHistoryToken()
            try late.commit()
            #expect(try coordinator.history(after: token, limit: 10).records.map(\.id) == [lateID])
            let tokenAfterIt = try coordinator.currentHistoryToken()
            try admin.execute("DELETE FROM pgdatakit_changes WHERE id = $1", [lateID])  // any deletion counts
            let horizon = try admin.query("SELECT pruned_through FROM pgdatakit_history_horizon")[0]
            #expect(try UInt64(horizon.decode(Int64.self, at: 0)) < token.xmax)
            #expect(throws: HistoryError.self) { _ = try coordinator.history(after: token, limit: 10) }
            #expect(try coordinator.history(after: tokenAfterIt, limit: 10).records.isEmpty)
        }
    }

    /// A transaction that was running when the token was taken and then rolled back
    /// never had a record: pruning past it does not expire the token.
    @Test func aRolledBackTransactionDoesNotExpireAToken() throws {
        try withHistory { manager, admin, configuration in
            let coordinator = manager.coordinator
            let aborted = try Connection(configuration)
            defer { aborted.close() }
            _ = try openTransactionWithRecord(on: aborted)
            try save(2, "meanwhile", in: manager)
            let token = try coordinator.currentHistoryToken()
            try aborted.rollback()
            #expect(try prune(admin) == 2)  // the horizon passes the rolled-back transaction
            #expect(try coordinator.history(after: token, limit: 10).records.isEmpty)
        }
    }

    /// `resetStore` truncates the log (and restarts its ids): every earlier token expires.
    @Test func resettingTheStoreExpiresEveryEarlierToken() throws {
        try withHistory { manager, admin, _ in
            let coordinator = manager.coordinator
            try save(3, "a", in: manager)
            let token = try coordinator.currentHistoryToken()
            let name = try admin.query("SELECT current_database()")[0].decode(String.self, at: 0)
            try coordinator.resetStore(database: name)
            try save(1, "b", in: manager)
            #expect(throws: HistoryError.self) { _ = try coordinator.history(after: token, limit: 10) }
            #expect(try recordIDs(admin) == [1])
            #expect(try coordinator.history(after: try coordinator.oldestHistoryToken(), limit: 10).records.map(\.id) == [1])
        }
    }

    /// The oldest token after a `resetStore`: another transaction (of this database or any
    /// other: ids are the cluster's) was running through the truncation and is still
    /// running when the oldest token is taken, so the token leaves it out; it then ends
    /// without a record. A read after the token is not expired by it — it never had a
    /// record in this log — and returns what was saved after the reset. (Found in a full
    /// run, where other tests' transactions run beside this one's.)
    @Test func theOldestTokenAfterAResetIsNotExpiredByATransactionRunningThroughIt() throws {
        try withHistory { manager, admin, configuration in
            let coordinator = manager.coordinator
            try save(2, "a", in: manager)
            let bystander = try Connection(configuration)
            defer { bystander.close() }
            try bystander.begin()
            _ = try bystander.query("SELECT pg_current_xact_id()")  // an id, below the truncation's
            let name = try admin.query("SELECT current_database()")[0].decode(String.self, at: 0)
            try coordinator.resetStore(database: name)
            try save(1, "b", in: manager)
            let oldest = try coordinator.oldestHistoryToken()
            try bystander.commit()  // ends without a record
            #expect(try coordinator.history(after: oldest, limit: 10).records.map(\.id) == [1])
        }
    }

    // MARK: - Readers and pruning

    @Test(.onItsOwnThread) func aRegisteredReaderHoldsPruningUntilItAcknowledges() async throws {
        try await withHistoryAsync { manager, admin, _ in
            let coordinator = manager.coordinator
            let reader = try coordinator.historyReader(named: "search-index", startingAt: .now)
            try save(4, "u", in: manager)
            #expect(try prune(admin) == 0)  // held
            let firstTwo = try await drain(reader.records(), upTo: 2)
            try await reader.acknowledge(try #require(firstTwo.last))
            #expect(try prune(admin) == 2)  // the two acknowledged ones go
            // Another process goes on where the reader acknowledged.
            let other = try StoreCoordinator(model: coordinator.model, configuration: coordinator.pool.configuration)
            defer { other.close() }
            let resumed = try other.existingHistoryReader(named: "search-index")
            let rest = try await drain(resumed.records(), upTo: 2)
            #expect(rest.map(\.id) == Array(try recordIDs(admin)))
            #expect(Set(rest.map(\.id)).isDisjoint(with: firstTwo.map(\.id)))
            #expect(try coordinator.historyReaders().map(\.name) == ["search-index"])
        }
    }

    @Test(.onItsOwnThread) func aStaleReaderHoldsNothingAndIsLoggedThenExpires() async throws {
        try await withHistoryAsync { manager, admin, _ in
            let coordinator = manager.coordinator
            let reader = try coordinator.historyReader(named: "gone", startingAt: .now)
            try save(3, "u", in: manager)
            try admin.execute(
                "UPDATE pgdatakit_history_readers SET acknowledged_at = now() - interval '2 days' WHERE name = 'gone'")
            let log = RecordingLogHandler()
            #expect(try prune(admin, maximumReaderAge: .seconds(86_400), logger: Logger(label: "p") { _ in log }) == 3)
            #expect(log.messages.contains { $0.contains("history reader gone") && $0.contains("historyExpired") })
            await #expect(throws: HistoryError.self) { _ = try await drain(reader.records()) }
            // Acknowledging the oldest position held puts it back on its feet.
            try await reader.acknowledge(try coordinator.oldestHistoryToken())
            let acknowledged = try await reader.acknowledgedToken()
            #expect(try readAll(after: acknowledged, limit: 10, on: coordinator).records.isEmpty)
        }
    }

    @Test(.onItsOwnThread) func droppingAReaderReleasesWhatItHeld() async throws {
        try await withHistoryAsync { manager, admin, _ in
            let log = RecordingLogHandler()
            let coordinator = try StoreCoordinator(
                model: manager.coordinator.model, configuration: manager.coordinator.pool.configuration,
                logger: Logger(label: "c") { _ in log })
            defer { coordinator.close() }
            let reader = try coordinator.historyReader(named: "temporary", startingAt: .now)
            try save(2, "u", in: manager)
            #expect(try prune(admin) == 0)
            #expect(try coordinator.dropHistoryReader(named: "temporary"))
            #expect(try !coordinator.dropHistoryReader(named: "temporary"))
            #expect(log.messages.contains { $0.hasPrefix("registered history reader temporary") })
            #expect(log.messages.contains { $0.hasPrefix("dropped history reader temporary") })
            #expect(try prune(admin) == 2)
            #expect(throws: HistoryError.readerNotRegistered(name: "temporary")) {
                try reader.acknowledge(try coordinator.currentHistoryToken())
            }
            await #expect(throws: HistoryError.readerNotRegistered(name: "temporary")) {
                _ = try await drain(reader.records())
            }
            #expect(throws: HistoryError.readerNotRegistered(name: "nobody")) {
                _ = try coordinator.existingHistoryReader(named: "nobody")
            }
        }
    }

    @Test(arguments: ["", String(repeating: "x", count: 129), "tab\tname"])
    func readerNamesAreChecked(_ name: String) throws {
        try withHistory { manager, _, _ in
            #expect(throws: HistoryError.self) { _ = try manager.coordinator.historyReader(named: name) }
        }
    }

    /// A reader registered at the oldest position starts with every record held, and a
    /// later registration of the same name changes nothing.
    @Test func registeringTwiceKeepsThePosition() throws {
        try withHistory { manager, _, _ in
            let coordinator = manager.coordinator
            try save(2, "u", in: manager)
            let reader = try coordinator.historyReader(named: "r")
            try save(1, "v", in: manager)
            _ = try coordinator.historyReader(named: "r", startingAt: .now)
            #expect(try readAll(after: try reader.acknowledgedToken(), limit: 10, on: coordinator).records.count == 3)
            #expect(throws: HistoryError.recordWithoutToken(recordID: 7)) {
                try reader.acknowledge(
                    ChangeRecord(
                        id: 7, origin: UUID(), originProcessID: 1, originBackendPID: 1, time: Date(),
                        changes: ContextChanges(), transactionID: 9))
            }
        }
    }

    /// Acknowledging inside the caller's transaction: rolled back with it.
    @Test func acknowledgingOnAConnectionFollowsItsTransaction() throws {
        try withHistory { manager, admin, configuration in
            let coordinator = manager.coordinator
            let reader = try coordinator.historyReader(named: "audit", startingAt: .now)
            let before = try reader.acknowledgedToken()
            try save(1, "u", in: manager)
            let token = try coordinator.currentHistoryToken()
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.begin()
            try reader.acknowledge(token, on: connection)
            try connection.rollback()
            #expect(try reader.acknowledgedToken() == before)
            try connection.transaction { try reader.acknowledge(token, on: $0) }
            #expect(try reader.acknowledgedToken() == token)
        }
    }

    /// A transaction of another application (or database on the server) that was
    /// running when a token was taken and ends without a record is not a pruned record:
    /// the horizon lists what was pruned. Past the listed window (simulated here) it
    /// counts as pruned for a raw token — the conservative side, documented — while a
    /// reader's position was cleaned of it before the prune.
    @Test func transactionsWithoutRecordsDoNotExpireTokensWithinTheListedWindow() throws {
        try withHistory { manager, admin, configuration in
            let coordinator = manager.coordinator
            try admin.execute("CREATE TABLE other_app (n int)")
            let other = try Connection(configuration)
            defer { other.close() }
            try other.begin()
            try other.execute("INSERT INTO other_app VALUES (1)")
            let otherTransaction = try other.query("SELECT pg_current_xact_id()::text")[0].decode(String.self, at: 0)
            try save(2, "u", in: manager)  // committed records above the other transaction
            let token = try coordinator.currentHistoryToken()
            #expect(token.running.map(String.init).contains(otherTransaction))
            let reader = try coordinator.historyReader(named: "indexer", startingAt: .token(token))
            try other.commit()
            #expect(try prune(admin) == 2)  // the reader has both: cleaned, then pruned
            #expect(try !reader.acknowledgedToken().running.map(String.init).contains(otherTransaction))
            #expect(try coordinator.history(after: token, limit: 10).records.isEmpty)
            // The window moves past the other transaction (as after 100,000 more pruned).
            // Those prunes would each clean the reader's position first; with them skipped,
            // clean it once more after every transaction it still lists has ended: in a
            // parallel run the token can list other databases' transactions (ids are the
            // server's), still running at the first prune.
            let listed = try reader.acknowledgedToken().running.map(String.init)
            try eventually("the transactions the reader's position lists have ended") {
                try admin.query(
                    "SELECT count(*) FROM unnest($1::text::xid8[]) AS x WHERE NOT pg_visible_in_snapshot(x, pg_current_snapshot())",
                    ["{" + listed.joined(separator: ",") + "}"])[0].decode(Int.self, at: 0) == 0
            }
            try ChangeLog.refreshReaderPositions(on: admin, logger: Logger(label: "test"))
            try admin.execute(
                "UPDATE pgdatakit_history_horizon SET listed_from = pruned_through + 1, pruned_transactions = '{}'")
            #expect(throws: HistoryError.self) { _ = try coordinator.history(after: token, limit: 10) }
            #expect(try coordinator.history(after: try reader.acknowledgedToken(), limit: 10).records.isEmpty)
        }
    }

    /// The horizon lists the newest pruned transactions, at most `maximumListedPruned`;
    /// below the window everything counts as possibly pruned. (The list is filled with
    /// stand-in ids below every real one first, rather than 100,000 transactions.)
    @Test func theListOfPrunedTransactionsKeepsTheNewest() throws {
        try withHistory { _, admin, _ in
            try admin.executeScript(
                """
                DO $$
                BEGIN
                    FOR i IN 1..30 LOOP
                        INSERT INTO pgdatakit_changes (origin, origin_pid, changes)
                        VALUES ('00000000-0000-0000-0000-000000000001', 1, '[]');
                        COMMIT;
                    END LOOP;
                END
                $$
                """)
            let transactions = try admin.query(
                "SELECT transaction_id::text::bigint FROM pgdatakit_changes ORDER BY transaction_id"
            ).map { try $0.decode(Int64.self, at: 0) }
            #expect(transactions.count == 30)
            // The oldest ten alone: listed, the window from the start.
            try admin.execute("DELETE FROM pgdatakit_changes WHERE transaction_id::text::bigint <= $1", [transactions[9]])
            let query = """
                SELECT pruned_through, listed_from, cardinality(pruned_transactions),
                       ARRAY(SELECT x FROM unnest(pruned_transactions) AS x WHERE x > 0 ORDER BY x)
                FROM pgdatakit_history_horizon
                """
            var row = try admin.query(query)[0]
            #expect(try row.decode(Int64.self, at: 0) == transactions[9])
            #expect(try row.decode(Int64.self, at: 1) == 0)
            #expect(try row.decode([Int64].self, at: 3) == Array(transactions.prefix(10)))
            // With the list nearly full, the other twenty push the lowest entries out.
            let standIns = ChangeLog.maximumListedPruned - 15
            try admin.execute(
                """
                UPDATE pgdatakit_history_horizon SET listed_from = -1000000000,
                    pruned_transactions = ARRAY(SELECT -x FROM generate_series(1, $1) AS x) || pruned_transactions
                """, [standIns])
            try admin.execute("DELETE FROM pgdatakit_changes")
            row = try admin.query(query)[0]
            #expect(try row.decode(Int64.self, at: 0) == transactions.last)
            #expect(try row.decode(Int.self, at: 2) == ChangeLog.maximumListedPruned)
            #expect(try row.decode([Int64].self, at: 3) == transactions)
            // 15 stand-ins went, the lowest first: the window starts at the lowest kept.
            #expect(try row.decode(Int64.self, at: 1) == Int64(-(standIns - 15)))
        }
    }

    /// The listener prunes on its own schedule, respecting readers.
    @Test func theListenersPruningRespectsReaders() throws {
        try withHistory { manager, admin, configuration in
            let pruner = try StoreCoordinator(
                model: manager.coordinator.model, configuration: configuration,
                changeLog: ChangeLogOptions(retention: .zero, pruneInterval: .milliseconds(50)))
            defer { pruner.close() }
            let reader = try pruner.historyReader(named: "slow", startingAt: .now)
            try save(3, "u", in: manager)
            let token = pruner.observeRemoteChanges { _ in }
            defer { token.cancel() }
            let attempts = pruner.listener.pruneAttempts
            // Each wait has a deadline of its own (they once shared one, so a slow first
            // wait left the second none).
            try eventually("three more prune attempts") { pruner.listener.pruneAttempts >= attempts + 3 }
            #expect(try recordIDs(admin).count == 3)
            try reader.acknowledge(try pruner.currentHistoryToken())
            try eventually("the acknowledged records are pruned") { try recordIDs(admin).isEmpty }
        }
    }

    @Test func withoutTheHistoryTablesHistoryIsNotInstalledAndPruningGoesOn() throws {
        try withHistory { manager, admin, _ in
            try admin.executeScript(
                """
                DROP TABLE pgdatakit_history_readers, pgdatakit_history_horizon;
                DROP FUNCTION pgdatakit_changes_pruned() CASCADE;
                """)
            #expect(throws: ChangeLogError.notInstalled(table: "pgdatakit_history_horizon")) {
                _ = try manager.coordinator.oldestHistoryToken()
            }
            #expect(throws: ChangeLogError.notInstalled(table: "pgdatakit_history_readers")) {
                _ = try manager.coordinator.historyReader(named: "x")
            }
            try save(1, "u", in: manager)
            #expect(try prune(admin) == 1)
            #expect(try ChangeLog.missingParts(on: admin).parts == [
                "trigger pgdatakit_changes_pruned", "trigger pgdatakit_changes_truncated",
                "table pgdatakit_history_readers", "table pgdatakit_history_horizon", "function pgdatakit_changes_pruned()",
            ])
            try Migrator.installLibrarySchema(on: admin)
            #expect(try ChangeLog.missingParts(on: admin).parts.isEmpty)
        }
    }

    /// A database installed by an earlier version keeps that version's trigger function
    /// (the truncation's horizon): it counts as missing, and installing the library's
    /// schema replaces it.
    @Test func anEarlierTriggerFunctionIsReplacedByTheInstall() throws {
        try withHistory { _, admin, _ in
            let definition = try admin.query("SELECT pg_get_functiondef('pgdatakit_changes_pruned()'::regprocedure)")[0]
                .decode(String.self, at: 0)
            #expect(definition.contains(ChangeLog.prunedFunctionVersion))
            try admin.execute(definition.replacingOccurrences(of: ChangeLog.prunedFunctionVersion, with: "pgdatakit horizon 1"))
            #expect(try ChangeLog.missingParts(on: admin).parts == ["function pgdatakit_changes_pruned() (an earlier version)"])
            try Migrator.installLibrarySchema(on: admin)
            #expect(try ChangeLog.missingParts(on: admin).parts.isEmpty)
        }
    }
}
