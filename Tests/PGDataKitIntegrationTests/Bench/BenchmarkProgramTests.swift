import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The benchmark program runs and ends with its RESULT line (small sizes: figures come
/// from release builds, not from tests).
@Suite("pgdatakit-bench (the built binary)", .heavy)
struct BenchmarkProgramTests {
    func run(_ arguments: [String]) throws -> ChildProcess.Outcome {
        let server = try #require(try TestDatabase.serverConfiguration().renderedConnectionString())
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = server
        return try ChildProcess.run(
            try CLI.builtProduct("pgdatakit-bench").path, arguments, in: TestDatabase.repositoryRoot,
            environment: environment)
    }

    /// The `key=value` fields of the last line, which must be `RESULT <scenario> …`.
    func result(_ outcome: ChildProcess.Outcome, _ scenario: String) throws -> [String: Double] {
        #expect(outcome.status == 0, "\(outcome.output)")
        let last = try #require(outcome.output.split(separator: "\n").last)
        let parts = last.split(separator: " ")
        try #require(parts.prefix(2) == ["RESULT", Substring(scenario)])
        var fields: [String: Double] = [:]
        for part in parts.dropFirst(2) {
            let pair = part.split(separator: "=", maxSplits: 1)
            try #require(pair.count == 2, "not key=value: \(part)")
            fields[String(pair[0])] = Double(pair[1])
        }
        return fields
    }

    @Test func latencyScenarioMeasuresTwoProcesses() throws {
        let fields = try result(try run(["latency", "--saves", "30", "--warmup", "2"]), "latency")
        #expect(
            Set(fields.keys) == [
                "p50_ms", "p99_ms", "max_ms", "notify_p50_ms", "notify_p99_ms", "raw_commit_p50_ms",
                "raw_commit_p99_ms", "commit_ratio",
            ])
        // Every time runs from a stamp taken before the send, so none can be 0 or less,
        // however loaded the machine.
        #expect(fields.values.allSatisfy { $0 > 0 })
        #expect((fields["p50_ms"] ?? 0) <= (fields["max_ms"] ?? 0))
    }

    /// Hundreds of tasks on a small pool hold threads in proportion to the pool, not to
    /// the tasks (before the pool's async waiters, 1,000 tasks on a pool of 10 took the
    /// process to 264 threads), and every request succeeds: the leased blocks run on at
    /// most one thread per connection, beside the process's own (listener, cooperative
    /// pool, sampler, the main context's merges).
    @Test func requestsScenarioKeepsThreadsToThePoolSize() throws {
        let fields = try result(try run(["requests", "--tasks", "300", "--per-task", "2", "--pool", "4"]), "requests")
        #expect(
            Set(fields.keys) == [
                "tasks", "pool", "requests_per_s", "sync_requests_per_s", "ratio", "peak_threads", "p50_ms", "p99_ms",
                "errors",
            ])
        #expect(fields["errors"] == 0)
        #expect(fields["tasks"] == 300)
        #expect((fields["peak_threads"] ?? .infinity) <= 4 + 16)
        #expect((fields["requests_per_s"] ?? 0) > 0)
        #expect((fields["p50_ms"] ?? .infinity) <= (fields["p99_ms"] ?? 0))
    }

    @Test func cancelScenarioEndsEachKindOfWaitingRequest() throws {
        let fields = try result(try run(["cancel", "--rounds", "1", "--after", "100"]), "cancel")
        #expect(
            Set(fields.keys) == [
                "rounds", "after_ms", "raw_ms", "fetch_ms", "fetch_ms_max", "save_ms", "save_ms_max", "import_ms",
                "import_ms_max", "waiting_after", "failures",
            ])
        // Every request threw CancellationError, left no session waiting on the server,
        // and the next request succeeded; each ended well before a 10 s bound.
        #expect(fields["failures"] == 0 && fields["waiting_after"] == 0, "\(fields)")
        for kind in ["fetch", "save", "import"] { #expect((fields[kind + "_ms_max"] ?? 1e9) < 10_000) }
    }

    @Test func updateAllScenarioCountsOneStatementAndNoLostEdit() throws {
        let fields = try result(try run(["update-all", "--rows", "3000", "--editors", "2", "--seconds", "0.3"]), "update-all")
        #expect(
            Set(fields.keys) == [
                "rows", "updated", "held", "statements", "update_statements", "record_statements", "batch_ms", "raw_ms",
                "ratio", "merge_ms", "stale", "batchless", "commits", "conflicts", "failures", "lost",
            ])
        #expect(fields["updated"] == 3000 && fields["held"] == 3000, "\(fields)")
        // The server counts one UPDATE and one change record when pg_stat_statements is
        // loaded (a throwaway server preloads it where installed); 0 where it is not.
        #expect([0, 1].contains(fields["update_statements"]) && fields["update_statements"] == fields["record_statements"])
        #expect(fields["stale"] == 0 && fields["batchless"] == 0 && fields["lost"] == 0 && fields["failures"] == 0, "\(fields)")
        #expect((fields["commits"] ?? 0) > 0)
    }

    @Test func upsertScenarioComparesWithTheFloorAndTheNaiveLoop() throws {
        let fields = try result(try run(["upsert", "--records", "2000", "--batch", "200", "--naive", "100", "--runs", "1"]), "upsert")
        #expect(Set(fields.keys) == ["insert_ratio", "update_ratio", "naive_speedup", "statements_per_batch", "edit_ratio"])
        #expect(fields.values.allSatisfy { $0 > 0 })
        // begin, fetch; the claim of the batch's 200 new keys: savepoint, plain INSERT,
        // release (`PlainClaimTests`); change record, commit
        #expect(fields["statements_per_batch"] == 7)
    }

    @Test func importMemoryScenarioReportsPeakMemory() throws {
        let fields = try result(try run(["import-memory", "--records", "20000", "--batch", "5000"]), "import-memory")
        #expect(Set(fields.keys) == ["peak_mb_early", "peak_mb_end", "growth", "rows_per_s"])
        #expect(fields.values.allSatisfy { $0 > 0 })
        #expect((fields["peak_mb_end"] ?? .infinity) < 300)
    }

    @Test func historyScenarioReplaysAfterAToken() throws {
        let fields = try result(try run(["history", "--records", "3000", "--page", "250", "--runs", "1"]), "history")
        #expect(Set(fields.keys) == ["records_per_s", "paged_records_per_s", "sequence_records_per_s", "raw_rows_per_s"])
        #expect(fields.values.allSatisfy { $0 > 0 })
        #expect(fields["records_per_s"] == min(fields["paged_records_per_s"] ?? 0, fields["sequence_records_per_s"] ?? 0))
    }

    @Test func savesScenarioSavesOneObjectAtATime() throws {
        let fields = try result(try run(["saves", "--saves", "20"]), "saves")
        #expect(Set(fields.keys) == ["saves", "saves_per_s", "inserts_per_s", "updates_per_s"])
        #expect(fields["saves"] == 40)  // 20 inserts, then 20 updates
        #expect(fields.values.allSatisfy { $0 > 0 })
        let floors = try result(try run(["saves", "--saves", "20", "--floors"]), "saves")
        #expect(
            Set(floors.keys) == [
                "saves", "saves_per_s", "inserts_per_s", "updates_per_s", "raw_inserts_per_s", "raw_updates_per_s",
                "insert_ratio", "update_ratio",
            ])
        #expect(floors.values.allSatisfy { $0 > 0 })
        let deletes = try result(try run(["saves", "--saves", "20", "--floors", "--deletes"]), "saves")
        #expect(Set(deletes.keys) == Set(floors.keys).union(["deletes_per_s", "raw_deletes_per_s", "delete_ratio"]))
        #expect(deletes.values.allSatisfy { $0 > 0 })
    }

    @Test func fetchScenarioComparesWithRawRows() throws {
        let fields = try result(try run(["fetch", "--rows", "2000", "--runs", "1"]), "fetch")
        #expect(Set(fields.keys) == ["object_rows_per_s", "raw_rows_per_s", "ratio", "c_rows_per_s", "c_ratio"])
        #expect(fields.values.allSatisfy { $0 > 0 })
    }

    @Test func throughputScenarioRunsWriterProcessesBesideTheRawFloor() throws {
        let outcome = try run(["throughput", "--writers", "1,2", "--seconds", "0.5", "--repeats", "2"])
        let fields = try result(outcome, "throughput")
        #expect(Set(fields.keys) == [
            "writers", "saves_per_s", "raw_tx_per_s", "ratio", "merge_p50_ms", "merge_p99_ms", "peak_saves_per_s",
            "raw_listening_tx_per_s", "listening_ratio", "plain_tx_per_s", "plain_ratio",
        ])
        #expect(fields["writers"] == 2)
        #expect((fields["saves_per_s"] ?? 0) > 0 && (fields["raw_tx_per_s"] ?? 0) > 0)
        #expect((fields["raw_listening_tx_per_s"] ?? 0) > 0)
        // The plain floor (UPDATE + COMMIT, no NOTIFY) ran in the same run.
        #expect((fields["plain_tx_per_s"] ?? 0) > 0 && (fields["plain_ratio"] ?? 0) > 0)
        #expect((fields["merge_p50_ms"] ?? 0) > 0, "this process merged the writers' saves")
        #expect(outcome.output.split(separator: "\n").contains { $0.hasPrefix("      2  ") })
    }

    @Test func contentionScenarioRunsTheDemoAndReadsTheServersDeadlocks() throws {
        let outcome = try run(["contention", "--workers", "2", "--seconds", "3"])
        let fields = try result(outcome, "contention")
        // A value that is not a number is left out of `fields`, so this checks them too.
        #expect(Set(["workers", "saves_per_s", "deadlocks", "lock_timeouts", "merge_p50_ms", "merge_p99_ms"])
            .isSubset(of: fields.keys), "\(outcome.output)")
        #expect(fields["workers"] == 2)
        #expect((fields["saves_per_s"] ?? 0) > 0)
        #expect((fields["merge_p50_ms"] ?? 0) > 0, "the demo's parent merged the workers' saves")
        #expect((fields["merge_p99_ms"] ?? -1) >= (fields["merge_p50_ms"] ?? 0))
        #expect((fields["deadlocks"] ?? -1) >= 0 && (fields["lock_timeouts"] ?? -1) >= 0)
        #expect(fields["demo_exit"] == 0, "the demo's proofs hold")
        // Of the retries, the saves the library redid itself (the demo's `libraryRetries`).
        #expect((fields["library_retries"] ?? -1) >= 0 && (fields["library_retries"] ?? 0) <= (fields["retries"] ?? 0))
        #expect(outcome.output.split(separator: "\n").contains { $0.hasPrefix("      2  ") })
        #expect(outcome.output.contains("[demo 2] Demo database: pgdatakit_demo_"), "the demo's messages are passed on")
    }

    @Test func fanoutScenarioCountsTheObserversStatementsOnTheServer() throws {
        let outcome = try run(["fanout", "--processes", "4", "--writers", "1", "--seconds", "3", "--rows", "2000"])
        let fields = try result(outcome, "fanout")
        // A value that is not a number is left out of `fields`; `nan` reads as a number.
        #expect(Set(fields.keys) == [
            "processes", "writers", "saves_per_s", "merge_p50_ms", "merge_p99_ms", "idle_observer_queries_per_save",
            "holder_queries_per_save", "idle_observer_statements",
        ], "\(outcome.output)")
        #expect(fields["processes"] == 4 && fields["writers"] == 1)
        #expect((fields["saves_per_s"] ?? 0) > 0)
        #expect((fields["merge_p50_ms"] ?? 0) > 0, "the holder merged the writer's saves")
        #expect((fields["merge_p99_ms"] ?? -1) >= (fields["merge_p50_ms"] ?? 0))
        // The server counts the observers' statements when it loads pg_stat_statements
        // (the bench server does; the throwaway test server does not, and says so).
        let counted = !outcome.output.contains("statements per remote save: not counted")
        for key in ["idle_observer_queries_per_save", "holder_queries_per_save", "idle_observer_statements"] {
            let value = try #require(fields[key])
            #expect(counted ? value.isFinite && value >= 0 : value.isNaN, "\(key) = \(value)")
        }
        if counted {
            // Today an idle observer reads the change log once per notification or burst.
            #expect((fields["idle_observer_queries_per_save"] ?? .infinity) <= 2)
        }
        #expect(outcome.output.contains("connections to the database at the peak: "))
    }
}
