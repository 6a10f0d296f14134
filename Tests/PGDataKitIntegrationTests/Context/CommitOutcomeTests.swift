import Foundation
import PGDataKit
import Synchronization
import Testing

/// A fresh database with the example schema; a manager that reaches it through a
/// `CuttingProxy`; a direct connection for checking the table and one for terminating
/// backends.
private struct Rig {
    let manager: ContextManager
    let proxy: CuttingProxy
    /// Straight to the server (not through the proxy): what is really stored.
    let admin: Connection
    /// Straight to the server: holds the commit-pause lock and terminates backends.
    let killer: Connection

    /// Rows of users whose `user_id` starts with `prefix`.
    func storedUsers(_ prefix: String) throws -> Int {
        try admin.query("SELECT count(*) FROM users WHERE user_id LIKE $1", [prefix + "%"])[0].decode(Int.self, at: 0)
    }

    /// The stored age of the user `userID`.
    func storedAge(_ userID: String) throws -> Int {
        try admin.query("SELECT age FROM users WHERE user_id = $1", [userID])[0].decode(Int.self, at: 0)
    }
}

private func withRig(_ body: (Rig) throws -> Void) throws {
    try TestDatabase.withFreshDatabase(migrations: true) { configuration in
        let killer = try Connection(configuration)
        defer { killer.close() }
        let admin = try Connection(configuration)
        defer { admin.close() }
        // A deferred constraint trigger on the change log: at COMMIT (one row per save)
        // it takes a shared advisory lock, so a save's backend waits inside its COMMIT
        // while `killer` holds the lock exclusively — and passes straight through
        // otherwise.
        try admin.executeScript(
            """
            CREATE FUNCTION pause_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_advisory_xact_lock_shared(\(commitPauseLock));
                RETURN NULL;
            END
            $$;
            CREATE CONSTRAINT TRIGGER pause_at_commit AFTER INSERT ON pgdatakit_changes
                DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pause_at_commit();
            """)
        let proxy = try CuttingProxy(inFrontOf: configuration) { pid in
            _ = try? killer.execute("SELECT pg_terminate_backend($1)", [pid])
        }
        defer { proxy.close() }
        let manager = try ExampleSchema.makeManager(proxy.configuration)
        defer { manager.close() }
        try body(Rig(manager: manager, proxy: proxy, admin: admin, killer: killer))
    }
}

/// The advisory lock the commit-pause trigger waits for.
private let commitPauseLock = 0x7465_7374

/// How a test ends a save's backend at its COMMIT.
private enum Kill: CaseIterable, CustomStringConvertible {
    /// Terminated inside the COMMIT (in a deferred trigger, before the commit record):
    /// the transaction aborts.
    case insideCommit
    /// The server commits; the result is lost and the backend terminated.
    case resultLost
    /// The client reads the COMMIT's result, then the backend is terminated before the
    /// pipeline's end.
    case afterResult
    /// The COMMIT never reaches the server; its backend is terminated.
    case commitNeverSent

    var description: String {
        switch self {
        case .insideCommit: return "terminated inside COMMIT"
        case .resultLost: return "terminated after commit, result lost"
        case .afterResult: return "terminated after the COMMIT's result arrived"
        case .commitNeverSent: return "terminated before COMMIT arrived"
        }
    }

    /// A short name for user ids.
    var tag: String {
        switch self {
        case .insideCommit: return "inside"
        case .resultLost: return "lost"
        case .afterResult: return "after"
        case .commitNeverSent: return "unsent"
        }
    }

    /// Whether the server commits the transaction.
    var commits: Bool { self == .resultLost || self == .afterResult }
}

/// Tallies of what saves reported against what the table holds.
private struct Tally: CustomStringConvertible {
    var kills = 0
    var reportedCommitted = 0
    var reportedFailed = 0
    var failedButCommitted = 0
    var committedButNot = 0

    var description: String {
        "\(kills) kills: \(reportedCommitted) reported committed, \(reportedFailed) reported failed; "
            + "wrong: \(failedButCommitted) failed but committed, \(committedButNot) committed but not"
    }
}

