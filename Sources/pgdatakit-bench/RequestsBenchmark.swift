import ArgumentParser
import Foundation
import PGDataKit
import Synchronization

/// What a request handler does in a server: many tasks at once, each with a private
/// context, against a small pool.
struct RequestsBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "requests",
        abstract: "Concurrent tasks, each a private-context fetch-by-key + update + save, on a small pool.",
        discussion: """
            `tasks` tasks run at once, each doing `per-task` requests one after another: \
            a new private context, `try await context.perform { fetch one user by key, \
            change it, save }`. Each task has users of its own (no conflicts). The floor, \
            in the same run on the same manager: the same requests done by `pool` \
            threads, each calling `performAndWait` for users of its own. Prints requests per second of \
            both and their ratio, the peak number of OS threads of this process during the \
            async run (/proc/self/status, sampled every 2 ms), the latency of a request \
            (from its task's call to perform returning) at the median and the 99th \
            percentile, and the errors of both runs.
            """)

    @Option(help: "Tasks at once.")
    var tasks = 1000

    @Option(help: "Requests per task, one after another.")
    var perTask = 5

    @Option(help: "The pool's size (and the floor's threads).")
    var pool = 10

    func run() throws {
        let (tasks, perTask, pool) = (self.tasks, self.perTask, self.pool)
        let database = try BenchDatabase()
        defer { database.drop() }
        let manager = try ContextManager(
            configuration: database.configuration, entities: [BenchUser.self], maximumConnections: pool)
        defer { manager.close() }
        let seed = manager.newPrivateContext()
        try seed.performAndWait {
            for index in 0..<tasks {
                let user = BenchUser(context: seed)
                user.userID = "r\(index)"
                user.age = 0
            }
            try seed.save()
        }
        let total = tasks * perTask
        let errors = Atomic<Int>(0)

        // Floor: `pool` threads calling performAndWait, the same requests. Each thread has
        // users of its own, as each task does (taken from a shared counter, one user's
        // requests could meet in two threads when one stalled, and conflict).
        let syncSeconds = measure {
            let done = DispatchGroup()
            for thread in 0..<pool {
                done.enter()
                Thread.detachNewThread {
                    for _ in 0..<perTask {
                        for user in stride(from: thread, to: tasks, by: pool) {
                            do {
                                try Self.request(user: user, manager: manager)
                            } catch {
                                errors.add(1, ordering: .relaxed)
                                RequestTally.report(error, in: "floor")
                            }
                        }
                    }
                    done.leave()
                }
            }
            done.wait()
        }

        // Async: `tasks` tasks at once, each with its own users.
        let peak = ThreadSampler()
        let (asyncSeconds, latencies, asyncErrors) = runTasks(manager: manager)
        let peakThreads = peak.stop()
        let sorted = latencies.sorted()
        let requestsPerSecond = Double(total) / asyncSeconds
        let syncPerSecond = Double(total) / syncSeconds
        print(String(format: "async: %d requests by %d tasks in %.2f s (%.0f/s), peak %d threads", total, tasks, asyncSeconds, requestsPerSecond, peakThreads))
        print(String(format: "floor: %d requests by %d threads calling performAndWait in %.2f s (%.0f/s)", total, pool, syncSeconds, syncPerSecond))
        print(
            "RESULT requests tasks=\(tasks) pool=\(pool) "
                + String(format: "requests_per_s=%.1f sync_requests_per_s=%.1f ratio=%.3f ", requestsPerSecond, syncPerSecond, requestsPerSecond / syncPerSecond)
                + "peak_threads=\(peakThreads) "
                + String(format: "p50_ms=%.2f p99_ms=%.2f ", Self.percentile(sorted, 0.5), Self.percentile(sorted, 0.99))
                + "errors=\(errors.load(ordering: .relaxed) + asyncErrors)")
    }

    /// `tasks` tasks at once, each doing `perTask` requests through `perform` async.
    ///
    /// - Returns: the seconds it took, each request's milliseconds, the failed requests.
    func runTasks(manager: ContextManager) -> (Double, [Double], Int) {
        let tally = RequestTally()
        let (tasks, perTask) = (self.tasks, self.perTask)
        let seconds = measure {
            let finished = DispatchSemaphore(value: 0)
            Task {
                await withTaskGroup(of: Void.self) { group in
                    for task in 0..<tasks {
                        group.addTask {
                            for _ in 0..<perTask {
                                let started = ContinuousClock.now
                                do {
                                    let context = manager.newPrivateContext()
                                    try await context.perform { try Self.update(user: task, in: context) }
                                    let elapsed = (ContinuousClock.now - started).components
                                    let milliseconds = Double(elapsed.seconds) * 1e3 + Double(elapsed.attoseconds) / 1e15
                                    tally.latencies.withLock { $0.append(milliseconds) }
                                } catch {
                                    tally.errors.add(1, ordering: .relaxed)
                                    RequestTally.report(error, in: "async")
                                }
                            }
                        }
                    }
                }
                finished.signal()
            }
            finished.wait()
        }
        return (seconds, tally.latencies.withLock { $0 }, tally.errors.load(ordering: .relaxed))
    }

    /// One request from a thread: a private context, fetch, change, save.
    static func request(user: Int, manager: ContextManager) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait { try update(user: user, in: context) }
    }

    /// Fetches user `r<user>` by key, changes it, saves.
    static func update(user: Int, in context: ManagedObjectContext) throws {
        guard let found = try BenchUser.first(in: context, where: "userID == %@", "r\(user)") else {
            throw ValidationError("user r\(user) is missing")
        }
        found.age = (found.age ?? 0) + 1
        try context.save()
    }

    /// The value below which `fraction` of the sorted values lie.
    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction))]
    }
}

/// What the async requests recorded, from many tasks.
final class RequestTally: Sendable {
    /// Each successful request's milliseconds.
    let latencies = Mutex<[Double]>([])
    /// Requests that threw.
    let errors = Atomic<Int>(0)

    /// Prints a failed request's error (the first ten of the process), so that an
    /// `errors=` figure above 0 comes with its cause.
    static func report(_ error: any Error, in run: String) {
        guard reported.add(1, ordering: .relaxed).oldValue < 10 else { return }
        print("\(run) request failed: \(error)")
    }

    private static let reported = Atomic<Int>(0)
}

/// Samples this process's OS thread count every 2 ms on a thread of its own, keeping the
/// peak.
final class ThreadSampler: Sendable {
    private let peak = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    private let stopped = DispatchSemaphore(value: 0)

    init() {
        Thread.detachNewThread { [self] in
            while running.load(ordering: .relaxed) {
                let count = Self.threads()
                if count > peak.load(ordering: .relaxed) { peak.store(count, ordering: .relaxed) }
                usleep(2_000)
            }
            stopped.signal()
        }
    }

    /// Stops sampling; the peak seen.
    func stop() -> Int {
        running.store(false, ordering: .relaxed)
        stopped.wait()
        return peak.load(ordering: .relaxed)
    }

    /// The `Threads:` line of /proc/self/status (0 where there is none).
    static func threads() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("Threads:") {
            return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return 0
    }
}
