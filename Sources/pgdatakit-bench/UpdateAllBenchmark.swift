import ArgumentParser
import Foundation
import PGDataKit
import Synchronization

/// `updateAll` over a large table while other managers edit its rows and hold every row
/// as an object: the statements the server counts, how soon the holder merges, and
/// whether an edit is lost.
struct UpdateAllBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update-all",
        abstract: "One updateAll over every row while editors save and an observer holds every row.",
        discussion: """
            Seeds `rows` users (age 0). An observer manager's main context fetches every \
            row (each an object). Editor threads, on a manager of their own, each in a loop \
            fetch a random user in a private context, add 1 to its age, name it after \
            themselves and save (default merge policy `.error`: a conflict is retried from \
            a fresh read). Meanwhile an updater manager, logged in as a role of its own, runs \
            `BenchUser.updateAll(in:set: ["name": "batch"], where: "age >= 0")`. Measured: \
            the statements the server counts for the updater's role during the call \
            (`pg_stat_statements`; the `UPDATE` and the change record's statement apart from \
            the rest, which includes the updater manager's listener), the call's time against a plain `UPDATE` of the same \
            rows in the same run (`raw_ms`), the time until the observer's main context \
            shows the batch (`merge_ms`), the observer's objects still holding their seeded \
            name (`stale`), and lost edits: the editors' committed increments that the \
            table's ages do not add up to (`lost`). The last user is left to the batch, so \
            its name tells when the observer merged.
            """)

    @Option(help: "Rows in the table.")
    var rows = 100_000

    @Option(help: "Editor threads.")
    var editors = 4

    @Option(help: "Seconds editors run before and after the batch update.")
    var seconds = 1.0

    func run() throws {
        let database = try BenchDatabase(preloading: ["pg_stat_statements"])
        defer { database.drop() }
        let admin = try Connection(database.configuration)
        defer { admin.close() }
        let roles = StatementCountingRoles.create(["updater"], on: admin)
        defer { roles.drop(on: admin) }
        try admin.execute(
            "INSERT INTO users (user_id, name, age) SELECT 'u' || g, 'n' || g, 0 FROM generate_series(1, \(rows)) AS g")
        try admin.execute("ANALYZE users")
        let rawSeconds = try measure {
            try admin.execute("UPDATE users SET name = name, version = version + 1 WHERE age >= 0")
        }
        let observer = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { observer.close() }
        let (held, lastID) = try observer.mainContext.performAndWait {
            let all = try observer.mainContext.fetchAll(BenchUser.self)
            return (all.count, all.first { $0.userID == "u\(rows)" }?.objectID)
        }
        let editing = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { editing.close() }
        let updater = try ContextManager(
            configuration: roles.configuration(for: "updater", base: database.configuration), entities: [BenchUser.self])
        defer { updater.close() }

        let state = EditState()
        let threads = (0..<editors).map { editor in
            Thread { edit(as: editor, in: editing, rows: rows - 1, state: state) }
        }
        threads.forEach { $0.start() }
        Thread.sleep(forTimeInterval: seconds)
        let context = updater.newPrivateContext()
        _ = try updater.mainContext.performAndWait { try BenchUser.count(in: updater.mainContext) }  // a pooled session
        let before = try roles.snapshot(on: admin)
        var updated = 0
        let batchSeconds = try measure {
            updated = try context.performAndWait {
                try BenchUser.updateAll(in: context, set: ["name": "batch"], where: "age >= 0")
            }
        }
        let merged = waitForBatch(on: lastID, in: observer, timeout: 60)
        let after = try roles.settledSnapshot(on: admin)
        Thread.sleep(forTimeInterval: seconds)
        state.stop.store(true, ordering: .relaxed)
        while state.tally.withLock({ $0.running }) < editors { Thread.sleep(forTimeInterval: 0.01) }

        let calls = roles.calls(of: "updater", from: before, to: after) ?? []
        // The updater's role also runs its manager's listener (which reads the change log
        // after the editors' saves): the batch's own statements are told apart by text.
        let statements = calls.reduce(0) { $0 + $1.calls }
        let updates = calls.filter { $0.query.hasPrefix("UPDATE") }.reduce(0) { $0 + $1.calls }
        // (The listener's sealed reads insert into the change log under a savepoint they
        // roll back; the batch's record is the `WITH record AS (…)` statement.)
        let records = calls.filter { $0.query.hasPrefix("WITH record AS") }.reduce(0) { $0 + $1.calls }
        if let reason = roles.unavailableReason { print("statements not counted: \(reason)") }
        for call in calls { print("updater: \(call.calls) × \(call.query.prefix(100))") }
        let ages = try admin.query("SELECT coalesce(sum(age), 0)::bigint FROM users")[0].decode(Int64.self, at: 0)
        let batchless = try admin.query(
            "SELECT count(*)::bigint FROM users WHERE name IS DISTINCT FROM 'batch' AND name NOT LIKE 'e%'"
        )[0].decode(Int64.self, at: 0)
        // Read from the objects the observer holds (a fetch would refresh them itself).
        let stale = observer.mainContext.performAndWait {
            observer.mainContext.registeredObjects.compactMap { $0 as? BenchUser }.filter { $0.name?.hasPrefix("n") ?? true }.count
        }
        let final = state.tally.withLock { $0 }
        let lost = Int64(final.committed) - ages
        print(
            String(
                format: "update-all: %d rows in %.0f ms (raw UPDATE %.0f ms, ratio %.2f); observer merged in %.0f ms; "
                    + "editors: %d commits, %d conflicts retried, %d failures; lost edits %d",
                updated, batchSeconds * 1000, rawSeconds * 1000, batchSeconds / rawSeconds, merged * 1000,
                final.committed, final.conflicts, final.failures, lost))
        for error in final.errors { print("editor failure: \(error)") }
        print(
            "RESULT update-all rows=\(rows) updated=\(updated) held=\(held) statements=\(statements) update_statements=\(updates) record_statements=\(records) "
                + String(format: "batch_ms=%.1f raw_ms=%.1f ratio=%.2f merge_ms=%.1f ", batchSeconds * 1000, rawSeconds * 1000, batchSeconds / rawSeconds, merged * 1000)
                + "stale=\(stale) batchless=\(batchless) commits=\(final.committed) conflicts=\(final.conflicts) "
                + "failures=\(final.failures) lost=\(lost)")
    }

    /// What the editors did.
    struct EditTally {
        var committed = 0
        var conflicts = 0
        var failures = 0
        var errors: [String] = []
        /// Editors that have stopped.
        var running = 0
    }

    /// What the editor threads share: the tally, and when to stop.
    final class EditState: Sendable {
        let tally = Mutex(EditTally())
        let stop = Atomic(false)
    }

    /// One editor: read-modify-write of random users until told to stop.
    func edit(as editor: Int, in manager: ContextManager, rows: Int, state: EditState) {
        var sequence = 0
        while !state.stop.load(ordering: .relaxed) {
            sequence += 1
            let userID = "u\(Int.random(in: 1...max(1, rows)))"
            let context = manager.newPrivateContext()
            do {
                try context.performAndWait {
                    guard let user = try BenchUser.fetch(in: context, where: "userID == %@", userID).first else { return }
                    user.age = (user.age ?? 0) + 1
                    user.name = "e\(editor)-\(sequence)"
                    try context.save()
                }
                state.tally.withLock { $0.committed += 1 }
            } catch is MergeConflictError {
                state.tally.withLock { $0.conflicts += 1 }
            } catch {
                state.tally.withLock { tally in
                    tally.failures += 1
                    if tally.errors.count < 5 { tally.errors.append("\(error)") }
                }
            }
        }
        state.tally.withLock { $0.running += 1 }
    }

    /// Seconds until the observer's main context shows the batch on the object it holds
    /// for the last user (which no editor touches), read as it is (no fetch).
    func waitForBatch(on id: ObjectID?, in observer: ContextManager, timeout: Double) -> Double {
        let start = ContinuousClock.now
        let context = observer.mainContext
        while let id, ContinuousClock.now - start < .seconds(timeout) {
            let name = context.performAndWait { (try? context.object(with: id) as? BenchUser)?.name }
            if name == "batch" { break }
            Thread.sleep(forTimeInterval: 0.002)
        }
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
