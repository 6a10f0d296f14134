import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A running `pgdatakit-test-helper` process (another worker), whose output lines the
/// test reads while it runs.
final class HelperProcess {
    /// A change record the watcher's listener read.
    struct Record: Equatable {
        var id: Int64
        var pid: Int32
        var inserted: Int
        var updated: Int
        var deleted: Int
    }

    let running: ChildProcess.Running
    let command: String
    private var stopped = false

    private init(running: ChildProcess.Running, command: String) {
        self.running = running
        self.command = command
    }

    /// Starts the helper with a command and the database's URL.
    /// `environment` is added to this process's.
    static func start(
        _ command: String, _ configuration: ConnectionConfiguration, _ extra: [String] = [],
        environment: [String: String] = [:]
    ) throws -> HelperProcess {
        let url = try #require(configuration.renderedConnectionString())
        let running = try ChildProcess.start(
            try CLI.builtProduct("pgdatakit-test-helper").path, [command, url] + extra,
            in: TestDatabase.repositoryRoot,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
        return HelperProcess(running: running, command: command)
    }

    /// Starts a watcher and waits until its listener is ready.
    static func startWatcher(
        _ configuration: ConnectionConfiguration, environment: [String: String] = [:]
    ) throws -> HelperProcess {
        let watcher = try start("watch", configuration, environment: environment)
        try watcher.waitUntil("the watcher is ready") { lines in lines.contains { $0.hasPrefix("ready ") } }
        return watcher
    }

    deinit { _ = stop() }

    /// The lines printed so far.
    var lines: [String] {
        let text = (try? String(contentsOfFile: running.outputPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    /// The change records the watcher reported, in the order it read them.
    var records: [Record] {
        lines.compactMap { line -> Record? in
            guard line.hasPrefix("record ") else { return nil }
            var fields: [String: String] = [:]
            let parts = line.split(separator: " ")
            for part in parts.dropFirst(2) {
                let pair = part.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
            }
            guard let id = Int64(parts[1]), let pid = fields["pid"].flatMap({ Int32($0) }),
                let inserted = fields["inserted"].flatMap({ Int($0) }),
                let updated = fields["updated"].flatMap({ Int($0) }),
                let deleted = fields["deleted"].flatMap({ Int($0) })
            else { return nil }
            return Record(id: id, pid: pid, inserted: inserted, updated: updated, deleted: deleted)
        }
    }

    /// The last state the watcher printed: `count`, `reconnects`, and `users` (by user id:
    /// name and age) when there are few.
    var lastState: [String: Any]? {
        guard let line = lines.last(where: { $0.hasPrefix("state ") }),
            let object = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8))
        else { return nil }
        return object as? [String: Any]
    }

    /// A user of the last state, as `["name": …, "age": …]` (NSNull for nil), or nil when absent.
    func user(_ userID: String) -> [String: Any]? {
        (lastState?["users"] as? [String: Any])?[userID] as? [String: Any]
    }

    /// Waits until the watcher has printed `count` record lines. Its main context's
    /// merge and its record observer run on different threads, so a state line may come
    /// before the record line of the same save.
    func waitForRecords(_ count: Int, timeout: Duration = patience) throws {
        try waitUntil("\(count) record line(s)", timeout: timeout) { lines in
            lines.filter { $0.hasPrefix("record ") }.count >= count
        }
    }

    /// Waits until `condition` holds for the output lines, or fails after `timeout`.
    @discardableResult
    func waitUntil(
        _ what: String, timeout: Duration = patience, _ condition: ([String]) -> Bool
    ) throws -> Duration {
        let start = ContinuousClock.now
        while true {
            if condition(lines) { return start.duration(to: .now) }
            if start.duration(to: .now) > timeout {
                let outcome = stop()
                throw TestFailure(
                    "timed out after \(timeout) waiting until \(what); \(command) printed:\n"
                        + lines.suffix(20).joined(separator: "\n") + "\nstderr: \(outcome?.error.suffix(2000) ?? "")")
            }
            usleep(5_000)
        }
    }

    /// Waits until the watcher's last state satisfies `condition`.
    @discardableResult
    func waitForState(
        _ what: String, timeout: Duration = patience, _ condition: @escaping ([String: Any]) -> Bool
    ) throws -> Duration {
        try waitUntil(what, timeout: timeout) { _ in lastState.map(condition) ?? false }
    }

    /// Ends the process (SIGTERM unless it ended) and returns what it printed.
    @discardableResult
    func stop() -> ChildProcess.Outcome? {
        guard !stopped else { return nil }
        stopped = true
        kill(running.pid, SIGTERM)
        return try? running.wait()
    }

    /// Waits for the process to end by itself.
    func waitForExit() throws -> ChildProcess.Outcome {
        stopped = true
        return try running.wait()
    }
}

/// Starts a writer process `rounds` times that saves one user and is killed (SIGKILL)
/// after its commit and before its notification (`unannounced-save`: its notifier holds
/// the payload back), waiting each time until `records` counts the round's record; how
/// long after each kill it arrived.
func killWritersBeforeTheirNotifications(
    _ rounds: Int, _ configuration: ConnectionConfiguration, environment: [String: String] = [:],
    records: () -> Int
) throws -> [Duration] {
    var delays: [Duration] = []
    for round in 0..<rounds {
        let helper = try HelperProcess.start("unannounced-save", configuration, ["dead-\(round)"], environment: environment)
        try helper.waitUntil("the save committed") { $0.contains("committed") }
        kill(helper.running.pid, SIGKILL)
        let killed = ContinuousClock.now
        _ = try? helper.waitForExit()
        try eventually("round \(round)'s record arrived", timeout: .seconds(10)) { records() == round + 1 }
        delays.append(killed.duration(to: .now))
    }
    return delays
}
