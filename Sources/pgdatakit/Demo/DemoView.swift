import Foundation
import PGDataKit

/// The demo's screen: a frame redrawn in place on a terminal, a progress line a second
/// otherwise, nothing with --json.
final class DemoView {
    let workers: Int
    let duration: Double
    let live: Bool
    let quiet: Bool
    private var previous: [Int: (saves: Int, time: Date)] = [:]
    private var rates: [Int: Double] = [:]

    init(workers: Int, duration: Double, live: Bool, quiet: Bool) {
        self.workers = workers
        self.duration = duration
        self.live = live
        self.quiet = quiet
    }

    /// Seconds between two frames or lines.
    var interval: Double { live ? 0.25 : 1 }

    func begin() {
        if live { FileHandle.standardOutput.write(Data("\u{1B}[2J".utf8)) }
        if !live && !quiet { printLine("demo: \(workers) workers for \(Int(duration)) s (Ctrl-C stops earlier)") }
    }

    func note(_ text: String) {
        if !quiet { live ? printLine(text) : printLine("demo: " + text) }
    }

    func show(
        elapsed: Double, rows: (users: Int, posts: Int), board: DemoProcesses.Board, feed: DemoFeed, deadlocks: Int
    ) {
        let now = Date()
        for (worker, report) in board.latest {
            if let last = previous[worker], now.timeIntervalSince(last.time) > 0.5 {
                rates[worker] = Double(report.counters.saves - last.saves) / now.timeIntervalSince(last.time)
                previous[worker] = (report.counters.saves, now)
            } else if previous[worker] == nil {
                previous[worker] = (report.counters.saves, now)
            }
        }
        guard !quiet else { return }
        let latency = feed.percentiles
        let all = board.latest.values.map(\.counters)
        let lockTimeouts = all.reduce(0) { $0 + $1.lockTimeouts }
        let retries = all.reduce(0) { $0 + $1.conflictsRetried + $1.libraryRetries }
        if !live {
            let saves = (0..<workers).map { "w\($0) \(board.latest[$0]?.counters.saves ?? 0)" }.joined(separator: ", ")
            printLine(String(
                format: "demo: %4.0f s  users %d  posts %d  saves [%@]  merge p50 %.1f ms p99 %.1f ms  "
                    + "deadlocks %d  lock timeouts %d  retries %d",
                elapsed, rows.users, rows.posts, saves, latency.p50, latency.p99, deadlocks, lockTimeouts, retries))
            return
        }
        var lines = [
            String(format: "pgdatakit demo — %d worker processes, one dataset — %.0f / %.0f s (Ctrl-C stops)",
                   workers, elapsed, duration),
            "",
            "rows (this process's object controllers):  users \(rows.users)   posts \(rows.posts)",
            String(format: "merge latency here (save began → merged):  p50 %.1f ms   p99 %.1f ms", latency.p50, latency.p99),
            "deadlocks (server's count): \(deadlocks)   lock timeouts: \(lockTimeouts)   "
                + "retries: \(retries) (by the workers and by the library)",
            "",
            Terminal.row(
                ["WORKER", "PID", "STATE", "SAVES", "SAVES/S", "IMPORTED", "RENAMED", "+1 AGE", "DELETED", "POLICY",
                 "SETTLED", "RETRIED", "MERGED"],
                widths: [7, 8, 13, 7, 8, 9, 8, 7, 8, 14, 8, 8, 7]),
        ]
        let pids = Dictionary(uniqueKeysWithValues: board.latest.map { ($0.value.pid, $0.key) })
        for worker in 0..<workers {
            let report = board.latest[worker]
            let counters = report?.counters ?? WorkerCounters()
            lines.append(Terminal.row(
                ["\(worker)", "\(report?.pid ?? 0)", report?.state ?? "starting", "\(counters.saves)",
                 String(format: "%.0f", rates[worker] ?? 0), "\(counters.imported)", "\(counters.edits)",
                 "\(counters.increments)", "\(counters.deletes)",
                 DemoWorker.policies[worker % DemoWorker.policies.count].1, "\(counters.conflictsSettled)",
                 "\(counters.conflictsRetried)", "\(counters.merged)"],
                widths: [7, 8, 13, 7, 8, 9, 8, 7, 8, 14, 8, 8, 7]))
        }
        lines.append("")
        lines.append("last saves merged here:")
        for (pid, line) in feed.recent {
            lines.append("  worker \(pids[pid].map(String.init) ?? "?")  \(line)")
        }
        Terminal.redraw(lines)
    }

