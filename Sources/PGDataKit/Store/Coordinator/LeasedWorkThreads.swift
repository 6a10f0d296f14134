import Foundation

/// The threads that run async `perform` blocks holding a leased connection: at most one
/// per pooled connection, started on demand and ended after 2 s without work.
///
/// A block that leased a connection used to be queued on its context's queue, on
/// Dispatch's pool: when it ended, the next lease holder's block was queued while the
/// ending block's thread was still returning, so Dispatch started another thread, and a
/// pool of 10 took about 30 threads. Here each job runs its block with
/// `queue.sync` on one of these threads (the context's queue stays the one place its
/// blocks run, one at a time; `sync` runs the block on the calling thread). Since every
/// job holds a lease and there are never more leases than connections, a job never
/// waits for a thread once `maximum` are running: one of them is between two jobs.
final class LeasedWorkThreads: @unchecked Sendable {
    // Safe to share: `jobs`, `head`, `threads` and `idle` are read and written only while
    // holding `condition`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var head = 0
    private var threads = 0
    private var idle = 0
    /// The most threads at once (the pool's size).
    let maximum: Int
    /// How long an idle thread waits for work before it ends.
    static let idleTimeout: TimeInterval = 2

    /// Threads for a pool of `maximum` connections (at least 1).
    init(maximum: Int) {
        self.maximum = Swift.max(1, maximum)
    }

    /// Runs `job` on one of the threads: an idle one, a new one while fewer than
    /// `maximum` run, or the first to finish its job.
    func run(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        var start = false
        if idle > 0 {
            condition.signal()
        } else if threads < maximum {
            threads += 1
            start = true
        }
        condition.unlock()
        if start {
            let thread = Thread { [self] in work() }
            thread.name = "pgdatakit.leased-work"
            thread.start()
        }
    }

    /// How many threads run now (for tests).
    var threadCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return threads
    }

    /// A thread's loop: the jobs in order, then a wait for more, then the end.
    private func work() {
        condition.lock()
        while true {
            if head < jobs.count {
                let job = jobs[head]
                head += 1
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                }
                condition.unlock()
                job()
                condition.lock()
                continue
            }
            idle += 1
            let signalled = condition.wait(until: Date().addingTimeInterval(Self.idleTimeout))
            idle -= 1
            if !signalled, head >= jobs.count {
                threads -= 1
                condition.unlock()
                return
            }
        }
    }
}
