import ArgumentParser
import Foundation
import PGDataKit
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The table of the raw floor and its notification channel.
let rawThroughputTable = "bench_raw_counters"
let rawThroughputChannel = "pgdatakit_bench_throughput"

struct ThroughputBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "throughput",
        abstract: "Saves/s and merge latency as writer processes grow, beside raw NOTIFY and plain commits.",
        discussion: """
            With --repeats R, each writer count is measured R times (the floors, then \
            the saves, in turn) and the medians of the rates are shown (merge latencies \
            over all R runs): the machine's noise moves single runs by a third.

            For each writer count N, starts N writer processes (this program's \
            `throughput-writer`) that save as fast as they can for --seconds: each save is a \
            private context updating the writer's own user (one UPDATE, the change record, \
            the NOTIFY, the commit). This process's main context holds every writer's user \
            and merges all saves; merge latency is the time from a writer's sending its save \
            (one round trip: the commit is in it) to the end of the merge here that showed \
            that save. In the \
            same run, the floor: N processes committing raw transactions that update one row \
            and NOTIFY, as fast as they can. Every process commits with a NOTIFY, so they \
            all queue on PostgreSQL's notification commit lock: the table shows where that \
            bites. A second floor, *plain*: N processes committing the same one-row UPDATE \
            with no NOTIFY (BEGIN, UPDATE, COMMIT), which share WAL flushes as notifying \
            commits cannot: what PostgreSQL commits when nobody notifies (`plain_ratio` = \
            saves/s ÷ plain tx/s). Each writer's own context manager merges the other writers' saves, as a \
            worker that reads does; --no-writer-merges turns that off \
            (automaticallyMergesRemoteChanges = false), as for a worker that only writes.
            """)

    @Option(help: "Writer process counts, comma-separated (1 to 64 each), such as 2,4,8,16.")
    var writers = "1,2,4,8"

    @Option(help: "Seconds each measurement runs.")
    var seconds = 5.0

    @Option(help: "How many times each writer count is measured (raw, then objects, in turn); medians are reported.")
    var repeats = 1

    @Flag(
        inversion: .prefixedNo,
        help: "Whether the writers' own context managers merge each other's saves (as workers that read do).")
    var writerMerges = true

    func run() throws {
        let counts = writers.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !counts.isEmpty, counts.allSatisfy({ (1...64).contains($0) }) else {
            throw ValidationError("--writers takes counts from 1 to 64, such as 1,2,4,8")
        }
        guard seconds > 0, seconds <= 600 else { throw ValidationError("--seconds must be in (0, 600]") }
        guard (1...50).contains(repeats) else { throw ValidationError("--repeats must be from 1 to 50") }
        let database = try BenchDatabase()
        defer { database.drop() }
        guard let url = database.configuration.renderedConnectionString() else {
            throw ValidationError("the database configuration cannot be passed to another process")
        }
        let most = counts.max() ?? 1
        try seed(database.configuration, writers: most)

        let manager = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { manager.close() }
        let merges = MergeTimes()
        let main = manager.mainContext
        let held = try main.performAndWait {
            try BenchUser.fetch(in: main, where: "userID BEGINSWITH %@", "writer-")
        }
        let token = main.observeObjectsDidChange { changes in
            let now = monotonicNanoseconds()
            for id in changes.updated {
                guard let user = try? main.existingObject(with: id) as? BenchUser,
                    let seq = user.age, let writer = Int(user.userID.dropFirst("writer-".count))
                else { continue }
                merges.record(writer: writer, seq: seq, at: now)
            }
        }
        defer { token.cancel() }

        print("throughput: N writer processes, \(format(seconds, 1)) s each, \(repeats) run(s) per count (medians); one save = one transaction")
        print("(UPDATE of one row, change record, NOTIFY, COMMIT); raw = UPDATE + NOTIFY + COMMIT on a plain connection;")
        print("plain = UPDATE + COMMIT (no NOTIFY): PostgreSQL's commits when nobody notifies")
        print(writerMerges ? "writers merge each other's saves" : "writers do not merge (automaticallyMergesRemoteChanges = false)")
        print(
            "writers   raw tx/s    saves/s   saves/raw   merge p50 ms   merge p99 ms   merged          listening tx/s  saves/listening"
                + "  plain tx/s  saves/plain")
        var rows: [ThroughputRow] = []
        for count in counts {
            let row = try measureRow(url: url, writers: count, merges: merges)
            rows.append(row)
            print(row.line())
        }
        withExtendedLifetime(held) {}
        let last = rows[rows.count - 1]
        let peak = rows.map(\.saves).max() ?? 0
        print(
            "RESULT throughput writers=\(last.writers) saves_per_s=\(format(last.saves, 0)) "
                + "raw_tx_per_s=\(format(last.raw, 0)) ratio=\(format(last.saves / max(last.raw, 1), 3)) "
                + "merge_p50_ms=\(format(last.merge.p50, 3)) merge_p99_ms=\(format(last.merge.p99, 3)) "
                + "peak_saves_per_s=\(format(peak, 0)) raw_listening_tx_per_s=\(format(last.listening, 0)) "
                + "listening_ratio=\(format(last.saves / max(last.listening, 1), 3)) "
                + "plain_tx_per_s=\(format(last.plain, 0)) plain_ratio=\(format(last.saves / max(last.plain, 1), 3))")
    }

    /// Measures one writer count `repeats` times — the raw floor, the listening floor, the
    /// plain floor, then the saves, in turn — and returns the medians.
    func measureRow(url: String, writers count: Int, merges: MergeTimes) throws -> ThroughputRow {
        var raws: [Double] = []
        var listenings: [Double] = []
        var plains: [Double] = []
        var saves: [Double] = []
        var latencies: [Double] = []
        var commits = 0
        for _ in 0..<repeats {
            raws.append(try measure(url: url, writers: count, mode: "raw").rate)
            listenings.append(try measure(url: url, writers: count, mode: "raw-listening").rate)
            plains.append(try measure(url: url, writers: count, mode: "plain").rate)
            merges.reset()
            let objects = try measure(url: url, writers: count, mode: writerMerges ? "objects" : "objects-unmerged")
            // Give the last merges a moment to arrive.
            Thread.sleep(forTimeInterval: 0.5)
            saves.append(objects.rate)
            latencies += merges.latencies(for: objects.commits)
            commits += objects.commits.count
        }
        return ThroughputRow(
            writers: count, raw: median(raws), listening: median(listenings), plain: median(plains),
            saves: median(saves), merge: Percentiles(latencies), merged: latencies.count, commits: commits)
    }

    /// One user per writer, and the raw floor's table with one row per writer.
    func seed(_ configuration: ConnectionConfiguration, writers: Int) throws {
        let connection = try Connection(configuration)
        defer { connection.close() }
        try connection.execute("CREATE TABLE \(rawThroughputTable) (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0)")
        try connection.execute(
            "INSERT INTO \(rawThroughputTable) (id) SELECT generate_series(0, $1 - 1)", [writers])
        try connection.execute(
            "INSERT INTO users (user_id, age) SELECT 'writer-' || i, -1 FROM generate_series(0, $1 - 1) AS i",
            [writers])
    }

    /// Runs `writers` processes in `mode` at once; their total rate and every commit.
    func measure(url: String, writers: Int, mode: String) throws -> (rate: Double, commits: [Commit]) {
        // Everyone starts at the same instant, once every process has connected and said
        // so (a fixed head start was too short for a process started on a loaded machine,
        // which then saved nothing).
        let processes = try (0..<writers).map { index in
            try BenchProcess(arguments: [
                "throughput-writer", url, String(index), mode, "0", String(seconds),
            ])
        }
        for (index, process) in processes.enumerated() {
            guard process.nextLine() == "ready" else {
                processes.forEach { $0.stop() }
                throw ValidationError("writer \(index) (\(mode)) did not get ready")
            }
        }
        let start = monotonicNanoseconds() + 100_000_000
        for process in processes { process.send("start \(start)") }
        // This process listens too (as its main context does in the objects runs).
        let listener = mode == "raw-listening" ? try RawListener(ConnectionConfiguration(url)) : nil
        defer { listener?.stop() }
        var total = 0
        var commits: [Commit] = []
        for (index, process) in processes.enumerated() {
            defer { process.stop() }
            var done = false
            while let line = process.nextLine() {
                let parts = line.split(separator: " ")
                if parts.count == 3, parts[0] == "commit", let seq = Int(parts[1]), let time = Int64(parts[2]) {
                    commits.append(Commit(writer: index, seq: seq, nanoseconds: time))
                } else if parts.count == 2, parts[0] == "done", let count = Int(parts[1]) {
                    total += count
                    done = true
                    break
                }
            }
            guard done else { throw ValidationError("writer \(index) (\(mode)) ended without reporting") }
        }
        return (Double(total) / seconds, commits)
    }

    func format(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

    /// The middle value (the mean of the two middle ones for an even count).
    func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

/// One writer count's medians: the floors (raw, listening, plain), the saves, and the
/// merge latencies.
struct ThroughputRow {
    var writers: Int
    /// Raw `UPDATE` + `NOTIFY` commits per second.
    var raw: Double
    /// The same while every process listens.
    var listening: Double
    /// Plain `UPDATE` commits (no `NOTIFY`) per second.
    var plain: Double
    /// Saves per second.
    var saves: Double
    var merge: Percentiles
    /// Commits whose merge was seen here, of all commits.
    var merged: Int
    var commits: Int

    /// The row as printed under the table's header.
    func line() -> String {
        String(
            format: "%7d  %9.0f  %9.0f  %10.2f  %13.3f  %13.3f   %d/%d   %11.0f  %14.2f  %10.0f  %11.2f",
            writers, raw, saves, saves / max(raw, 1), merge.p50, merge.p99, merged, commits, listening,
            saves / max(listening, 1), plain, saves / max(plain, 1))
    }
}

/// A session that listens on the raw floor's channel and reads every notification on a
/// thread of its own until stopped, as a process's change listener would.
final class RawListener: Sendable {
    private let connection: Connection
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(_ configuration: ConnectionConfiguration) throws {
        connection = try Connection(configuration)
        do {
            try connection.listen(rawThroughputChannel)
        } catch {
            connection.close()
            throw error
        }
        Thread { [self] in
            while !stopping.load(ordering: .relaxed) {
                _ = try? connection.waitForNotification(timeout: .milliseconds(50))
                _ = try? connection.pendingNotifications()
            }
            finished.signal()
        }.start()
    }

    /// Stops reading and closes the session.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
        connection.close()
    }
}