    func finish(_ summary: DemoSummary) {
        if live { printLine("") }
    }
}

/// What the demo proves, for the screen and for --json.
struct DemoSummary: Codable {
    struct Worker: Codable {
        var index: Int
        var pid: Int32
        var policy: String
        var counters: WorkerCounters
        var mainChecksum: String?
        var freshChecksum: String?
        var mainEqualsFresh: Bool
        var mergedFromEveryOtherWorker: Bool
        /// When the main context differs from a fresh fetch: the lines that differ.
        var listingDifferences: [String]?
        var error: String?
    }

    /// A worker killed under `--chaos`: its last report, and whether it was then in an
    /// increment's save (that increment is unknown: it may or may not be stored).
    struct KilledWorker: Codable {
        var index: Int
        var pid: Int32
        var counters: WorkerCounters
        var killedSavingIncrement: Bool
    }

    var workers: [Worker]
    /// Workers killed under `--chaos` (their replacements are in `workers`).
    var killedWorkers: [KilledWorker]
    /// What `--chaos` did; nil without it.
    var chaos: DemoChaos.Counts?
    var seconds: Double
    var users: Int
    var posts: Int
    var saves: Int
    var duplicateKeys: Int
    var incrementsReported: Int
    var incrementsStored: Int
    /// Increments that may or may not be stored: the in-flight one of each worker killed
    /// in an increment's save, and saves that ended with `SaveOutcomeUnknownError`.
    var incrementsUnknown: Int
    /// Stored minus reported: increments that committed but whose commit no report
    /// acknowledged (at most `incrementsUnknown`).
    var incrementsCommittedUnreported: Int
    var lostUpdates: Int
    var conflictsSettled: Int
    var conflictsRetried: Int
    var mergeP50Milliseconds: Double
    var mergeP99Milliseconds: Double
    /// Deadlocks during the run, by the server's count (`pg_stat_database.deadlocks` of
    /// the demo's database).
    var deadlocks: Int
    /// Saves that waited for a lock past the lock timeout (the library's count).
    var lockTimeouts: Int
    /// Saves done again: by the workers (`conflictsRetried`) and by the library itself.
    var retries: Int
    /// Saves the library redid itself (the workers' `libraryRetries`).
    var libraryRetries: Int
    /// `libraryRetries` by cause (the retry metric's `cause`).
    var libraryRetriesByCause: [String: Int]
    var parentChecksum: String
    var parentEqualsFresh: Bool
    var allChecksumsEqual: Bool
    var proven: Bool

