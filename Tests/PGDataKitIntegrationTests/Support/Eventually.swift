import Foundation

/// How long a test waits for something that should happen at once (a notification, a
/// merge, a process or server starting, a session ending): long enough for a loaded
/// two-core machine — CI's, with the rest of the suite and CPU burners beside it — and
/// only ever spent in full when the thing never happens.
let patience: Duration = .seconds(60)

/// Polls `condition` every 10 ms until it holds, or throws a `TestFailure` naming `what`
/// after `timeout` (`patience` unless given).
func eventually(_ what: String, timeout: Duration = patience, _ condition: () throws -> Bool) throws {
    let start = ContinuousClock.now
    while try !condition() {
        if start.duration(to: .now) > timeout { throw TestFailure("timed out waiting until \(what)") }
        usleep(10_000)
    }
}
