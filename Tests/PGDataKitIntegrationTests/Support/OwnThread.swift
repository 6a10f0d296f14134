import Foundation
import Testing

/// A task executor with a thread of its own, so an async test's waits do not depend on the
/// cooperative pool. That pool has one thread per core (two on CI), and the synchronous
/// tests of a parallel run block its threads for minutes (a million-record import, the
/// COMMIT-kill batches); an async test whose task waits behind them timed out although
/// nothing was wrong. Jobs run in order on the thread until `stop()`; later ones (a task
/// cancelled at the end of a test that is still unwinding) run on a Dispatch thread.
final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        defer { condition.unlock() }
        if stopped {
            let executor = asUnownedTaskExecutor()
            DispatchQueue.global().async { job.runSynchronously(on: executor) }
        } else {
            jobs.append(job)
            condition.signal()
        }
    }

    /// Lets the thread finish the jobs it has and end.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    /// The executor of the test running now (`.onItsOwnThread`), for the unstructured
    /// tasks it starts: `Task(executorPreference: OwnThreadExecutor.current) { … }`.
    @TaskLocal static var current: OwnThreadExecutor?

    /// Runs `body`, and every job of its task and child tasks until it returns, on a new
    /// thread of its own (`current` while it runs).
    ///
    /// Everything that must happen promptly goes inside `body`: once it returns, the
    /// caller goes on on the cooperative pool, where a test's next step waits behind every
    /// test queued before it (minutes in a full run on two cores).
    static func run(named name: String, _ body: @Sendable () async throws -> Void) async throws {
        let executor = OwnThreadExecutor(name: name)
        defer { executor.stop() }
        try await $current.withValue(executor) {
            try await withTaskExecutorPreference(executor) { try await body() }
        }
    }
}

/// Runs an async test, and the child tasks it starts, on a thread of its own.
struct OnItsOwnThread: TestTrait, TestScoping {
    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await OwnThreadExecutor.run(named: "test \(test.name)", function)
    }
}

extension Trait where Self == OnItsOwnThread {
    /// Runs the async test on a thread of its own, out of reach of the cooperative pool's
    /// blocked threads; start its unstructured tasks with
    /// `Task(executorPreference: OwnThreadExecutor.current)`.
    static var onItsOwnThread: Self { Self() }
}
