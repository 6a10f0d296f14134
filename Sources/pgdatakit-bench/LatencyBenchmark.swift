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
            Starts a second process (this program's `latency-listener`) with a context
            manager whose main context holds one user. This process updates that user in a
            private context, one save at a time; the latency of a save is the time from its
            commit (its did-save observer) to the end of the other process's merge (its
            objects-did-change observer), on the system-wide monotonic clock. The floor, in
            the same run: a raw `NOTIFY` from a plain connection here until a plain
            listening connection there has it.
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

        // Saves: commit here → merge finished there.
        let context = manager.newPrivateContext()
        let committed = CommitTime()
        let token = context.observeDidSave { _ in committed.nanoseconds = monotonicNanoseconds() }
        defer { token.cancel() }
        let user = try context.performAndWait { () throws -> BenchUser in
            guard let user = try BenchUser.first(in: context, where: "userID == 'latency'") else {
                throw ValidationError("the seeded user is missing")
            }
            return user
        }
        var mergeTimes: [Double] = []
        for index in 0..<(warmup + saves) {
            try context.performAndWait {
                user.age = index
                try context.save()
            }
            let merged = try listener.time(of: "merged", index)
            if index >= warmup { mergeTimes.append(Double(merged - committed.nanoseconds) / 1e6) }
        }

        let merge = Percentiles(mergeTimes)
        let notify = Percentiles(notifyTimes)
        print("latency over \(saves) saves (after \(warmup) untimed), two processes, milliseconds")
        print("                               p50      p99      max")
        print("  commit → merged (objects):  \(merge.row)")
        print("  raw NOTIFY → received:      \(notify.row)")
        print("  ratio p50 merged/raw:       \(String(format: "%.1f", merge.p50 / max(notify.p50, 0.001)))")
        print(
            "RESULT latency p50_ms=\(format(merge.p50)) p99_ms=\(format(merge.p99)) max_ms=\(format(merge.max)) "
                + "notify_p50_ms=\(format(notify.p50)) notify_p99_ms=\(format(notify.p99))")
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

/// The did-save time of the last save; written and read on the saving context's queue
/// and the benchmark's thread one after the other (performAndWait orders them).
final class CommitTime: @unchecked Sendable {
    var nanoseconds: Int64 = 0
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
