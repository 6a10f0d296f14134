import Foundation
import Synchronization
import Testing

/// A test that needs a lot of the machine — several processes, a server of its own, a
/// standby, a PgBouncer, a million records, minutes of killed backends — or that waits a
/// long while on something outside the test process.
///
/// Such a test runs on a thread of its own and after the heavy test before it ended:
/// - One at a time: two of them at once on CI's two cores starved each other (and the
///   rest) until their deadlines passed; one beside the light tests does not.
/// - On a thread of its own: a synchronous test blocks the thread it runs on. On the
///   cooperative pool (two threads on two cores) a process wait of minutes halved what
///   every other test had, and async tests waited behind it until their own deadlines
///   passed; on a thread of its own it takes nothing from them.
/// - Waiting for its turn holds no thread: it suspends.
///
/// `PGDATAKIT_SKIP_HEAVY=1 swift test` leaves them out (reported as cancelled), for a quick
/// local run; CI runs them all.
struct Heavy: TestTrait, SuiteTrait, TestScoping {
    /// Applies to each test (and each case of a parameterised test) of a suite, not to
    /// the suite as a whole: a suite holding the gate would keep its own tests out.
    var isRecursive: Bool { true }

    /// The one turn heavy tests take one after another.
    static let turn = AsyncGate(slots: 1)

    /// Whether heavy tests are left out of this run (`PGDATAKIT_SKIP_HEAVY=1`).
    static var isSkipped: Bool { ProcessInfo.processInfo.environment["PGDATAKIT_SKIP_HEAVY"] == "1" }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if Self.isSkipped { try Test.cancel("a heavy test, left out by PGDATAKIT_SKIP_HEAVY=1") }
        // The turn is taken and given back on the test's own thread: a step on the
        // cooperative pool waits behind every test queued before it, and a turn given back
        // from there once stayed taken for four minutes after its test had ended.
        let limit = test.traits.lazy.compactMap { ($0 as? TimeLimitOnceRunning)?.limit }.first
        let name = test.name + (test.isParameterized ? " (one case)" : "")
        try await OwnThreadExecutor.run(named: "test \(test.name)") {
            try await Self.takeTurn(on: Self.turn, limit: limit, name: name, function)
        }
    }

    /// Runs `function` once this caller holds `gate`'s turn, and gives the turn back when
    /// it returns or throws. With a `limit`, records Swift Testing's "Time limit was
    /// exceeded" issue if `function` runs longer than that from the moment it holds the
    /// turn (the wait is not the test's time; the test still runs to its end, as under
    /// `.timeLimit`).
    static func takeTurn(
        on gate: AsyncGate, limit: Duration?, name: String, _ function: () async throws -> Void
    ) async throws {
        let asked = ContinuousClock.now
        await gate.enter()
        defer { gate.leave() }
        let started = ContinuousClock.now
        defer {
            // What the suite's wall time is made of: the Testing article's figures for
            // the heavy tests come from these lines.
            let ran = String(format: "%.1f", started.duration(to: .now).seconds)
            let waited = String(format: "%.1f", asked.duration(to: started).seconds)
            print("heavy test \(name): ran \(ran) s, waited \(waited) s for its turn")
        }
        if let limit {
            try await TimeLimitOnceRunning.run(within: limit, function)
        } else {
            try await function()
        }
    }
}

/// A time limit counted from the moment a heavy test holds its turn (`.heavy`), in place
/// of Swift Testing's `.timeLimit`, which counts from the test's start: a heavy test late
/// in the queue waits minutes for its turn (126 s in one CI run), and that wait failed a
/// test that then ran for 0.0 s. On a test that is not heavy it counts from the start.
struct TimeLimitOnceRunning: TestTrait, TestScoping {
    /// How long the test may run.
    let limit: Duration

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // A heavy test's limit is applied by `Heavy` once it holds the turn.
        if test.traits.contains(where: { $0 is Heavy }) {
            try await function()
        } else {
            try await Self.run(within: limit, function)
        }
    }

    /// Runs `function`; if it is still running after `limit`, records the issue Swift
    /// Testing's `.timeLimit` records. A synchronous test cannot be stopped: it runs on.
    static func run(within limit: Duration, _ function: () async throws -> Void) async throws {
        // The watchdog has a thread of its own: the test's own thread is blocked by a
        // synchronous test, and the cooperative pool's by other tests.
        let watchdog = OwnThreadExecutor(name: "time limit")
        defer { watchdog.stop() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask(executorPreference: watchdog) {
                try await Task.sleep(for: limit)  // cancelled when the test ends first
                Issue.record("Time limit was exceeded: \(limit) since the test began running")
            }
            defer { group.cancelAll() }
            try await function()
        }
    }
}

extension Trait where Self == TimeLimitOnceRunning {
    /// Fails the test if it runs longer than `limit`, counted from the moment a heavy
    /// test holds its turn; see `TimeLimitOnceRunning`.
    static func timeLimitOnceRunning(_ limit: Duration) -> Self { Self(limit: limit) }
}

extension Trait where Self == Heavy {
    /// Runs the test (each test of a suite) on a thread of its own, one heavy test at a
    /// time; see `Heavy`.
    static var heavy: Self { Self() }
}

/// At most `slots` holders at a time; the others suspend (holding no thread) and enter in
/// the order they came.
final class AsyncGate: Sendable {
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(slots: Int) {
        state = Mutex(State(free: slots))
    }

    /// Returns once this caller holds a slot.
    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Gives the slot to the first waiting caller, or back to the gate.
    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