extension Rig {
    /// Runs `save` while `kill` ends its backend at the COMMIT; returns the error the save
    /// threw, if any, after checking that the kill happened.
    func saving(with kill: Kill, _ save: () throws -> Void) -> (any Error)? {
        switch kill {
        case .insideCommit:
            return pausingCommit(save)
        case .resultLost, .afterResult, .commitNeverSent:
            proxy.arm(
                kill == .resultLost
                    ? .beforeCommitResult : kill == .afterResult ? .afterCommitResult : .commitNeverSent(keepServerSession: false))
            defer { proxy.disarm() }
            do {
                try save()
            } catch {
                #expect(!proxy.isArmed, "the save failed before its COMMIT: \(error)")
                return error
            }
            #expect(!proxy.isArmed, "no COMMIT was cut")
            return nil
        }
    }

    /// Runs `save` while `killer` holds the lock the commit-pause trigger waits for, and
    /// terminates the backend that waits for it (inside its COMMIT).
    private func pausingCommit(_ save: () throws -> Void) -> (any Error)? {
        let killed = KillFlag()
        do {
            try killer.execute("SELECT pg_advisory_lock($1)", [commitPauseLock])
        } catch {
            Issue.record("could not take the commit-pause lock: \(error)")
            return error
        }
        let done = DispatchSemaphore(value: 0)
        let killer = self.killer
        Thread.detachNewThread {
            defer { done.signal() }
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                let waiting = try? killer.query(
                    """
                    SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted
                      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    """,
                    [commitPauseLock])
                if let row = waiting?.first, let pid = try? row.decode(Int32.self, at: 0) {
                    _ = try? killer.execute("SELECT pg_terminate_backend($1)", [pid])
                    killed.value.store(true, ordering: .relaxed)
                    break
                }
                usleep(1_000)
            }
            _ = try? killer.execute("SELECT pg_advisory_unlock($1)", [commitPauseLock])
        }
        var failure: (any Error)?
        do {
            try save()
        } catch {
            failure = error
        }
        done.wait()
        let wasKilled = killed.value.load(ordering: .relaxed)
        #expect(wasKilled, "no backend waited inside its COMMIT")
        return failure
    }
}

extension Rig {
    /// Saves of `objects` new users in contexts `makeContext` gives, each with its
    /// backend ended at the COMMIT by `kill`; every outcome is checked against the table,
    /// every failed save is saved again.
    func killingSaves(
        _ kill: Kill, objects: Int, rounds: Int, in makeContext: () -> ManagedObjectContext, tally: inout Tally
    ) throws {
        for round in 0..<rounds {
            let prefix = "\(kill.tag)-\(objects)-\(round)-"
            let context = makeContext()
            try context.performAndWait { () throws in
                let users = ExampleSchema.insertUsers(objects, prefix: prefix, in: context)
                let error = saving(with: kill) { try context.save() }
                tally.kills += 1
                let stored = try storedUsers(prefix)
                if let error {
                    tally.reportedFailed += 1
                    if stored != 0 { tally.failedButCommitted += 1 }
                    #expect(stored == 0, "round \(round): the save threw \(error), yet \(stored) rows are stored")
                    let failure = error as? PostgresError
                    #expect(failure?.transactionDidNotCommit == true && failure?.isTransient == true, "\(error)")
                    #expect(context.hasChanges)
                    let temporary = users.allSatisfy { $0.objectID.isTemporaryID }
                    #expect(temporary)
                    try context.save()  // the retry: no kill now
                } else {
                    tally.reportedCommitted += 1
                    if stored != objects { tally.committedButNot += 1 }
                    #expect(!context.hasChanges)
                    let permanent = users.allSatisfy { !$0.objectID.isTemporaryID }
                    #expect(permanent)
                }
                #expect(try storedUsers(prefix) == objects, "round \(round)")
            }
        }
    }
}

@Suite("A save's outcome is never wrong: backends terminated at COMMIT", .serialized, .heavy)
struct CommitOutcomeTests {
    /// Saves of `objects` new users, each with its backend ended at the COMMIT by `kill`;
    /// every outcome is checked against the table, every failed save is saved again.
    private func killingSavesOfNewUsers(_ kill: Kill, objects: Int, rounds: Int) throws -> Tally {
        var tally = Tally()
        try withRig { rig in
            try rig.killingSaves(kill, objects: objects, rounds: rounds, in: { rig.manager.newPrivateContext() }, tally: &tally)
        }
        print("\(kill), saves of \(objects): \(tally)")
        #expect(tally.failedButCommitted == 0 && tally.committedButNot == 0, "\(tally)")
        return tally
    }