/// A writer's commit of sequence number `seq`.
struct Commit: Hashable {
    var writer: Int
    var seq: Int
    var nanoseconds: Int64
}

/// When this process's main context merged each (writer, seq) it saw.
final class MergeTimes: Sendable {
    private let times = Mutex<[Int: [Int: Int64]]>([:])

    func record(writer: Int, seq: Int, at nanoseconds: Int64) {
        times.withLock { times in
            if times[writer, default: [:]][seq] == nil { times[writer, default: [:]][seq] = nanoseconds }
        }
    }

    func reset() { times.withLock { $0 = [:] } }

    /// Milliseconds from commit to merge of the commits a merge showed (merges coalesce:
    /// a merge after several saves of one writer shows the last of them).
    func latencies(for commits: [Commit]) -> [Double] {
        times.withLock { times in
            commits.compactMap { commit in
                times[commit.writer]?[commit.seq].map { Double($0 - commit.nanoseconds) / 1e6 }
            }
        }
    }
}

/// One writer of the throughput benchmark: saves (or raw-commits) until the time is up,
/// then prints every commit time and its count.
struct ThroughputWriter: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "throughput-writer", abstract: "A writer process of `throughput` (not run by hand).",
        shouldDisplay: false)

    @Argument(help: "The database URL.") var databaseURL: String
    @Argument(help: "This writer's number.") var index: Int
    @Argument(help: "raw, raw-listening, plain, objects or objects-unmerged.") var mode: String
    @Argument(help: "Monotonic nanoseconds to start at; 0: print `ready` once connected and read `start NANOSECONDS`.")
    var start: Int64
    @Argument(help: "Seconds to run.") var seconds: Double

    func run() throws {
        let configuration = ConnectionConfiguration(databaseURL)
        var commits: [(Int, Int64)] = []
        commits.reserveCapacity(100_000)
        if mode == "plain" {
            // The same one-row UPDATE as the raw floor's, with no NOTIFY: commits that can
            // share a WAL flush, as notifying commits cannot.
            let connection = try Connection(configuration)
            defer { connection.close() }
            let end = try waitForStart()
            while monotonicNanoseconds() < end {
                try connection.transaction { connection -> Void in
                    try connection.execute("UPDATE \(rawThroughputTable) SET n = n + 1 WHERE id = $1", [index])
                }
                commits.append((commits.count, monotonicNanoseconds()))
            }
        } else if mode == "raw" || mode == "raw-listening" {
            let connection = try Connection(configuration)
            defer { connection.close() }
            // As every process listens in the objects runs, each of these processes
            // listens too, on a second session, and reads every notification: the raw
            // floor with PostgreSQL's cost of delivering each commit's notification to
            // every listener, and nothing of the library's.
            let listener = mode == "raw-listening" ? try RawListener(configuration) : nil
            defer { listener?.stop() }
            let end = try waitForStart()
            while monotonicNanoseconds() < end {
                try connection.transaction { connection in
                    try connection.execute("UPDATE \(rawThroughputTable) SET n = n + 1 WHERE id = $1", [index])
                    try connection.notify(rawThroughputChannel, payload: String(index))
                }
                commits.append((commits.count, monotonicNanoseconds()))
            }
        } else {
            let manager = try ContextManager(
                configuration: configuration, entities: [BenchUser.self],
                automaticallyMergesRemoteChanges: mode != "objects-unmerged")
            defer { manager.close() }
            let context = manager.newPrivateContext()
            let user = try context.performAndWait { () throws -> BenchUser in
                guard let user = try BenchUser.first(in: context, where: "userID == %@", "writer-\(index)") else {
                    throw ValidationError("writer-\(index) is missing")
                }
                return user
            }
            let end = try waitForStart()
            while monotonicNanoseconds() < end {
                let seq = commits.count
                // Stamped before the save is sent, not once it returned: another process
                // may merge the save before this one's thread runs again, and a time
                // taken then would come after the merge.
                var sent: Int64 = 0
                try context.performAndWait {
                    user.age = seq
                    sent = monotonicNanoseconds()
                    try context.save()
                }
                commits.append((seq, sent))
            }
        }
        var text = ""
        for (seq, time) in commits { text += "commit \(seq) \(time)\n" }
        text += "done \(commits.count)\n"
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Waits for the start (given, or read from standard input after `ready`) and returns
    /// the end.
    func waitForStart() throws -> Int64 {
        var start = self.start
        if start == 0 {
            FileHandle.standardOutput.write(Data("ready\n".utf8))
            guard let line = readLine(), line.hasPrefix("start "), let told = Int64(line.dropFirst(6)) else {
                throw ValidationError("expected `start NANOSECONDS` on standard input")
            }
            start = told
        }
        let wait = start - monotonicNanoseconds()
        if wait > 0 { Thread.sleep(forTimeInterval: Double(wait) / 1e9) }
        return start + Int64(seconds * 1e9)
    }
}
