import Dispatch
import Foundation
import Synchronization

/// Set by Ctrl-C, SIGTERM or the end of the work; waited on by a command's main loop
/// (`import` here, `watch` and `demo` in `pgdatakit`).
package final class StopSignal: Sendable {
    private let fired = Mutex(false)
    private let semaphore = DispatchSemaphore(value: 0)

    /// A signal not fired yet.
    package init() {}

    /// Whether it fired.
    package var isFired: Bool { fired.withLock { $0 } }

    /// Fires it (once; later calls do nothing).
    package func fire() {
        let first = fired.withLock { fired in
            defer { fired = true }
            return !fired
        }
        if first { semaphore.signal() }
    }

    /// Waits until fired or `seconds` passed.
    package func wait(upTo seconds: Double) {
        _ = semaphore.wait(timeout: .now() + seconds)
        if isFired { semaphore.signal() }  // later waits return at once
    }

    /// Fires on SIGINT and SIGTERM instead of ending the process (so servers and
    /// connections are closed by the command's `defer`s), until the returned source is
    /// cancelled: then both signals end the process again (a program embedding the
    /// command gets its default handling back).
    package func onInterrupt() -> DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT)
        source.setEventHandler { [self] in fire() }
        source.resume()
        let terminate = DispatchSource.makeSignalSource(signal: SIGTERM)
        terminate.setEventHandler { [self] in fire() }
        terminate.resume()
        source.setCancelHandler {
            terminate.cancel()
            signal(SIGINT, SIG_DFL)
            signal(SIGTERM, SIG_DFL)
        }
        return source
    }
}