    /// The server committed; the client never saw the result. The save succeeded.
    @Test(arguments: [1, 1000])
    func resultLostAfterTheServerCommitted(objects: Int) throws {
        let tally = try killingSavesOfNewUsers(.resultLost, objects: objects, rounds: objects == 1 ? 30 : 20)
        #expect(tally.reportedCommitted == tally.kills)
    }

    /// The COMMIT's result arrived, then the connection died before the pipeline ended
    /// (issue 25: "cannot exit pipeline mode while busy"). The save succeeded.
    @Test(arguments: [1, 1000])
    func resultArrivedThenTheBackendWasTerminated(objects: Int) throws {
        let tally = try killingSavesOfNewUsers(.afterResult, objects: objects, rounds: objects == 1 ? 30 : 20)
        #expect(tally.reportedCommitted == tally.kills)
    }

    /// Terminated inside the COMMIT, before its commit record: the save failed, and
    /// nothing was stored.
    @Test(arguments: [1, 1000])
    func terminatedInsideCommit(objects: Int) throws {
        let tally = try killingSavesOfNewUsers(.insideCommit, objects: objects, rounds: objects == 1 ? 30 : 20)
        #expect(tally.reportedFailed == tally.kills)
    }

    /// The COMMIT never reached the server. The save failed, and nothing was stored.
    @Test(arguments: [1, 1000])
    func commitNeverArrived(objects: Int) throws {
        let tally = try killingSavesOfNewUsers(.commitNeverSent, objects: objects, rounds: objects == 1 ? 15 : 10)
        #expect(tally.reportedFailed == tally.kills)
    }

    /// A unit of work that increments a counter under `.error` and redoes itself when the
    /// save fails with a transient error (a lost connection that did not commit among
    /// them): every kind of kill, many times; the counter ends at exactly the number of
    /// units.
    @Test func incrementsAreAppliedExactlyOnce() throws {
        let units = 40
        var tally = Tally()
        try withRig { rig in
            let setup = rig.manager.newPrivateContext()
            try setup.performAndWait {
                let user = User(context: setup)
                user.userID = "counter"
                user.age = 0
                try setup.save()
            }
            let kills = Kill.allCases
            for unit in 0..<units {
                let context = rig.manager.newPrivateContext()
                #expect(context.mergePolicy == .error)
                var attempt = 0
                while true {
                    attempt += 1
                    let before = try rig.storedAge("counter")
                    func increment() throws {
                        try context.performAndWait {
                            let user = try #require(try User.first(in: context, where: "userID == %@", "counter"))
                            user.age = (user.age ?? 0) + 1
                            try context.save()
                        }
                    }
                    let error = attempt == 1 ? rig.saving(with: kills[unit % kills.count], increment) : Result { try increment() }.error
                    if attempt == 1 { tally.kills += 1 }
                    let after = try rig.storedAge("counter")
                    guard let error else {
                        tally.reportedCommitted += 1
                        if after != before + 1 { tally.committedButNot += 1 }
                        break
                    }
                    tally.reportedFailed += 1
                    if after != before { tally.failedButCommitted += 1 }
                    context.performAndWait { context.rollback() }
                    // A unit of work redoes what may be redone, as imports and operations do.
                    guard let failure = error as? PostgresError, failure.isTransient, attempt < 5 else {
                        Issue.record("unit \(unit): \(error)")
                        break
                    }
                }
            }
            let final = try rig.storedAge("counter")
            print("increments under .error: \(tally); counter \(final) after \(units) units")
            #expect(final == units, "the counter is \(final) after \(units) units")
        }
        #expect(tally.failedButCommitted == 0 && tally.committedButNot == 0, "\(tally)")
    }

