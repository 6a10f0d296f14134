import ArgumentParser
import Foundation
import PGDataKit

#if canImport(Glibc)
    import Glibc
#endif

struct ControllerBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "controller",
        abstract: "Object controllers kept true while another process saves: refresh latency and statements.",
        discussion: """
            Loads ROWS users (ages 0–99) and, over the main context of a context manager, \
            opens CONTROLLERS controllers, each of one age band (`age >= a AND age < b`, \
            sorted by age and user id), together holding every row. A second process (this \
            program's `controller-writer`) then saves batches of BATCH-SIZE updates, each \
            moving random users to another age, one batch at a time. For each batch it \
            measures, on the system-wide monotonic clock, from the writer's sending its save \
            (a time taken just before `save()`, so that no merge can come before it: a time \
            taken once the COMMIT returned may come after this process merged it, on a \
            loaded machine) to the end of this process's merge into the main context (its \
            objects-did-change observer, registered before the controllers, so it runs \
            first) and to each controller's change callback, and counts the statements this \
            process sends per batch. "after merge" is each callback's time from the end of \
            the merge of its batch: what the controllers add. At the end every controller is compared with a fresh \
            fetch; then the controllers are stopped and a few more batches count the \
            statements of the merge alone, so that the controllers' share is measured, not \
            assumed (their membership statement may be sent while the merge runs).
            """)

    @Option(help: "Rows in the table.")
    var rows = 100_000

    @Option(help: "Controllers (each one age band).")
    var controllers = 10

    @Option(help: "Timed batches.")
    var batches = 300

    @Option(help: "Untimed batches first.")
    var warmup = 20

    @Option(help: "Updates per batch.")
    var batchSize = 100

    func validate() throws {
        guard rows >= batchSize, batchSize >= 1, controllers >= 1, controllers <= 100, batches >= 1 else {
            throw ValidationError("need rows ≥ batch-size ≥ 1, 1 ≤ controllers ≤ 100 and batches ≥ 1")
        }
    }

    func run() throws {
        let database = try BenchDatabase()
        defer { database.drop() }
        try load(database)

        let manager = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { manager.close() }
        let main = manager.mainContext
        let timing = BatchTiming(controllers: controllers)
        let coordinator = manager.coordinator
        // Registered before the controllers: called first after each merge.
        let mergeToken = main.observeObjectsDidChange { _ in timing.merged(at: monotonicNanoseconds()) }
        defer { mergeToken.cancel() }

        let open = try openControllers(on: main, timing: timing)
        let shown = main.performAndWait { open.map(\.objects.count).reduce(0, +) }

        guard let url = database.configuration.renderedConnectionString() else {
            throw ValidationError("the database configuration cannot be passed to another process")
        }
        let writer = try BenchProcess(arguments: [
            "controller-writer", url, "--rows", String(rows), "--batch-size", String(batchSize),
        ])
        defer { writer.stop() }
        guard writer.nextLine() == "ready" else { throw ValidationError("the writer process did not start") }

        func run(batch number: Int) throws -> (sent: Int64, measured: BatchTiming.Measured) {
            try runBatch(number, writer: writer, timing: timing, main: main, coordinator: coordinator)
        }

        var refresh: [Double] = []
        var merge: [Double] = []
        var afterMerge: [Double] = []
        var statementsWithControllers = 0
        var callbacks = 0
        for batch in 0..<(warmup + batches) {
            let (sent, measured) = try run(batch: batch)
            guard batch >= warmup else { continue }
            merge.append(Double(measured.merged - sent) / 1e6)
            refresh += measured.changed.map { Double($0 - sent) / 1e6 }
            afterMerge += measured.changed.map { Double($0 - measured.merged) / 1e6 }
            callbacks += measured.changed.count
            statementsWithControllers += measured.statements
        }
        let equal = try main.performAndWait {
            try open.allSatisfy { controller in
                guard let request = controller.fetchRequest else { return false }
                return try main.fetch(request).map(\.objectID) == controller.objects.map(\.objectID)
            }
        }
        // The merge alone: the same objects stay registered, the controllers are stopped.
        open.forEach { $0.stop() }
        let calibration = min(batches, 50)
        var statementsOfMerges = 0
        for batch in (warmup + batches)..<(warmup + batches + calibration) {
            statementsOfMerges += try run(batch: batch).measured.statements
        }
        writer.send("quit")
        let mergeStatements = Double(statementsOfMerges) / Double(calibration)
        let controllerStatements = Double(statementsWithControllers) / Double(batches) - mergeStatements
        let refreshes = Percentiles(refresh)
        let merges = Percentiles(merge)
        let added = Percentiles(afterMerge)
        let perController = max(0, controllerStatements) / Double(controllers)
        print("controller refresh over \(batches) batches of \(batchSize) updates (after \(warmup) untimed), milliseconds")
        print("  \(controllers) controllers on one main context, \(shown) of \(rows) rows shown; another process saves")
        print("                                   p50      p99      max")
        print("  save sent → merged (main context): \(merges.row)")
        print("  save sent → controller callback:   \(refreshes.row)   (\(callbacks) callbacks)")
        print("  merged → controller callback:      \(added.row)")
        print("  ratio p50 refresh/merge:           \(String(format: "%.2f", refreshes.p50 / max(merges.p50, 0.001)))")
        print("  statements per change set:      merge \(format(mergeStatements)) (measured alone), "
            + "controllers \(format(controllerStatements)) in all, \(format(perController)) per controller (target ≤ 1)")
        print("  controllers equal to fresh fetches at the end: \(equal ? "yes" : "NO")")
        guard equal else { throw ValidationError("a controller differs from a fresh fetch") }
        print(
            "RESULT controller p50_ms=\(format(refreshes.p50)) p99_ms=\(format(refreshes.p99)) "
                + "merge_p50_ms=\(format(merges.p50)) statements_per_change_set=\(format(perController)) "
                + "after_merge_p50_ms=\(format(added.p50))")
    }

    func format(_ value: Double) -> String { String(format: "%.3f", value) }
}

