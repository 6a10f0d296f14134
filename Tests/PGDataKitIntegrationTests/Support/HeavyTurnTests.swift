import Foundation
import Testing

/// The heavy tests' turn and its time limit (`Heavy`, `.timeLimitOnceRunning`). A CI run
/// failed a heavy test that ran for 0.0 s: it had waited 126 s for its turn, and Swift
/// Testing's `.timeLimit(.minutes(2))` counts from the start of the test, the wait included.
/// A heavy test's limit counts from the moment it holds the turn.
@Suite("The heavy tests' turn and time limit")
struct HeavyTurnTests {
    /// A test that waits for its turn longer than its limit and then runs briefly records
    /// no issue: the wait is not the test's time.
    @Test(.onItsOwnThread) func theWaitForTheTurnDoesNotCountAgainstTheLimit() async throws {
        let gate = AsyncGate(slots: 1)
        await gate.enter()  // another heavy test holds the turn
        let holder = Task(executorPreference: OwnThreadExecutor.current) {
            try await Task.sleep(for: .milliseconds(1_200))
            gate.leave()
        }
        let asked = ContinuousClock.now
        // Recording the limit's issue here would fail this test.
        try await Heavy.takeTurn(on: gate, limit: .milliseconds(500), name: "waits, then runs briefly") {
            try await Task.sleep(for: .milliseconds(50))
        }
        try await holder.value
        #expect(asked.duration(to: .now) >= .milliseconds(1_200), "it did not wait for the turn")
    }

    /// A test that runs longer than its limit once it holds the turn records the limit's
    /// issue (here expected, so this test passes only if the limit fired).
    @Test(.onItsOwnThread) func runningPastTheLimitRecordsAnIssue() async throws {
        let gate = AsyncGate(slots: 1)
        let body: () async throws -> Void = {
            try await Heavy.takeTurn(on: gate, limit: .milliseconds(200), name: "runs past its limit") {
                try await Task.sleep(for: .milliseconds(900))
            }
        }
        let isTheLimit: KnownIssueMatcher = { issue in
            issue.comments.contains { $0.rawValue.contains("Time limit was exceeded") }
        }
        try await withKnownIssue("the limit fires", body, matching: isTheLimit)
    }

    /// The turn is given back when the test throws, and the next one takes it.
    @Test(.onItsOwnThread) func aThrowingTestGivesTheTurnBack() async throws {
        struct Failure: Error {}
        let gate = AsyncGate(slots: 1)
        await #expect(throws: Failure.self) {
            try await Heavy.takeTurn(on: gate, limit: .seconds(5), name: "throws") { throw Failure() }
        }
        var second = false
        try await Heavy.takeTurn(on: gate, limit: .seconds(5), name: "next") { second = true }
        #expect(second)
    }

    /// No heavy test uses Swift Testing's `.timeLimit`, which would count its wait for the
    /// turn: every test file that marks tests `.heavy` uses `.timeLimitOnceRunning`.
    @Test func heavyTestsUseTheLimitThatStartsWithTheTurn() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let files = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
        var heavyFiles = 0
        // This file names both in its text.
        for case let file as URL in files where file.pathExtension == "swift" && file.path != #filePath {
            let text = try String(contentsOf: file, encoding: .utf8)
            guard text.contains(".heavy)") || text.contains(".heavy,") else { continue }
            heavyFiles += 1
            #expect(!text.contains(".timeLimit("), "\(file.lastPathComponent) has a heavy test under .timeLimit")
        }
        #expect(heavyFiles >= 10, "found \(heavyFiles) files with heavy tests")
    }
}