    /// An import whose batches' backends are killed at their COMMITs: every record is
    /// imported once, the summary counts each once, and the import does not fail.
    @Test func anImportSurvivesKillsAtItsCommits() throws {
        try withRig { rig throws in
            rig.proxy.arm(
                [.beforeCommitResult, .afterCommitResult, .commitNeverSent(keepServerSession: false), .beforeCommitResult,
                 .afterCommitResult, .commitNeverSent(keepServerSession: false)])
            let operation = rig.manager.importOperation(
                ImportSchema.userRecords(0..<1000), mapper: userMapper, options: ImportOptions(batchSize: 200))
            OperationQueue().addOperations([operation], waitUntilFinished: true)
            rig.proxy.disarm()
            #expect(operation.error == nil, "\(operation.error.map { "\($0)" } ?? "")")
            #expect(rig.proxy.cuts == 6)
            #expect(operation.summary?.inserted == 1000)
            #expect(try rig.storedUsers("u") == 1000)
            print("import of 1,000 records in 5 batches: \(rig.proxy.cuts) kills at COMMIT, summary \(operation.summary.map { "\($0)" } ?? "none")")
        }
    }

    /// The main context saves on a borrowed read-committed connection: the same
    /// guarantees, every kind of kill.
    @Test func mainContextSaves() throws {
        var tally = Tally()
        try withRig { rig in
            for kill in Kill.allCases {
                try rig.killingSaves(kill, objects: 10, rounds: 5, in: { rig.manager.mainContext }, tally: &tally)
            }
        }
        print("main context, saves of 10: \(tally)")
        #expect(tally.failedButCommitted == 0 && tally.committedButNot == 0, "\(tally)")
    }

    /// `deleteAll` (one DELETE, its change record, COMMIT) is settled the same way.
    @Test func batchDeletes() throws {
        var tally = Tally()
        try withRig { rig in
            for (round, kill) in (Kill.allCases + Kill.allCases).enumerated() {
                let prefix = "d\(round)-"
                let context = rig.manager.newPrivateContext()
                try context.performAndWait { () throws in
                    ExampleSchema.insertUsers(10, prefix: prefix, in: context)
                    try context.save()
                    var removed = 0
                    let error = rig.saving(with: kill) {
                        removed = try User.deleteAll(in: context, where: "userID BEGINSWITH %@", prefix)
                    }
                    tally.kills += 1
                    let stored = try rig.storedUsers(prefix)
                    if let error {
                        tally.reportedFailed += 1
                        if stored != 10 { tally.failedButCommitted += 1 }
                        #expect((error as? PostgresError)?.isTransient == true, "\(error)")
                        #expect(try User.deleteAll(in: context, where: "userID BEGINSWITH %@", prefix) == 10)
                    } else {
                        tally.reportedCommitted += 1
                        if stored != 0 { tally.committedButNot += 1 }
                        #expect(removed == 10)
                    }
                    #expect(try rig.storedUsers(prefix) == 0)
                }
            }
        }
        print("batch deletes: \(tally)")
        #expect(tally.failedButCommitted == 0 && tally.committedButNot == 0, "\(tally)")
    }

    /// The client lost its connection before the COMMIT went out, but the server's side
    /// lives on, idle in the transaction: the lookup sees it in progress, ends that
    /// backend after a moment, and reports the save failed (nothing committed) — not
    /// unknown, and not after the whole timeout.
    @Test(arguments: [1, 1000])
    func aBackendLeftInItsTransactionIsEnded(objects: Int) throws {
        try withRig { rig in
            let context = rig.manager.newPrivateContext()
            try context.performAndWait { () throws in
                ExampleSchema.insertUsers(objects, prefix: "idle-", in: context)
                rig.proxy.arm(.commitNeverSent(keepServerSession: true))
                let start = ContinuousClock.now
                do {
                    try context.save()
                    Issue.record("the save succeeded")
                } catch let error as PostgresError {
                    #expect(error.transactionDidNotCommit && error.isTransient, "\(error)")
                }
                let waited = ContinuousClock.now - start
                #expect(waited < rig.manager.coordinator.commitOutcomeTimeout, "\(waited)")
                #expect(try rig.storedUsers("idle-") == 0)
                // A terminated backend's transaction is over before its row leaves
                // pg_stat_activity: wait for the row, with a deadline.
                try eventually("the old backend no longer idles in its transaction") {
                    try rig.admin.query(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'"
                    )[0].decode(Int.self, at: 0) == 0
                }
                try context.save()
                #expect(try rig.storedUsers("idle-") == objects)
                print("backend left idle in its transaction (saves of \(objects)): ended and reported not committed after \(waited)")
            }
        }
    }

