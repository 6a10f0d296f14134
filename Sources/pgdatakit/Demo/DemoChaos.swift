import ArgumentParser
import Foundation
import PGDataKit

/// What `demo --chaos` does to the workers and the server while they write: it kills a
/// worker with `SIGKILL` in the middle of a save (and starts a replacement), terminates
/// random backends of the workers (`pg_terminate_backend`), and — on the throwaway
/// server only — restarts PostgreSQL once (fast shutdown, then a start on the same data
/// directory and port). The parent's own sessions are left alone.
final class DemoChaos {
    /// What chaos did, for the summary.
    struct Counts: Codable, Sendable {
        var workersKilled = 0
        var workersReplaced = 0
        var backendsTerminated = 0
        var serverRestarts = 0
    }

    /// One thing to do at a fraction of the run's duration.
    private enum Event {
        case terminateBackends
        case killWorker
        case restartServer
    }

    private let processes: DemoProcesses
    private let url: String
    private let server: EmbeddedPostgres?
    private let duration: Double
    private var schedule: [(at: Double, event: Event)]
    private var generator = SystemRandomNumberGenerator()
    private(set) var counts = Counts()

    /// - Parameters:
    ///   - url: the demo's database (a connection of its own runs `pg_terminate_backend`).
    ///   - server: the throwaway server to restart once; nil on a DATABASE_URL server.
    init(processes: DemoProcesses, url: String, server: EmbeddedPostgres?, duration: Double) {
        self.processes = processes
        self.url = url
        self.server = server
        self.duration = duration
        var schedule: [(Double, Event)] = [
            (0.15, .terminateBackends), (0.25, .killWorker), (0.35, .terminateBackends),
            (0.6, .killWorker), (0.7, .terminateBackends), (0.8, .terminateBackends),
        ]
        if server != nil { schedule.append((0.45, .restartServer)) }
        self.schedule = schedule.sorted { $0.0 < $1.0 }.map { (at: $0.0 * duration, event: $0.1) }
    }

    /// Does what is due at `elapsed` seconds into the run; `note` tells the view.
    func act(elapsed: Double, note: (String) -> Void) throws {
        while let next = schedule.first, next.at <= elapsed {
            schedule.removeFirst()
            switch next.event {
            case .terminateBackends:
                let count = terminateBackends(Int.random(in: 1...3, using: &generator))
                counts.backendsTerminated += count
                note("chaos: terminated \(count) backend(s) of the workers")
            case .killWorker:
                let (index, inSave) = pickWorkerInSave()
                let last = try processes.killAndReplace(index)
                counts.workersKilled += 1
                counts.workersReplaced += 1
                note("chaos: killed worker \(index) (pid \(last?.pid ?? 0), \(inSave ? "saving an increment" : "between saves")) and started a replacement")
            case .restartServer:
                guard let server else { continue }
                try restart(server)
                counts.serverRestarts += 1
                note("chaos: restarted PostgreSQL (fast shutdown, same data directory and port)")
            }
        }
    }

    /// A worker whose last report says it is saving an increment (waiting up to 3 s for
    /// one), else a random one; and whether it was in that save.
    private func pickWorkerInSave() -> (Int, Bool) {
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline {
            let saving = processes.board.withLock { board in
                board.latest.filter { $0.value.state == "saving increment" }.map(\.key)
            }
            if let index = saving.randomElement(using: &generator) { return (index, true) }
            Thread.sleep(forTimeInterval: 0.002)
        }
        return (Int.random(in: 0..<processes.count, using: &generator), false)
    }

    /// Terminates up to `count` random backends of the workers (by their application
    /// name); returns how many were terminated.
    private func terminateBackends(_ count: Int) -> Int {
        do {
            let connection = try Connection(ConnectionConfiguration(url))
            defer { connection.close() }
            return try connection.query(
                """
                SELECT count(*) FROM (
                    SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
                    WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()
                    ORDER BY random() LIMIT $2) chosen
                WHERE terminated
                """, [DemoProcesses.applicationName, count])[0].decode(Int.self, at: 0)
        } catch {
            return 0
        }
    }

    /// Stops the server with a fast shutdown (`SIGINT` to the postmaster, as
    /// `pg_ctl stop -m fast` does: every session is ended, nothing committed is lost)
    /// and starts it again on the same data directory and port.
    private func restart(_ server: EmbeddedPostgres) throws {
        let pidFile = server.directory.appendingPathComponent("data/postmaster.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8),
            let pid = text.split(separator: "\n").first.flatMap({ pid_t($0.trimmingCharacters(in: .whitespaces)) })
        else { throw ValidationError("chaos: no postmaster.pid in \(server.directory.path)") }
        kill(pid, SIGINT)
        let deadline = Date().addingTimeInterval(60)
        while server.liveness() != .dead {
            guard Date() < deadline else { throw ValidationError("chaos: the server did not shut down in a minute") }
            Thread.sleep(forTimeInterval: 0.05)
        }
        try server.restart(port: server.port)
    }
}
