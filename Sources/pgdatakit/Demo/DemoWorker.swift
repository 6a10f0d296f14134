import ArgumentParser
import CoreMetrics
import Foundation
import PGDataKit
import Synchronization

/// One worker process of `pgdatakit demo` (started by it; not run by hand). Imports
/// generated users and posts with overlapping keys, renames users under its merge policy,
/// increments ages under `.error` with retries, deletes posts — until the parent says
/// `stop` on standard input. Then it proves that its main context, kept current only by
/// merges, equals a fresh fetch.
struct DemoWorker: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-worker", abstract: "A worker process of `demo` (not run by hand).",
        shouldDisplay: false)

    @Option(help: "This worker's number.") var index: Int
    @Option(help: "Seed of the generated data.") var seed: UInt64
    @Option(help: "Users in the shared key space.") var users: Int
    @Option(help: "Posts in the shared key space.") var posts: Int
    /// Under `demo --chaos`: a step that fails for any reason but an unknown save outcome
    /// (a terminated backend, a server that restarts and refuses connections meanwhile)
    /// is done again after a short pause instead of failing the worker.
    @Flag(help: "Survive terminated backends and server restarts.") var chaos = false

    /// The merge policies the workers take in turn, with the name the view shows.
    static let policies: [(MergePolicy, String)] = [
        (.mergeByPropertyObjectTrump, "object trump"),
        (.mergeByPropertyStoreTrump, "store trump"),
        (.error, "error + retry"),
    ]

    func run() throws {
        // Ctrl-C reaches the whole process group: the parent decides when workers stop.
        signal(SIGINT, SIG_IGN)
        let report = Reporter(worker: index)
        do {
            try work(report)
        } catch {
            report.send(WorkerReport(kind: .failed, worker: index, message: "\(error)"))
            throw ExitCode(1)
        }
    }

    private func work(_ report: Reporter) throws {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw ValidationError("demo-worker reads DATABASE_URL")
        }
        // The library's counters (retries, lock timeouts, deadlocks) through swift-metrics.
        let metrics = DemoMetrics.bootstrap()
        let manager = try patiently {
            try ContextManager(
                configuration: ConnectionConfiguration(url), entities: ExampleSchema.entities, maximumConnections: 3)
        }
        defer { manager.close() }
        let counters = Mutex(WorkerCounters())
        let remote = manager.coordinator.observeRemoteChanges { record in
            counters.withLock {
                $0.merged += 1
                $0.mergedFrom.insert(record.originProcessID)
            }
        }
        defer { remote.cancel() }
        // The main context follows every process's saves through these controllers.
        let dataset = try patiently { try DatasetControllers(context: manager.mainContext) }
        defer { dataset.stop() }

        let commands = CommandReader()
        var generator = SeededGenerator(seed: seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
        let (policy, _) = Self.policies[index % Self.policies.count]
        var state = "starting"
        /// The worker's counters with the library's.
        func current() -> WorkerCounters {
            var current = counters.withLock { $0 }
            current.lockTimeouts = metrics.total(PGDataKitMetrics.transientFailures, matching: [("cause", "lock_timeout")])
            current.deadlocks = metrics.total(PGDataKitMetrics.transientFailures, matching: [("cause", "deadlock")])
            current.libraryRetries = metrics.total(PGDataKitMetrics.retries)
            current.libraryRetriesByCause = metrics.totals(PGDataKitMetrics.retries, by: "cause")
            return current
        }
        func status() -> WorkerReport {
            WorkerReport(kind: .status, worker: index, pid: getpid(), state: state, counters: current())
        }
        /// Tells the parent the state at once (with the counters): "saving increment"
        /// just before an increment's save, and the new count just after it, so that a
        /// worker killed in between leaves that increment "unknown" in its last report.
        func setState(_ now: String, tell: Bool) {
            state = now
            if tell { report.send(status()) }
        }
        report.send(WorkerReport(kind: .ready, worker: index, pid: getpid(), state: "ready"))
        var lastStatus = ContinuousClock.now
        while !commands.has(WorkerCommand.stop) {
            let step = Int.random(in: 0..<10, using: &generator)
            let context = manager.newPrivateContext(name: "worker \(index)")
            try attempt(
                step: step, in: context, policy: policy, counters: counters, state: setState, using: &generator)
            if lastStatus.duration(to: .now) > .milliseconds(200) {
                report.send(status())
                lastStatus = .now
            }
        }
        state = "stopped"
        report.send(WorkerReport(kind: .stopped, worker: index, pid: getpid(), state: state, counters: current()))
        try verify(manager: manager, dataset: dataset, commands: commands, counters: current, report: report)
    }

    /// Does one step; one that failed the way overlapping writers (or, under `--chaos`, a
    /// restarting server) make steps fail is counted and left, to be done again later.
    private func attempt(
        step: Int, in context: ManagedObjectContext, policy: MergePolicy, counters: borrowing Mutex<WorkerCounters>,
        state: (_ now: String, _ tell: Bool) -> Void, using generator: inout SeededGenerator
    ) throws {
        do {
            try perform(
                step: step, in: context, policy: policy, counters: counters, state: state,
                using: &generator)
        } catch let error as PostgresError where error.isTransient {
            // Overlapping keys written in different orders can deadlock: PostgreSQL
            // cancels one transaction, and the step is simply done again later (as
            // after a lost connection that did not commit; an unknown outcome,
            // SaveOutcomeUnknownError, is not transient and stops the worker).
            context.performAndWait { context.reset() }
            counters.withLock { $0.conflictsRetried += 1 }
        } catch is SaveOutcomeUnknownError where chaos {
            // An import, rename or delete that may or may not have committed: the
            // checksums cover whatever the database holds, so it is counted and
            // left (an increment's is counted as unknown by `increment`).
            context.performAndWait { context.reset() }
            counters.withLock { $0.savesUnknown += 1 }
        } catch let error where chaos && !(error is SaveOutcomeUnknownError) {
            // Chaos: the server restarts or the backend was terminated outside a
            // commit. Nothing was committed by this step; do another one shortly.
            context.performAndWait { context.reset() }
            counters.withLock { $0.chaosRetries += 1 }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    /// One step of the work: import (40%), rename (30%), increment (20%), delete (10%).
    private func perform(
        step: Int, in context: ManagedObjectContext, policy: MergePolicy, counters: borrowing Mutex<WorkerCounters>,
        state: (_ now: String, _ tell: Bool) -> Void, using generator: inout SeededGenerator
    ) throws {
        if step < 4 {
            state("importing", false)
            let count = try importBatch(in: context, using: &generator)
            counters.withLock {
                $0.imported += count
                $0.saves += 1
            }
        } else if step < 7 {
            state("renaming", false)
            let (renamed, settled, retried) = try rename(in: context, policy: policy, using: &generator)
            counters.withLock {
                $0.edits += renamed
                $0.conflictsSettled += settled
                $0.conflictsRetried += retried
                $0.saves += renamed > 0 ? 1 : 0
            }
        } else if step < 9 {
            state("incrementing", false)
            let (done, retried, unknown) = try increment(in: context, announce: { state($0, true) }, using: &generator)
            counters.withLock {
                $0.increments += done
                $0.incrementsUnknown += unknown
                $0.conflictsRetried += retried
                $0.saves += done
            }
            state("incremented", true)
        } else {
            state("deleting", false)
            let deleted = try deletePosts(in: context, using: &generator)
            counters.withLock {
                $0.deletes += deleted
                $0.saves += deleted > 0 ? 1 : 0
            }
        }
    }

    /// After `stop`: the parent saves a marker once everyone stopped; everyone waits for
    /// it to be merged from its listener (then every earlier save of every worker has
    /// been merged too) and reports the checksums of its main context and of a fresh
    /// fetch.
    private func verify(
        manager: ContextManager, dataset: DatasetControllers, commands: CommandReader,
        counters: () -> WorkerCounters, report: Reporter
    ) throws {
        let marker = try commands.wait(for: WorkerCommand.verify)
        guard dataset.waitForUser(marker, seconds: 60) else {
            throw ValidationError("the marker save never reached this worker's main context")
        }
        let mainListing = try dataset.listing()
        let counts = dataset.counts
        let mainCount = counts.users + counts.posts
        let freshListing = try patiently {
            let fresh = manager.newPrivateContext()
            return try fresh.performAndWait {
                try Self.listing(
                    users: fresh.fetch(FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")])),
                    posts: fresh.fetch(FetchRequest<Post>(sortDescriptors: [FetchSortDescriptor("postID")])))
            }
        }
        var final = WorkerReport(kind: .final, worker: index, pid: getpid(), state: "verified", counters: counters())
        final.mainChecksum = try patiently { try Self.checksum(mainListing, manager: manager) }
        final.freshChecksum = try patiently { try Self.checksum(freshListing, manager: manager) }
        final.mainCount = mainCount
        if mainListing != freshListing { final.listingDifferences = Self.differences(main: mainListing, fresh: freshListing) }
        report.send(final)
    }

    // MARK: - Steps

    /// Imports a batch of generated users and posts whose keys other workers use too.
    private func importBatch(in context: ManagedObjectContext, using generator: inout SeededGenerator) throws -> Int {
        let userKeys = (0..<20).map { _ in Self.userKey(Int.random(in: 0..<users, using: &generator)) }
        let postRecords = (0..<40).map { _ in
            (Self.postKey(Int.random(in: 0..<posts, using: &generator)),
             Self.userKey(Int.random(in: 0..<users, using: &generator)),
             "title \(Int.random(in: 0..<1000, using: &generator))")
        }
        return try DemoImport.importBatch(
            users: userKeys.map { ($0, "imported by worker \(index)") }, posts: postRecords, in: context)
    }

    /// Renames a few users under the worker's policy; returns renamed, settled and retried.
    private func rename(
        in context: ManagedObjectContext, policy: MergePolicy, using generator: inout SeededGenerator
    ) throws -> (Int, Int, Int) {
        let keys = (0..<3).map { _ in Self.userKey(Int.random(in: 0..<users, using: &generator)) }
        let name = "renamed by worker \(index) #\(Int.random(in: 0..<1_000_000, using: &generator))"
        var retried = 0
        for _ in 0..<5 {
            do {
                return try context.performAndWait {
                    context.mergePolicy = policy
                    let found = try User.fetch(in: context, where: "userID IN %@", keys)
                    for user in found { user.name = name }
                    try context.save()
                    return (found.count, context.resolvedConflicts.count, retried)
                }
            } catch is MergeConflictError {
                retried += 1
                context.performAndWait { context.reset() }
            }
        }
        return (0, 0, retried)
    }

    /// Adds one to a user's age under `.error`, retrying on conflicts: every increment
    /// counted here must be in the database at the end (no lost update). Returns done,
    /// retried and unknown: a save whose outcome could not be found out
    /// (`SaveOutcomeUnknownError`) is one increment that may or may not be stored, and is
    /// not done again (that could apply it twice).
    private func increment(
        in context: ManagedObjectContext, announce: (String) -> Void, using generator: inout SeededGenerator
    ) throws -> (Int, Int, Int) {
        let key = Self.userKey(Int.random(in: 0..<users, using: &generator))
        var retried = 0
        for _ in 0..<20 {
            do {
                let done = try context.performAndWait { () throws -> Int in
                    context.mergePolicy = .error
                    guard let user = try User.first(in: context, where: "userID == %@", key) else { return 0 }
                    user.age = (user.age ?? 0) + 1
                    announce("saving increment")
                    try context.save()
                    return 1
                }
                return (done, retried, 0)
            } catch is MergeConflictError {
                retried += 1
                context.performAndWait { context.reset() }
            } catch is SaveOutcomeUnknownError {
                context.performAndWait { context.reset() }
                return (0, retried, 1)
            }
        }
        return (0, retried, 0)
    }

    /// Deletes up to two posts.
    private func deletePosts(in context: ManagedObjectContext, using generator: inout SeededGenerator) throws -> Int {
        let keys = (0..<2).map { _ in Self.postKey(Int.random(in: 0..<posts, using: &generator)) }
        for _ in 0..<5 {
            do {
                return try context.performAndWait {
                    context.mergePolicy = .mergeByPropertyStoreTrump
                    let found = try Post.fetch(in: context, where: "postID IN %@", keys)
                    for post in found { context.delete(post) }
                    try context.save()
                    return found.count
                }
            } catch is MergeConflictError {
                context.performAndWait { context.reset() }
            }
        }
        return 0
    }

    /// Runs `body`; under `--chaos`, runs it again after a short pause when it fails
    /// (for up to a minute: a server restart refuses connections for a while), except on
    /// an unknown save outcome, which must not be redone blindly.
    private func patiently<T>(_ body: () throws -> T) throws -> T {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                return try body()
            } catch let error where chaos && !(error is SaveOutcomeUnknownError) && ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }

    static func userKey(_ number: Int) -> String { String(format: "u%04d", number) }
    static func postKey(_ number: Int) -> String { String(format: "p%05d", number) }

    // MARK: - Proof

    /// One line per object, in key order: what the checksum covers.
    static func listing(users: [User], posts: [Post]) throws -> String {
        var lines: [String] = []
        for user in users.sorted(by: { $0.userID < $1.userID }) {
            lines.append("user \(user.userID) \(user.name ?? "-") \(user.age.map(String.init) ?? "-")")
        }
        for post in posts.sorted(by: { $0.postID < $1.postID }) {
            lines.append("post \(post.postID) \(post.title ?? "-") \(post.user?.userID ?? "-")")
        }
        return lines.joined(separator: "\n")
    }

    /// The first lines (up to five each) that one listing has and the other lacks.
    static func differences(main: String, fresh: String) -> [String] {
        let mainLines = main.split(separator: "\n")
        let freshLines = fresh.split(separator: "\n")
        let (inMain, inFresh) = (Set(mainLines), Set(freshLines))
        return mainLines.filter { !inFresh.contains($0) }.prefix(5).map { "main: \($0)" }
            + freshLines.filter { !inMain.contains($0) }.prefix(5).map { "fresh: \($0)" }
    }

    /// SHA-256 of a listing, computed by the server (`sha256()`).
    static func checksum(_ listing: String, manager: ContextManager) throws -> String {
        try manager.coordinator.pool.withConnection { connection in
            try connection.query("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", [listing])[0]
                .decode(String.self, at: 0)
        }
    }
}

/// Sends reports to the parent, one line each.
struct Reporter: Sendable {
    let worker: Int

    func send(_ report: WorkerReport) {
        FileHandle.standardOutput.write(Data((report.line() + "\n").utf8))
    }
}

/// Reads the parent's commands from standard input on a thread of its own.
final class CommandReader: Sendable {
    private let received = Mutex<[String]>([])

    init() {
        Thread.detachNewThread { [self] in
            while let line = readLine() {
                received.withLock { $0.append(line) }
            }
            // The parent is gone: stop, and verify nothing.
            received.withLock { $0.append(contentsOf: [WorkerCommand.stop, WorkerCommand.verify + " -"]) }
        }
    }

    func has(_ command: String) -> Bool {
        received.withLock { $0.contains { $0 == command || $0.hasPrefix(command + " ") } }
    }

    /// The argument of `command argument`, if received.
    func argument(of command: String) -> String? {
        received.withLock { lines in
            lines.first { $0.hasPrefix(command + " ") }.map { String($0.dropFirst(command.count + 1)) }
        }
    }

    /// Waits (up to two minutes) for `command argument` and returns the argument.
    func wait(for command: String) throws -> String {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if let argument = argument(of: command) {
                guard argument != "-" else { throw ExitCode(1) }
                return argument
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        throw ValidationError("no `\(command)` from the parent")
    }
}

/// SplitMix64: the same numbers for the same seed, in every process.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
