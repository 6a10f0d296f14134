import ArgumentParser
import Foundation
import PGDataKit
import PGDataKitCommands
import Synchronization

struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Several worker processes import and edit one dataset while this one shows it live.",
        discussion: """
            Migrates the example schema (users and posts), then starts --workers processes \
            that share the dataset: they import generated users and posts whose keys \
            overlap, rename users under different merge policies (object trump, store \
            trump, error + retry), add one to users' ages under `.error` with retries, and \
            delete posts. This process follows it all through object controllers over its \
            main context and the change log, and shows rows per entity, saves per second \
            per worker, merge latency, conflicts settled per policy and the last changes.

            After --duration seconds (or Ctrl-C) — and, without Ctrl-C, once every worker \
            has merged a save of every other (a late replacement gets up to 30 s more) — \
            the workers stop, one of them saves a marker, and every process waits until the \
            marker is merged into its main context; then the summary shows what that \
            proves: each main context, kept current only by merges, equals a fresh fetch \
            (the same checksum in every process); no key is stored twice; no increment was \
            lost; every worker merged the saves of every other.

            Without DATABASE_URL (or --database-url) it runs on a throwaway server. With \
            one, it creates a database of its own there (pgdatakit_demo_…) and drops it at \
            the end unless --keep-database.

            With --chaos it also kills a worker with SIGKILL in the middle of a save (twice, \
            each time starting a replacement), terminates random backends of the workers, \
            and on the throwaway server restarts PostgreSQL once; the workers redo what did \
            not commit, and the summary accounts for the killed workers' saves (an \
            increment whose commit was never reported is "unknown", not lost).

            Exit status: 0 when every proof holds, 1 otherwise or on an error.
            """)

    @Option(help: "Worker processes (1 to 16).")
    var workers = 3

    @Option(help: "Seconds the workers write (Ctrl-C stops earlier).")
    var duration = 20.0

    @Flag(help: "Print the summary as JSON (and no live view).")
    var json = false

    @Flag(help: "Print plain progress lines even on a terminal.")
    var plain = false

    @Option(help: "Seed of the generated data.")
    var seed: UInt64 = 42

    @Option(help: "Users in the key space the workers share.")
    var users = 300

    @Option(help: "Posts in the key space the workers share.")
    var posts = 2000

    /// Kills and replaces workers mid-save, terminates their backends and restarts the
    /// throwaway server while they write (see `DemoChaos`).
    @Flag(help: "Kill workers mid-save, terminate backends, restart the throwaway server once.")
    var chaos = false

    @Flag(help: "Keep the demo database on a DATABASE_URL server.")
    var keepDatabase = false

    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        guard (1...16).contains(workers) else { throw ValidationError("--workers takes 1 to 16") }
        guard duration > 0, duration <= 3600 else { throw ValidationError("--duration takes (0, 3600] seconds") }
        guard (10...100_000).contains(users), (10...1_000_000).contains(posts) else {
            throw ValidationError("--users takes 10 to 100000, --posts 10 to 1000000")
        }
    }

    /// Lets the workers go on (up to 30 s) until each has merged a save of every other: a
    /// worker that started late (a replacement under --chaos, on a loaded machine) is then
    /// judged on its merging, not on its start-up time.
    static func waitForEveryMerge(_ processes: DemoProcesses, _ view: DemoView) {
        guard !everyWorkerMergedEveryOther(processes.board.withLock { $0 }) else { return }
        view.note("waiting until every worker merged a save of every other…")
        _ = processes.wait(seconds: 30) { board in
            everyWorkerMergedEveryOther(board) || !board.failures.isEmpty || !board.exited.isEmpty
        }
    }

    /// Whether each running worker's latest report lists every other running worker among
    /// those it merged saves from.
    static func everyWorkerMergedEveryOther(_ board: DemoProcesses.Board) -> Bool {
        let pids = Set(board.latest.values.map(\.pid))
        return board.latest.values.allSatisfy { report in
            pids.subtracting([report.pid]).isSubset(of: report.counters.mergedFrom)
        }
    }

    func run() throws {
        let place = try DemoDatabase(options: database, keep: keepDatabase)
        defer { place.close() }
        let url = try place.prepare()

        let manager = try ContextManager(
            configuration: ConnectionConfiguration(url), entities: ExampleSchema.entities, maximumConnections: 4)
        defer { manager.close() }
        let dataset = try DatasetControllers(context: manager.mainContext)
        defer { dataset.stop() }
        let feed = DemoFeed()
        let remote = manager.coordinator.observeRemoteChanges { record in feed.add(record, arrived: Date()) }
        defer { remote.cancel() }

        // A worker that ended must not take this process down when it is sent a command.
        signal(SIGPIPE, SIG_IGN)
        let processes = try DemoProcesses(
            count: workers, url: url, seed: seed, users: users, posts: posts, chaos: chaos)
        defer { processes.finish() }
        let stop = StopSignal()
        let interrupt = stop.onInterrupt()
        defer { interrupt.cancel() }
        guard processes.wait(seconds: 60, until: { board in
            board.latest.count == workers || !board.failures.isEmpty || !board.exited.isEmpty
        }), processes.board.withLock({ $0.failures.isEmpty && $0.exited.isEmpty }) else {
            throw ValidationError("the workers did not start: \(processes.board.withLock { $0.failures })")
        }
        let view = DemoView(
            workers: workers, duration: duration, live: !json && !plain && isatty(STDOUT_FILENO) == 1,
            quiet: json)
        let deadlocks = try ServerDeadlocks(manager: manager)
        let chaos = chaos ? DemoChaos(processes: processes, url: url, server: place.server, duration: duration) : nil
        let started = Date()
        view.begin()
        while !stop.isFired, Date().timeIntervalSince(started) < duration {
            try chaos?.act(elapsed: Date().timeIntervalSince(started)) { view.note($0) }
            let board = processes.board.withLock { $0 }
            if !board.failures.isEmpty || !board.exited.isEmpty { break }
            view.show(
                elapsed: Date().timeIntervalSince(started), rows: dataset.counts, board: board, feed: feed,
                deadlocks: deadlocks.latest())
            stop.wait(upTo: view.interval)
        }
        let writing = Date().timeIntervalSince(started)
        for (worker, message) in processes.board.withLock({ $0.failures }).sorted(by: { $0.key < $1.key }) {
            printError("worker \(worker) failed: \(message)")
        }

        if !stop.isFired { Self.waitForEveryMerge(processes, view) }

        // Stop; one marker save after everyone stopped; wait until everyone merged it.
        view.note("stopping the workers…")
        processes.sendAll(WorkerCommand.stop)
        guard processes.wait(seconds: 60, until: { $0.stopped.count + $0.failures.count == workers || !$0.exited.isEmpty })
        else { throw ValidationError("the workers did not stop within a minute") }
        let marker = "demo-marker-\(UUID().uuidString.prefix(8).lowercased())"
        try saveMarker(marker, url: url)
        processes.sendAll("\(WorkerCommand.verify) \(marker)")
        view.note("waiting until every process has merged every save…")
        _ = dataset.waitForUser(marker, seconds: 60)  // if it never comes, the checksums say so
        _ = processes.wait(seconds: 90, until: { $0.finals.count + $0.failures.count == workers || $0.exited.count == workers })
        let board = processes.board.withLock { $0 }
        // The workers' sessions end with their processes, and report their counts then.
        processes.finish()

        let parentListing = try dataset.listing()
        let settledDeadlocks = try patiently { try deadlocks.settled() }
        let summary = try patiently {
            try DemoSummary.make(
                workers: workers, seconds: writing, board: board, feed: feed, manager: manager,
                parentListing: parentListing, deadlocks: settledDeadlocks, chaos: chaos?.counts)
        }
        view.finish(summary)
        if json {
            printLine(summary.json())
        } else {
            print(summary.text())
        }
        guard summary.proven else { throw ExitCode(1) }
    }

    /// Saves the marker user through a manager of its own, closed at once: its origin is
    /// no watching process's, so every one (the workers and this one's main context)
    /// merges the marker from its listener, which delivers the change log in commit
    /// order — once the marker is in a main context, every save committed before it is
    /// too. (A process that saved the marker itself would merge it at once from its own
    /// save, possibly before its listener delivered the other processes' last saves:
    /// worker 0 did, and under `--chaos` on a busy machine its main context once differed
    /// from a fresh fetch at the end.) Under `--chaos`, a save that fails (a restart, an
    /// unknown outcome) is tried again unless the marker is found stored.
    private func saveMarker(_ marker: String, url: String) throws {
        let marking = try patiently {
            try ContextManager(configuration: ConnectionConfiguration(url), entities: ExampleSchema.entities, maximumConnections: 1)
        }
        defer { marking.close() }
        var attempts = 0
        while true {
            let context = marking.newPrivateContext(name: "marker")
            do {
                try context.performAndWait {
                    User(context: context).userID = marker
                    try context.save()
                }
                return
            } catch {
                attempts += 1
                guard chaos, attempts < 20 else { throw error }
                Thread.sleep(forTimeInterval: 0.2)
                let check = marking.newPrivateContext(name: "marker check")
                let stored = try? check.performAndWait { try User.first(in: check, where: "userID == %@", marker) != nil }
                if stored == true { return }
            }
        }
    }

    /// Runs `body`; under `--chaos`, again (up to ten times, a moment apart) when it
    /// fails on a lost connection: the pool may still hold connections that the server
    /// restart broke, and each failed use drops one.
    private func patiently<T>(_ body: () throws -> T) throws -> T {
        var attempts = 0
        while true {
            do {
                return try body()
            } catch let error as PostgresError where chaos && error.isConnectionError && attempts < 10 {
                attempts += 1
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }
}

/// Where the demo runs: a throwaway server, or a database of its own on the given one.
final class DemoDatabase {
    private let options: DatabaseOptions
    private let keep: Bool
    /// The throwaway server, when the demo runs on one.
    private(set) var server: EmbeddedPostgres?
    private var admin: Connection?
    private var created: String?

    init(options: DatabaseOptions, keep: Bool) throws {
        self.options = options
        self.keep = keep
    }

    /// The URL of an empty example schema, its tables created from the model.
    func prepare() throws -> String {
        let (url, server) = try options.resolve()
        self.server = server
        var configuration = ConnectionConfiguration(url)
        if server == nil {
            let admin = try Connection(configuration)
            self.admin = admin
            let name = "pgdatakit_demo_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
            do {
                try admin.execute("CREATE DATABASE \(Connection.quoteIdentifier(name))")
            } catch let error as PostgresError where error.sqlState == .insufficientPrivilege {
                throw ValidationError("the demo creates a database of its own, and this role may not (CREATEDB): \(error)")
            }
            created = name
            configuration = configuration.database(name)
            printError("Demo database: \(name)\(keep ? " (kept afterwards)" : " (dropped afterwards)")")
        }
        // The tables come from the model, as the generator writes them (`pgdatakit schema`).
        try ContextManager(
            configuration: configuration, entities: ExampleSchema.entities, maximumConnections: 1, createsSchema: true
        ).close()
        guard let rendered = configuration.renderedConnectionString() else {
            throw ValidationError("the database URL cannot be passed to the worker processes")
        }
        return rendered
    }

    func close() {
        if let created, let admin, !keep {
            _ = try? admin.execute("DROP DATABASE IF EXISTS \(Connection.quoteIdentifier(created)) WITH (FORCE)")
        }
        admin?.close()
        try? server?.stop()
    }
}

/// What this process's listener saw: merge delays and the last saves, by worker.
final class DemoFeed: Sendable {
    private struct Contents {
        var delays: [Double] = []
        var recent: [(pid: Int32, line: String)] = []
        var byProcess: [Int32: Int] = [:]
        var lastSave: [Int32: Date] = [:]
    }

    private let contents = Mutex(Contents())

    func add(_ record: ChangeRecord, arrived: Date) {
        let delay = max(0, arrived.timeIntervalSince(record.time) * 1000)
        let line = "#\(record.id) " + WatchState.entitySummary(of: record.changes) + String(format: "  %.1f ms", delay)
        contents.withLock { contents in
            contents.delays.append(delay)
            contents.recent.append((record.originProcessID, line))
            if contents.recent.count > 8 { contents.recent.removeFirst() }
            contents.byProcess[record.originProcessID, default: 0] += 1
            contents.lastSave[record.originProcessID] = max(
                contents.lastSave[record.originProcessID] ?? .distantPast, record.time)
        }
    }

    /// p50 and p99 of the delays so far, in milliseconds.
    var percentiles: (p50: Double, p99: Double) {
        contents.withLock { contents in
            let sorted = contents.delays.sorted()
            guard !sorted.isEmpty else { return (0, 0) }
            return (sorted[(sorted.count - 1) / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
        }
    }

    var recent: [(pid: Int32, line: String)] { contents.withLock { $0.recent } }
    var byProcess: [Int32: Int] { contents.withLock { $0.byProcess } }
    /// When the last save of each process (by pid) began, as its change record says.
    var lastSave: [Int32: Date] { contents.withLock { $0.lastSave } }
}

/// The server's count of deadlocks in the demo's database (`pg_stat_database`), from
/// the start of the run.
final class ServerDeadlocks {
    private let manager: ContextManager
    private let baseline: Int
    private var last = 0
    private var lastRead = ContinuousClock.now - .seconds(10)

    init(manager: ContextManager) throws {
        self.manager = manager
        baseline = try Self.read(manager)
    }

    /// The count so far, read at most once a second (the server publishes a session's
    /// counts within a second or so of its transaction).
    func latest() -> Int {
        if lastRead.duration(to: .now) >= .seconds(1) {
            lastRead = .now
            if let count = try? Self.read(manager) { last = max(0, count - baseline) }
        }
        return last
    }

    /// The final count, once the workers' sessions ended: read until two reads a
    /// quarter of a second apart agree (at most 3 s).
    func settled() throws -> Int {
        var previous = try Self.read(manager)
        let deadline = ContinuousClock.now + .seconds(3)
        while ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.25)
            let count = try Self.read(manager)
            if count == previous { break }
            previous = count
        }
        return max(0, previous - baseline)
    }

    private static func read(_ manager: ContextManager) throws -> Int {
        try manager.coordinator.pool.withConnection { connection in
            try connection.query(
                "SELECT coalesce(sum(deadlocks), 0)::bigint FROM pg_stat_database WHERE datname = current_database()"
            )[0].decode(Int.self, at: 0)
        }
    }
}