/// The other process of `controller`: saves a batch of updates each time it reads
/// `batch N` on standard input and prints `sent N <nanoseconds>` (the time just before
/// its `save()`); ends at `quit` or end of input.
struct ControllerWriter: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "controller-writer", abstract: "The second process of `controller` (not run by hand).",
        shouldDisplay: false)

    @Argument(help: "The database URL.")
    var databaseURL: String

    @Option(help: "Rows in the table.")
    var rows: Int

    @Option(help: "Updates per batch.")
    var batchSize: Int

    func run() throws {
        let manager = try ContextManager(
            configuration: ConnectionConfiguration(databaseURL), entities: [BenchUser.self],
            automaticallyMergesRemoteChanges: false)
        defer { manager.close() }
        let context = manager.newPrivateContext()
        var random = SplitMix64(seed: 7)
        emitLine("ready")
        while let line = readLine(), line != "quit" {
            guard line.hasPrefix("batch "), let index = Int(line.dropFirst(6)) else { continue }
            var chosen = Set<Int>()
            while chosen.count < min(batchSize, rows) { chosen.insert(Int.random(in: 0..<rows, using: &random)) }
            let userIDs = chosen.map { "user-\($0)" }
            let shifts = (0..<userIDs.count).map { _ in Int.random(in: 1..<100, using: &random) }
            var sent: Int64 = 0
            try context.performAndWait {
                let users = try BenchUser.fetch(in: context, where: "userID IN %@", userIDs)
                for (user, shift) in zip(users, shifts) { user.age = ((user.age ?? 0) + shift) % 100 }
                sent = monotonicNanoseconds()
                try context.save()
                context.reset()
            }
            emitLine("sent \(index) \(sent)")
        }
    }
}

/// SplitMix64: the same batches on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What happened during one batch, written by observers on the main context's queue and
/// read by the benchmark's thread between batches.
final class BatchTiming: @unchecked Sendable {
    // Safe: every access holds `lock`.

    /// One batch: when the merge and each controller's callback finished, and the
    /// statements sent.
    struct Measured {
        var merged: Int64
        var changed: [Int64]
        var statements: Int
    }

    private let lock = NSLock()
    private let controllers: Int
    private var merges = 0
    private var startStatements = 0
    private var mergedAt: Int64 = 0
    private var changedAt: [Int64?]

    init(controllers: Int) {
        self.controllers = controllers
        changedAt = Array(repeating: nil, count: controllers)
    }

    var mergeCount: Int { lock.withLock { merges } }

    func begin(statements: Int) {
        lock.withLock {
            startStatements = statements
            changedAt = Array(repeating: nil, count: controllers)
        }
    }

    func merged(at time: Int64) {
        lock.withLock {
            merges += 1
            mergedAt = time
        }
    }

    func controllerChanged(_ index: Int, at time: Int64) {
        lock.withLock { changedAt[index] = time }
    }

    func end(statements: Int) -> Measured {
        lock.withLock { Measured(merged: mergedAt, changed: changedAt.compactMap { $0 }, statements: statements - startStatements) }
    }
}