    /// When the server cannot be reached after the COMMIT went unanswered, the save
    /// throws `SaveOutcomeUnknownError` (not transient) with the transaction's id — which
    /// the server, once reachable, says committed.
    @Test func anUnreachableServerLeavesTheOutcomeUnknown() throws {
        try withRig { rig in
            rig.manager.coordinator.commitOutcomeTimeout = .milliseconds(600)
            let context = rig.manager.newPrivateContext()
            try context.performAndWait { () throws in
                _ = try User.count(in: context)  // the transaction (and its connection) opens now
                ExampleSchema.insertUsers(3, prefix: "unknown-", in: context)
                rig.proxy.refuseConnections(true)
                defer { rig.proxy.refuseConnections(false) }
                rig.proxy.arm(.beforeCommitResult)
                do {
                    try context.save()
                    Issue.record("the save succeeded")
                } catch let error as SaveOutcomeUnknownError {
                    #expect(error.code == .serverUnreachable)
                    #expect(error.lookupError != nil)
                    #expect("\(error)".contains("\(error.transactionID)"))
                    let status = try rig.admin.query("SELECT pg_xact_status($1::xid8)", [String(error.transactionID)])[0]
                        .decode(String?.self, at: 0)
                    #expect(status == "committed")
                    print("unreachable server: \(error)")
                }
                #expect(try rig.storedUsers("unknown-") == 3)
                #expect(context.hasChanges)  // the context cannot know: it keeps its changes
            }
        }
    }

    /// A COMMIT the server refuses (a deferred constraint) is an ordinary failure: the
    /// server's error, not transient, nothing stored, the changes kept; no lookup.
    @Test func aCommitTheServerRefusesIsAnOrdinaryFailure() throws {
        try withRig { rig in
            try rig.admin.executeScript(
                """
                CREATE TABLE refuse_commits (reason text);
                CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF EXISTS (SELECT FROM refuse_commits) THEN RAISE EXCEPTION 'commit refused'; END IF;
                    RETURN NULL;
                END
                $$;
                CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON pgdatakit_changes
                    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit();
                INSERT INTO refuse_commits VALUES ('test');
                """)
            let context = rig.manager.newPrivateContext()
            try context.performAndWait { () throws in
                ExampleSchema.insertUsers(5, prefix: "refused-", in: context)
                do {
                    try context.save()
                    Issue.record("the save succeeded")
                } catch let error as PostgresError {
                    #expect(error.kind == .server && error.sqlState?.rawValue == "P0001", "\(error)")
                    #expect(!error.transactionDidNotCommit && !error.isTransient)
                }
                #expect(context.hasChanges)
                #expect(try rig.storedUsers("refused-") == 0)
                try rig.admin.execute("DELETE FROM refuse_commits")
                try context.save()
                #expect(try rig.storedUsers("refused-") == 5)
            }
        }
    }

    /// A `DataOperation` whose save's result is lost after the server committed reports
    /// a save, with no error.
    @Test func aDataOperationReportsItsCommittedSave() throws {
        try withRig { rig throws in
            for kill in [Kill.resultLost, .afterResult] {
                rig.proxy.arm(kill == .resultLost ? .beforeCommitResult : .afterCommitResult)
                let operation = DataOperation(manager: rig.manager) { operation, context in
                    ExampleSchema.insertUsers(20, prefix: "op-\(kill.tag)-", in: context)
                    operation.completeAndSave()
                }
                OperationQueue().addOperations([operation], waitUntilFinished: true)
                #expect(!rig.proxy.isArmed)
                #expect(operation.didSave && operation.errors.isEmpty, "\(operation.errors)")
                #expect(try rig.storedUsers("op-\(kill.tag)-") == 20)
            }
        }
    }
}

/// Set by the thread that terminated a backend.
private final class KillFlag: Sendable {
    let value = Atomic<Bool>(false)
}

extension Result where Failure == any Error {
    /// The error, if it failed.
    fileprivate var error: (any Error)? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
