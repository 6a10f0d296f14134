import Foundation
import Synchronization
import Testing

@testable import PGDataKit

/// The threads that run leased `perform` blocks: never more than the maximum, every job
/// run once in arrival order when one thread serves, idle threads end.
@Suite("LeasedWorkThreads without a server")
struct LeasedWorkThreadsTests {
    final class Log: Sendable {
        let entries = Mutex<[Int]>([])
        let running = Atomic<Int>(0)
        let peak = Atomic<Int>(0)
    }

    @Test func neverMoreThreadsThanTheMaximumAndEveryJobRuns() throws {
        let threads = LeasedWorkThreads(maximum: 3)
        let log = Log()
        let done = DispatchGroup()
        for index in 0..<60 {
            done.enter()
            threads.run {
                let now = log.running.add(1, ordering: .relaxed).newValue
                _ = log.peak.max(now, ordering: .relaxed)
                Thread.sleep(forTimeInterval: 0.002)
                log.entries.withLock { $0.append(index) }
                log.running.subtract(1, ordering: .relaxed)
                done.leave()
            }
            #expect(threads.threadCount <= 3)
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        let entries = log.entries.withLock { $0 }
        #expect(entries.sorted() == Array(0..<60))
        let peak = log.peak.load(ordering: .relaxed)
        #expect(peak <= 3)
    }

    @Test func oneThreadRunsJobsInArrivalOrderAndEndsWhenIdle() throws {
        let threads = LeasedWorkThreads(maximum: 1)
        let log = Log()
        let done = DispatchGroup()
        for index in 0..<20 {
            done.enter()
            threads.run {
                log.entries.withLock { $0.append(index) }
                done.leave()
            }
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        let entries = log.entries.withLock { $0 }
        #expect(entries == Array(0..<20))
        #expect(threads.threadCount == 1)
        let deadline = Date().addingTimeInterval(10)
        while threads.threadCount > 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(threads.threadCount == 0)
        // A job after the thread ended starts a new one.
        let again = DispatchSemaphore(value: 0)
        threads.run { again.signal() }
        #expect(again.wait(timeout: .now() + 10) == .success)
    }
}
