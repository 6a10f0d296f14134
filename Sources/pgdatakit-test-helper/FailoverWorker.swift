// The failover test's worker: saves in a loop through a failover, merges the other
// workers' saves into its main context, and prints what it saw.
import Foundation
import PGDataKit

/// `failover-worker DATABASE_URL WORKER COUNTERS PHASE_DIRECTORY POST_FAILOVER_SAVES`
///
/// Holds the users `counter-0 ..< counter-COUNTERS` in its main context (merges refresh
/// them in place). Once `PHASE_DIRECTORY/start` exists it saves in a loop, each save in
/// a private context under the default `.error` merge policy: the next counter's `age`
/// plus one, and a new user `wWORKER-N` (its key known in advance). A conflict, or a
/// transient error (a lost connection whose transaction did not commit, a server that
/// cannot be reached yet), rolls back and redoes the unit of work with a fresh read. Once
/// `PHASE_DIRECTORY/failover` exists, it stops after POST_FAILOVER_SAVES more successful
/// saves. Wall-clock times are milliseconds since 1970.
///
/// Prints, one line each:
/// - `ready pid=PID`: listening; waiting for the start file;
/// - `ack KEY counter-I t=MS`: a save that returned (acknowledged);
/// - `retry KEY t=MS kind=transient|connection|other ERROR` / `conflict KEY`: a unit of
///   work that failed and is redone (`transient`: a save that did not commit;
///   `connection`: a fetch without a connection);
/// - `unknown KEY xid=ID t=MS`: a save whose outcome could not be found out (then moves on);
/// - `merged ID`: a change record the listener handed on (another worker's save);
/// - `duplicate ID`: one handed on a second time;
/// - `state t=MS counter-0=AGE,…`: the main context's counters after each change;
/// - `done-saving t=MS`: no more saves.
func failoverWorker(_ manager: ContextManager, _ arguments: [String]) -> Never {
    guard arguments.count >= 7, let worker = Int(arguments[3]), let counters = Int(arguments[4]),
        let postFailoverSaves = Int(arguments[6])
    else { fail("usage: failover-worker DATABASE_URL WORKER COUNTERS PHASE_DIRECTORY POST_FAILOVER_SAVES") }
    let phase = URL(fileURLWithPath: arguments[5])
    // A save in flight at the kill learns its outcome once the promoted standby answers;
    // the default wait (10 s) is shorter than a promotion can take on a loaded machine,
    // and the test asks that no outcome stays unknown.
    manager.coordinator.commitOutcomeTimeout = .seconds(120)
    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: phase.appendingPathComponent(name).path) }

    let seen = SeenRecords()
    let recordToken = manager.coordinator.observeRemoteChanges { record in
        emit(seen.insert(record.id) ? "merged \(record.id)" : "duplicate \(record.id)")
    }
    let main = manager.mainContext
    let held = HeldCounters()
    @Sendable func reportState() {
        let ages = held.objects.map { "\($0.userID)=\($0.age.map(String.init) ?? "nil")" }
        emit("state t=\(now()) " + ages.joined(separator: ","))
    }
    do {
        try main.performAndWait {
            held.objects = try (0..<counters).map { index in
                guard let counter = try HelperUser.first(in: main, where: "userID == %@", "counter-\(index)") else {
                    fail("counter-\(index) is missing")
                }
                return counter
            }
            reportState()
        }
    } catch {
        fail("\(error)")
    }
    let changeToken = main.observeObjectsDidChange { _ in reportState() }
    emit("ready pid=\(getpid())")

    let start = ContinuousClock.now
    while !exists("start") {
        if start.duration(to: .now) > .seconds(120) { fail("the start file never appeared") }
        usleep(1_000)
    }
    let context = manager.newPrivateContext(name: "worker")
    var saved = 0
    var savedAfterFailover = 0
    while savedAfterFailover < postFailoverSaves {
        let key = "w\(worker)-\(saved)"
        let counterID = "counter-\((saved + worker) % counters)"
        let afterFailover = exists("failover")
        saveUnitOfWork(key: key, counterID: counterID, age: saved, in: context)
        saved += 1
        if afterFailover { savedAfterFailover += 1 }
    }
    emit("done-saving t=\(now())")
    while true {
        withExtendedLifetime((recordToken, changeToken)) { _ = sleep(60) }
    }
}

/// Wall-clock milliseconds since 1970.
private func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

/// Saves one unit of work in `context` (the counter's `age` plus one and a new user
/// `key`), redoing it after a conflict or an error that wrote nothing, and prints what
/// happened (`ack`, `conflict`, `unknown`, `retry`).
private func saveUnitOfWork(key: String, counterID: String, age: Int, in context: ManagedObjectContext) {
    while true {
        do {
            try context.performAndWait {
                guard let counter = try HelperUser.first(in: context, where: "userID == %@", counterID) else {
                    fail("\(counterID) is missing")
                }
                counter.age = (counter.age ?? 0) + 1
                let user = HelperUser(context: context)
                user.userID = key
                user.age = age
                try context.save()
            }
            emit("ack \(key) \(counterID) t=\(now())")
            break
        } catch is MergeConflictError {
            context.performAndWait { context.rollback() }
            emit("conflict \(key)")
        } catch let error as SaveOutcomeUnknownError {
            // Never redone blindly: it may have committed. The test counts these.
            context.performAndWait { context.rollback() }
            emit("unknown \(key) xid=\(error.transactionID) t=\(now())")
            break
        } catch {
            // A save that did not commit (transient: a lost connection before or at its
            // COMMIT), a fetch whose connection broke or that found no server accepting
            // writes yet: nothing was written, redo it. Anything else is reported as
            // `other` (and redone all the same, so that the test sees the rest).
            context.performAndWait { context.rollback() }
            let kind: String
            switch error {
            case let error as PostgresError where error.isTransient: kind = "transient"
            case let error as PostgresError where error.isConnectionError: kind = "connection"
            default: kind = "other"
            }
            let line = "\(error)".replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\t", with: " ")
            emit("retry \(key) t=\(now()) kind=\(kind) \(line.prefix(300))")
            usleep(20_000)
        }
    }
}

/// Record ids the listener handed on, to tell a second delivery.
final class SeenRecords: @unchecked Sendable {
    // Safe: every access holds `lock`.
    private let lock = NSLock()
    private var ids: Set<Int64> = []

    /// Whether `id` is new.
    func insert(_ id: Int64) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return ids.insert(id).inserted
    }
}

/// The counters the main context holds; used only on the main context's queue.
final class HeldCounters: @unchecked Sendable {
    var objects: [HelperUser] = []
}
