import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("pgdatakit demo (the built binary)", .heavy)
struct DemoCommandTests {
    /// The demo's `--json` summary, after checking what every run must prove: all checks,
    /// equal checksums, no duplicate keys.
    func provenSummary(_ outcome: CLI.Outcome) throws -> [String: Any] {
        let json = try #require(outcome.output.firstIndex(of: "{").map { String(outcome.output[$0...]) })
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(summary["proven"] as? Bool == true)
        #expect(summary["allChecksumsEqual"] as? Bool == true)
        #expect(summary["duplicateKeys"] as? Int == 0)
        return summary
    }

    /// Four worker processes for ten seconds: the JSON summary proves every main context
    /// equals a fresh fetch, no duplicate keys, no lost increment, merges from every
    /// worker, and no deadlock — which the test also reads from the server's own count
    /// for the demo's database (kept for that, then dropped).
    @Test func fourWorkersProveTheirMainContextsEqualAFreshFetchWithoutADeadlock() throws {
        let server = try TestDatabase.serverConfiguration()
        let url = try #require(server.renderedConnectionString())
        let outcome = try CLI.run([
            "demo", "--workers", "4", "--duration", "10", "--json", "--database-url", url, "--keep-database",
        ])
        let name = try #require(outcome.error.firstMatch(of: /Demo database: (pgdatakit_demo_\w+)/).map { String($0.1) })
        let admin = try Connection(server)
        defer {
            _ = try? admin.execute("DROP DATABASE IF EXISTS \(Connection.quoteIdentifier(name)) WITH (FORCE)")
            admin.close()
        }
        #expect(outcome.status == 0, "\(outcome.output)\n\(outcome.error)")
        let summary = try provenSummary(outcome)
        #expect(summary["lostUpdates"] as? Int == 0)
        #expect(summary["incrementsReported"] as? Int == summary["incrementsStored"] as? Int)
        #expect(summary["deadlocks"] as? Int == 0)
        #expect(summary["lockTimeouts"] as? Int == 0)
        let workers = try #require(summary["workers"] as? [[String: Any]])
        #expect(workers.count == 4)
        for worker in workers {
            #expect(worker["mainEqualsFresh"] as? Bool == true)
            #expect(worker["mergedFromEveryOtherWorker"] as? Bool == true)
            let counters = try #require(worker["counters"] as? [String: Any])
            #expect((counters["saves"] as? Int ?? 0) > 0)
            #expect(counters["deadlocks"] as? Int == 0)
        }
        #expect((summary["users"] as? Int ?? 0) > 0)
        // The server's count, once every session of the demo is gone (a session reports
        // its counts when it ends).
        let deadline = ContinuousClock.now + patience
        while ContinuousClock.now < deadline,
            try admin.query("SELECT count(*) FROM pg_stat_activity WHERE datname = $1", [name])[0].decode(Int.self, at: 0) > 0
        {
            Thread.sleep(forTimeInterval: 0.05)
        }
        let deadlocks = try admin.query("SELECT deadlocks FROM pg_stat_database WHERE datname = $1", [name])[0]
            .decode(Int.self, at: 0)
        #expect(deadlocks == 0, "the server counted \(deadlocks) deadlocks")
    }

    /// `--chaos` on a throwaway server (no DATABASE_URL, so the server restart happens
    /// too): workers killed mid-save and replaced, backends terminated, PostgreSQL
    /// restarted — and the JSON summary still proves every check, with a killed worker's
    /// in-flight increment counted as unknown: reported ≤ stored ≤ reported + unknown.
    @Test func chaosStillProvesEveryCheck() throws {
        let outcome = try CLI.run(["demo", "--chaos", "--workers", "3", "--duration", "8", "--json"])
        #expect(outcome.status == 0, "\(outcome.output)\n\(outcome.error)")
        let summary = try provenSummary(outcome)
        #expect(summary["deadlocks"] as? Int == 0)
        let chaos = try #require(summary["chaos"] as? [String: Any])
        for count in ["workersKilled", "workersReplaced", "backendsTerminated", "serverRestarts"] {
            #expect((chaos[count] as? Int ?? 0) > 0, "\(count): \(chaos)")
        }
        #expect(chaos["serverRestarts"] as? Int == 1)
        let reported = try #require(summary["incrementsReported"] as? Int)
        let stored = try #require(summary["incrementsStored"] as? Int)
        let unknown = try #require(summary["incrementsUnknown"] as? Int)
        #expect(reported <= stored && stored <= reported + unknown)
        #expect(summary["incrementsCommittedUnreported"] as? Int == stored - reported)
        let killed = try #require(summary["killedWorkers"] as? [[String: Any]])
        #expect(killed.count == chaos["workersKilled"] as? Int)
        let workers = try #require(summary["workers"] as? [[String: Any]])
        #expect(workers.count == 3)
        for worker in workers {
            #expect(worker["mainEqualsFresh"] as? Bool == true)
            #expect(worker["mergedFromEveryOtherWorker"] as? Bool == true)
        }
    }

