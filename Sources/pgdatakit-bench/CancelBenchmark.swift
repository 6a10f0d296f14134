import ArgumentParser
import Foundation
import PGDataKit
import Synchronization

/// How soon a cancelled request lets go of the server: a fetch, a save and an import
/// batch, each waiting on a lock another session holds, their task cancelled while they
/// wait.
struct CancelBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancels tasks whose fetch, save or import batch waits on the server; how soon they end.",
        discussion: """
            Each round, another session takes `LOCK TABLE users IN ACCESS EXCLUSIVE MODE`; \
            a task then runs a private context's async `perform` (a fetch; a save of a new \
            user) or `manager.importRecords` (one batch), which waits on \
            the lock; once the server shows it waiting and `after` ms have passed, the task \
            is cancelled. Measured: from `cancel()` to the task's end, the sessions of the \
            database still waiting on a lock right then (0 when the server let go), whether \
            the task threw `CancellationError`, and whether the next request on the same \
            manager succeeds after the lock is released. The floor, in the same run: a \
            plain connection's statement waiting on the same lock, stopped by libpq's cancel \
            request from another thread (`raw_ms`).
            """)

    @Option(help: "Rounds of each kind.")
    var rounds = 5

    @Option(help: "Milliseconds a task waits on the server before it is cancelled.")
    var after = 500

    enum Kind: String, CaseIterable {
        case fetch, save, `import`
    }

    func run() throws {
        let database = try BenchDatabase()
        defer { database.drop() }
        var configuration = database.configuration
        configuration.lockTimeout = nil  // the waits end by cancellation only
        let manager = try ContextManager(configuration: configuration, entities: [BenchUser.self])
        defer { manager.close() }
        let observer = try Connection(configuration)
        defer { observer.close() }
        try observer.execute("INSERT INTO users (user_id, age) VALUES ('c0', 0)")
        var raw: [Double] = []
        var figures: [Kind: [Double]] = [:]
        var waitingAfter = 0
        var failures = 0
        for _ in 0..<rounds {
            raw.append(try rawCancel(configuration, observer: observer))
            for kind in Kind.allCases {
                let outcome = try cancelOnce(kind, manager: manager, observer: observer)
                figures[kind, default: []].append(outcome.milliseconds)
                waitingAfter += outcome.waitingAfter
                if !outcome.cancelled || !outcome.nextSucceeded { failures += 1 }
            }
        }
        let floor = median(raw)
        var result = "RESULT cancel rounds=\(rounds) after_ms=\(after) " + String(format: "raw_ms=%.2f ", floor)
        for kind in Kind.allCases {
            let values = figures[kind] ?? []
            let worst = values.max() ?? 0
            print(String(format: "%@: median %.2f ms, slowest %.2f ms from cancel() to the task's end (raw cancel %.2f ms)", kind.rawValue, median(values), worst, floor))
            result += String(format: "%@_ms=%.2f %@_ms_max=%.2f ", kind.rawValue, median(values), kind.rawValue, worst)
        }
        print(result + "waiting_after=\(waitingAfter) failures=\(failures)")
    }

    /// What one cancelled request did.
    struct Outcome {
        var milliseconds: Double
        var waitingAfter: Int
        var cancelled: Bool
        var nextSucceeded: Bool
    }

    /// One request of `kind` waiting on the held lock, cancelled.
    func cancelOnce(_ kind: Kind, manager: ContextManager, observer: Connection) throws -> Outcome {
        let context = manager.newPrivateContext()
        if kind == .save {
            // (A fetch here would keep the context's transaction, and its lock, open.)
            context.performAndWait { BenchUser(context: context).userID = "c-\(UUID().uuidString)" }
        }
        let holder = try Connection(observer.configuration)
        defer { holder.close() }
        try holder.begin()
        try holder.execute("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
        let run = CancelledRun()
        let task = Task {
            do {
                switch kind {
                case .fetch: _ = try await context.perform { try BenchUser.fetch(in: context, where: "age >= 0").count }
                case .save: try await context.perform { try context.save() }
                case .import:
                    let record: JSONValue = ["UserID": "c-import", "Age": 1]
                    try await manager.importRecords([record], mapper: Self.mapper)
                }
                run.end(cancelled: false)
            } catch {
                run.end(cancelled: error is CancellationError)
            }
        }
        try waitUntilWaiting(observer)
        Thread.sleep(forTimeInterval: Double(after) / 1_000)
        let start = ContinuousClock.now
        task.cancel()
        let (ended, cancelled) = run.wait()
        let waiting = try Self.waitingSessions(observer)
        try holder.rollback()
        let next = manager.newPrivateContext()
        let nextSucceeded =
            (try? next.performAndWait {
                defer { next.reset() }  // ends its transaction
                return try BenchUser.first(in: next, where: "userID == %@", "c0") != nil
            }) == true
        return Outcome(
            milliseconds: Self.milliseconds(ended - start), waitingAfter: waiting, cancelled: cancelled,
            nextSucceeded: nextSucceeded)
    }

    /// The floor: a plain connection's statement waiting on the lock, cancelled by libpq's
    /// cancel request from this thread; milliseconds from the request to its return.
    func rawCancel(_ configuration: ConnectionConfiguration, observer: Connection) throws -> Double {
        let holder = try Connection(configuration)
        defer { holder.close() }
        try holder.begin()
        try holder.execute("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
        let waiter = try Connection(configuration)
        defer { waiter.close() }
        let run = CancelledRun()
        Thread.detachNewThread {
            do {
                try waiter.execute("SELECT count(*) FROM users")
                run.end(cancelled: false)
            } catch {
                run.end(cancelled: true)
            }
        }
        try waitUntilWaiting(observer)
        Thread.sleep(forTimeInterval: Double(after) / 1_000)
        let start = ContinuousClock.now
        waiter.requestCancel()
        let (ended, _) = run.wait()
        try holder.rollback()
        return Self.milliseconds(ended - start)
    }

    /// Polls until a session of the database waits on a lock (for up to 30 s).
    func waitUntilWaiting(_ observer: Connection) throws {
        for _ in 0..<3_000 {
            if try Self.waitingSessions(observer) > 0 { return }
            Thread.sleep(forTimeInterval: 0.01)
        }
        throw ValidationError("no session waited on the lock within 30 s")
    }

    /// Sessions of the database waiting on a lock.
    static func waitingSessions(_ observer: Connection) throws -> Int {
        try observer.query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )[0].decode(Int.self, at: 0)
    }

    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
    }

    static let mapper = ObjectMapper<BenchUser>(uniqueKey: \.userID, remoteKey: "UserID") { record, user in
        user.age = record["Age"]?.intValue
    }
}

/// When a cancelled request ended, and whether it threw `CancellationError`.
final class CancelledRun: Sendable {
    private let outcome = Mutex<(ContinuousClock.Instant, Bool)?>(nil)
    private let ended = DispatchSemaphore(value: 0)

    func end(cancelled: Bool) {
        outcome.withLock { $0 = (ContinuousClock.now, cancelled) }
        ended.signal()
    }

    /// Waits for the end; its time and whether it was a cancellation.
    func wait() -> (ContinuousClock.Instant, Bool) {
        ended.wait()
        return outcome.withLock { $0 } ?? (ContinuousClock.now, false)
    }
}
