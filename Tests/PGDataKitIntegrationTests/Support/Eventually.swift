import Foundation

/// Polls `condition` every 10 ms until it holds, or throws a `TestFailure` naming `what`
/// after `timeout`.
func eventually(_ what: String, timeout: Duration = .seconds(20), _ condition: () throws -> Bool) throws {
    let start = ContinuousClock.now
    while try !condition() {
        if start.duration(to: .now) > timeout { throw TestFailure("timed out waiting until \(what)") }
        usleep(10_000)
    }
}
