import ArgumentParser
import Foundation
import PGDataKit

#if canImport(Glibc)
    import Glibc
#endif

/// Nanoseconds on the system-wide monotonic clock (comparable between processes).
func monotonicNanoseconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}

/// The raw channel the floor is measured on.
let rawLatencyChannel = "pgdatakit_bench_raw"

struct LatencyBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency",
        abstract: "Commit in one process → merge finished in another process's main context.",
        discussion: """
            Starts a second process (this program's `latency-listener`) with a context \
            manager whose main context holds one user. This process updates that user in a \
            private context, one save at a time; the latency of a save is the time from its \
            sending (a time taken just before `save()`: the save's one round trip holds its \
            COMMIT) to the end of the other process's merge (its objects-did-change \
            observer), on the system-wide monotonic clock. A time taken once the COMMIT \
            returned would not do: on a loaded machine the other process may merge before \
            this one's thread runs again. The floors, in the same run, each from a plain \
            connection here until a plain listening connection there has the notification: \
            a raw `NOTIFY` alone, and a raw transaction like the save (`BEGIN`, an `UPDATE` \
            of one row, `NOTIFY`, `COMMIT`, sent in one go).
            """)

    @Option(help: "Timed saves (and as many raw notifications).")
    var saves = 1000

    @Option(help: "Untimed saves first.")
    var warmup = 50

    func run() throws {
        let database = try BenchDatabase()
        defer { database.drop() }
        let manager = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { manager.close() }
        let seed = manager.newPrivateContext()
        try seed.performAndWait {
            let user = BenchUser(context: seed)
            user.userID = "latency"
            user.age = -1
            try seed.save()
        }
        guard let url = database.configuration.renderedConnectionString() else {
            throw ValidationError("the database configuration cannot be passed to another process")
        }
        let listener = try BenchProcess(arguments: ["latency-listener", url])
        defer { listener.stop() }
        guard listener.nextLine()?.hasPrefix("ready") == true else {
            throw ValidationError("the listener process did not start")
        }

        // Floor: raw NOTIFY from here to a listening connection there.
        let raw = try Connection(database.configuration)
        defer { raw.close() }
        var notifyTimes: [Double] = []
        for index in 0..<(warmup + saves) {
            let sent = monotonicNanoseconds()
            try raw.notify(rawLatencyChannel, payload: String(index))
            let received = try listener.time(of: "notify", index)
            if index >= warmup { notifyTimes.append(Double(received - sent) / 1e6) }
        }

        // Floor: a raw transaction like a save, sent here → notification received there.
        try raw.execute("CREATE TABLE bench_latency_raw (id integer PRIMARY KEY, n bigint NOT NULL)")
        try raw.execute("INSERT INTO bench_latency_raw VALUES (1, 0)")
        var commitTimes: [Double] = []
        for index in 0..<(warmup + saves) {
            let sent = monotonicNanoseconds()
            try raw.executeScript(
                "BEGIN; UPDATE bench_latency_raw SET n = n + 1 WHERE id = 1; "
                    + "NOTIFY \(rawLatencyChannel), '\(index)'; COMMIT")
            let received = try listener.time(of: "notify", index)
            if index >= warmup { commitTimes.append(Double(received - sent) / 1e6) }
        }

        // Saves: sent here → merge finished there.
        let context = manager.newPrivateContext()
        let user = try context.performAndWait { () throws -> BenchUser in
            guard let user = try BenchUser.first(in: context, where: "userID == 'latency'") else {
                throw ValidationError("the seeded user is missing")
            }
            return user
        }
        var mergeTimes: [Double] = []
        for index in 0..<(warmup + saves) {
            var sent: Int64 = 0
            try context.performAndWait {
                user.age = index
                sent = monotonicNanoseconds()
                try context.save()
            }
            let merged = try listener.time(of: "merged", index)
            if index >= warmup { mergeTimes.append(Double(merged - sent) / 1e6) }
        }

        let merge = Percentiles(mergeTimes)
        let notify = Percentiles(notifyTimes)
        let commit = Percentiles(commitTimes)
        print("latency over \(saves) saves (after \(warmup) untimed), two processes, milliseconds")
        print("                                          p50      p99      max")
        print("  save sent → merged (objects):        \(merge.row)")
        print("  raw NOTIFY → received:               \(notify.row)")
        print("  raw UPDATE+NOTIFY+COMMIT → received: \(commit.row)")
        print("  ratio p50 merged/raw transaction:    \(String(format: "%.2f", merge.p50 / max(commit.p50, 0.001)))")
        print(
            "RESULT latency p50_ms=\(format(merge.p50)) p99_ms=\(format(merge.p99)) max_ms=\(format(merge.max)) "
                + "notify_p50_ms=\(format(notify.p50)) notify_p99_ms=\(format(notify.p99)) "
                + "raw_commit_p50_ms=\(format(commit.p50)) raw_commit_p99_ms=\(format(commit.p99)) "
                + "commit_ratio=\(String(format: "%.3f", merge.p50 / max(commit.p50, 0.001)))")
    }

    func format(_ value: Double) -> String { String(format: "%.3f", value) }
}

/// The other process of the latency benchmark: merges saves into its main context and
/// prints when each merge finished and when each raw notification arrived.
struct LatencyListener: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency-listener", abstract: "The second process of `latency` (not run by hand).",
        shouldDisplay: false)

    @Argument(help: "The database URL.")
    var databaseURL: String

    func run() throws {
        let configuration = ConnectionConfiguration(databaseURL)
        let manager = try ContextManager(configuration: configuration, entities: [BenchUser.self])
        let main = manager.mainContext
        // The main context holds the user, so each merge refreshes it in place.
        let (held, id) = try main.performAndWait { () throws -> (BenchUser, ObjectID) in
            guard let user = try BenchUser.first(in: main, where: "userID == 'latency'") else {
                throw ValidationError("the seeded user is missing")
            }
            return (user, user.objectID)
        }
        let token = main.observeObjectsDidChange { _ in
            let now = monotonicNanoseconds()
            let age = (try? main.existingObject(with: id) as? BenchUser)?.age ?? -1
            emitLine("merged \(age) \(now)")
        }
        let raw = try Connection(configuration)
        try raw.listen(rawLatencyChannel)
        emitLine("ready")
        while true {
            if let notification = try raw.waitForNotification(timeout: .seconds(60)) {
                emitLine("notify \(notification.payload) \(monotonicNanoseconds())")
            }
            withExtendedLifetime((token, held)) {}
        }
    }
}

/// Writes a whole line to standard output in one call.
func emitLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

struct Percentiles {
    var p50: Double
    var p99: Double
    var max: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        func at(_ fraction: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
        }
        p50 = at(0.5)
        p99 = at(0.99)
        max = sorted.last ?? 0
    }

    var row: String { [p50, p99, max].map { String(format: "%8.3f", $0) }.joined(separator: " ") }
}