    static func make(
        workers count: Int, seconds: Double, board: DemoProcesses.Board, feed: DemoFeed, manager: ContextManager,
        parentListing: String, deadlocks: Int, chaos: DemoChaos.Counts? = nil
    ) throws -> DemoSummary {
        let pids = Set((0..<count).compactMap { board.latest[$0]?.pid })
        let killed = board.killed.map { report in
            KilledWorker(
                index: report.worker, pid: report.pid, counters: report.counters,
                killedSavingIncrement: report.state == "saving increment")
        }
        let lastSaves = feed.lastSave
        var workers: [Worker] = []
        for index in 0..<count {
            let report = board.finals[index] ?? board.latest[index]
            let pid = report?.pid ?? 0
            // Every other worker alive at the end, and every killed one whose last save
            // (by the change log the parent merged) began after this one was listening.
            let readyAt = board.readyAt[pid] ?? .distantFuture
            let others = pids.subtracting([pid]).union(
                killed.filter { (lastSaves[$0.pid] ?? .distantPast) > readyAt }.map(\.pid))
            workers.append(Worker(
                index: index, pid: pid, policy: DemoWorker.policies[index % DemoWorker.policies.count].1,
                counters: report?.counters ?? WorkerCounters(),
                mainChecksum: board.finals[index]?.mainChecksum, freshChecksum: board.finals[index]?.freshChecksum,
                mainEqualsFresh: board.finals[index].map { $0.mainChecksum != nil && $0.mainChecksum == $0.freshChecksum }
                    ?? false,
                mergedFromEveryOtherWorker: others.isSubset(of: report?.counters.mergedFrom ?? []),
                listingDifferences: board.finals[index]?.listingDifferences,
                error: board.failures[index] ?? (board.finals[index] == nil ? "no final report" : nil)))
        }
        let parentChecksum = try DemoWorker.checksum(parentListing, manager: manager)
        let fresh = manager.newPrivateContext()
        let (freshListing, users, posts) = try fresh.performAndWait {
            let users = try fresh.fetch(FetchRequest<User>())
            let posts = try fresh.fetch(FetchRequest<Post>())
            return (try DemoWorker.listing(users: users, posts: posts), users.count, posts.count)
        }
        let freshChecksum = try DemoWorker.checksum(freshListing, manager: manager)
        let (duplicates, ages) = try manager.coordinator.pool.withConnection { connection in
            let duplicates = try connection.query("""
                SELECT (SELECT count(*) FROM (SELECT user_id FROM users GROUP BY user_id HAVING count(*) > 1) u)
                     + (SELECT count(*) FROM (SELECT post_id FROM posts GROUP BY post_id HAVING count(*) > 1) p)
                """)[0].decode(Int.self, at: 0)
            let ages = try connection.query("SELECT coalesce(sum(age), 0)::bigint FROM users")[0].decode(Int.self, at: 0)
            return (duplicates, ages)
        }
        let increments = (workers.map(\.counters) + killed.map(\.counters)).reduce(0) { $0 + $1.increments }
        let unknown = (workers.map(\.counters) + killed.map(\.counters)).reduce(0) { $0 + $1.incrementsUnknown }
            + killed.filter(\.killedSavingIncrement).count
        let savers = pids.union(killed.filter { $0.counters.saves > 0 }.map(\.pid))
        let latency = feed.percentiles
        let checksums = Set(workers.compactMap(\.mainChecksum) + [parentChecksum, freshChecksum])
        let everyWorkerEqual = workers.allSatisfy { $0.mainEqualsFresh && $0.error == nil }
        let mergedEverywhere = workers.allSatisfy(\.mergedFromEveryOtherWorker)
            && savers.isSubset(of: Set(feed.byProcess.keys))
        return DemoSummary(
            workers: workers, killedWorkers: killed, chaos: chaos, seconds: seconds, users: users, posts: posts,
            saves: (workers.map(\.counters) + killed.map(\.counters)).reduce(0) { $0 + $1.saves },
            duplicateKeys: duplicates, incrementsReported: increments, incrementsStored: ages,
            incrementsUnknown: unknown, incrementsCommittedUnreported: ages - increments,
            lostUpdates: max(0, increments - ages),
            conflictsSettled: workers.reduce(0) { $0 + $1.counters.conflictsSettled },
            conflictsRetried: workers.reduce(0) { $0 + $1.counters.conflictsRetried },
            mergeP50Milliseconds: latency.p50, mergeP99Milliseconds: latency.p99, deadlocks: deadlocks,
            lockTimeouts: workers.reduce(0) { $0 + $1.counters.lockTimeouts },
            retries: workers.reduce(0) { $0 + $1.counters.conflictsRetried + $1.counters.libraryRetries },
            libraryRetries: workers.reduce(0) { $0 + $1.counters.libraryRetries },
            libraryRetriesByCause: workers.reduce(into: [:]) { sums, worker in
                sums.merge(worker.counters.libraryRetriesByCause, uniquingKeysWith: +)
            },
            parentChecksum: parentChecksum, parentEqualsFresh: parentChecksum == freshChecksum,
            allChecksumsEqual: checksums.count == 1 && workers.allSatisfy { $0.mainChecksum != nil },
            proven: everyWorkerEqual && mergedEverywhere && checksums.count == 1 && duplicates == 0
                && increments <= ages && ages <= increments + unknown && deadlocks == 0)
    }