    @Test func badOptionsAreRefusedBeforeAnythingStarts() throws {
        let outcome = try CLI.run(["demo", "--workers", "0"])
        #expect(outcome.status != 0)
        #expect(outcome.error.contains("--workers"))
    }

    /// Ctrl-C (SIGINT) on a demo against a throwaway server: it stops early, still proves
    /// its point, and leaves no worker process and no server behind.
    @Test func ctrlCStopsTheWorkersAndTheServer() throws {
        let seed = String(UInt32.random(in: 1_000_000...9_999_999))
        let running = try CLI.start(["demo", "--workers", "2", "--duration", "300", "--seed", seed])
        var interrupted = false
        defer {
            // A requirement that failed before the interrupt: leave no demo running into
            // the tests after this one.
            if !interrupted {
                kill(running.pid, SIGINT)
                _ = try? running.wait()
            }
        }
        let deadline = Date().addingTimeInterval(120)
        var output = ""
        var errors = ""
        while !output.contains(" s  users "), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.1)
            output = (try? String(contentsOfFile: running.outputPath, encoding: .utf8)) ?? ""
            errors = (try? String(contentsOfFile: running.errorPath, encoding: .utf8)) ?? ""
        }
        let url = try #require(errors.firstMatch(of: /server at (\S+)/).map { String($0.1) }, "\(output)\n\(errors)")
        let port = try #require(url.firstMatch(of: /:(\d+)\//).map { String($0.1) })
        let dataDirectory = try #require(try ProcessTable.postgresDataDirectory(port: port))
        let workers = { try ProcessTable.commandLines().filter { $0.contains("demo-worker") && $0.contains("--seed \(seed)") } }
        #expect(try workers().count == 2)

        kill(running.pid, SIGINT)
        interrupted = true
        let outcome = try running.wait()
        #expect(outcome.status == 0, "\(outcome.output)\n\(outcome.error)")
        #expect(outcome.output.contains("every process's main context"))
        #expect(try workers() == [])
        #expect(throws: PostgresError.self) { try Connection(url: url).close() }
        #expect(!FileManager.default.fileExists(atPath: dataDirectory), "the server's folder is still there")
    }

    /// On a terminal (a pseudo-terminal from `script`) the live view is redrawn in place
    /// with its headings, and the summary follows.
    @Test func theLiveViewOnATerminal() throws {
        let server = try TestDatabase.serverConfiguration()
        let url = try #require(server.renderedConnectionString())
        let output = try PseudoTerminal.run(
            try CLI.executable.path, ["demo", "--workers", "2", "--duration", "4", "--database-url", url])
        #expect(output.status == 0, "\(output.text)")
        for heading in [
            "pgdatakit demo — 2 worker processes, one dataset", "rows (this process's object controllers):",
            "merge latency here (save began → merged):", "WORKER", "SAVES/S", "POLICY", "last saves merged here:",
            "MAIN = FRESH", "every process's main context, kept current only by merges, equals a fresh fetch",
        ] {
            #expect(output.text.contains(heading), "missing \(heading)")
        }
        #expect(output.text.contains("\u{1B}[H"), "the view is not redrawn in place")
        #expect(!output.text.contains("demo: "), "plain progress lines on a terminal")
    }
}