    func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    func text() -> String {
        func mark(_ ok: Bool) -> String { ok ? "✔" : "✘" }
        var lines = [
            "",
            String(format: "%d workers wrote for %.1f s: %d saves, %d users and %d posts stored.",
                   workers.count, seconds, saves, users, posts),
            "",
            Terminal.row(["WORKER", "POLICY", "SAVES", "SETTLED", "RETRIED", "MERGED", "MAIN = FRESH"],
                         widths: [7, 15, 7, 8, 8, 8, 14]),
        ]
        for worker in workers {
            lines.append(Terminal.row(
                ["\(worker.index)", worker.policy, "\(worker.counters.saves)", "\(worker.counters.conflictsSettled)",
                 "\(worker.counters.conflictsRetried)", "\(worker.counters.merged)",
                 "\(mark(worker.mainEqualsFresh)) \(worker.mainChecksum.map { String($0.prefix(12)) } ?? worker.error ?? "-")"],
                widths: [7, 15, 7, 8, 8, 8, 14]))
        }
        for worker in killedWorkers {
            lines.append(Terminal.row(
                ["\(worker.index)†", "killed", "\(worker.counters.saves)",
                 "\(worker.counters.conflictsSettled)", "\(worker.counters.conflictsRetried)",
                 "\(worker.counters.merged)", worker.killedSavingIncrement ? "in a save" : "between saves"],
                widths: [7, 15, 7, 8, 8, 8, 14]))
        }
        if let chaos {
            lines += [
                "",
                "chaos: \(chaos.workersKilled) workers killed with SIGKILL (\(chaos.workersReplaced) replaced), "
                    + "\(chaos.backendsTerminated) backends terminated, \(chaos.serverRestarts) server restart(s), "
                    + "\(incrementsUnknown) increment(s) unknown",
            ]
        }
        lines += [
            "",
            "\(mark(allChecksumsEqual)) every process's main context, kept current only by merges, equals a fresh fetch"
                + " (checksum \(parentChecksum.prefix(12)) in all \(workers.count + 1) processes)",
            "\(mark(duplicateKeys == 0)) no key stored twice (\(duplicateKeys) duplicates; overlapping imports)",
            "\(mark(lostUpdates == 0 && incrementsCommittedUnreported <= incrementsUnknown)) no lost update: "
                + "\(incrementsReported) increments reported, \(incrementsStored) stored"
                + (chaos == nil && incrementsUnknown == 0 ? " " : ", \(incrementsUnknown) unknown, "
                    + "\(incrementsCommittedUnreported) committed but unreported ")
                + "(\(conflictsRetried) conflicts retried under .error, \(conflictsSettled) settled by policy)",
            "\(mark(workers.allSatisfy(\.mergedFromEveryOtherWorker))) every worker merged the saves of every other",
            "\(mark(deadlocks == 0)) no deadlock (server's count: \(deadlocks); \(lockTimeouts) lock timeouts, "
                + "\(retries) saves done again: \(retries - libraryRetries) by the workers, \(libraryRetries) by the library"
                + (libraryRetries == 0 ? ")" : " — " + Self.byCause(libraryRetriesByCause) + ")"),
            String(format: "merge latency here (save began → merged): p50 %.1f ms, p99 %.1f ms",
                   mergeP50Milliseconds, mergeP99Milliseconds),
        ]
        return lines.joined(separator: "\n")
    }

    /// Counts by cause, largest first: `serialization 60, row_held 12`.
    static func byCause(_ counts: [String: Int]) -> String {
        counts.filter { $0.value > 0 }.sorted { ($1.value, $0.key) < ($0.value, $1.key) }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}
