import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Contract 10: failover to a promoted synchronous standby, with real worker processes.
///
/// The topology (`ReplicatedPostgres`): a primary and a streaming standby it waits for at
/// every commit (`synchronous_standby_names`), both in one multi-host URL with
/// `target_session_attrs=read-write`. Workers (`pgdatakit-test-helper failover-worker`)
/// save and merge; the primary is stopped with `pg_ctl stop -m immediate` and the standby
/// promoted while they do.
@Suite("Failover to a promoted standby", .serialized, .heavy)
struct FailoverTests {
    /// Milliseconds since 1970, the workers' clock.
    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// What a worker printed, parsed.
    struct WorkerReport {
        var pid: Int32 = 0
        /// Acknowledged saves: key, counter, time.
        var acks: [(key: String, counter: String, time: Int64)] = []
        var retries: [String] = []
        var conflicts = 0
        var unknown: [String] = []
        var merged: [Int64] = []
        var duplicates: [Int64] = []
        /// The main context's counters after each change: time, ages by counter.
        var states: [(time: Int64, ages: [String: Int])] = []
        var doneSaving: Int64?

        init(_ lines: [String]) {
            func time(_ field: Substring?) -> Int64 { field.flatMap { Int64($0.dropFirst(2)) } ?? 0 }
            for line in lines {
                let fields = line.split(separator: " ")
                switch fields.first {
                case "ready": pid = Int32(fields[1].dropFirst(4)) ?? 0
                case "ack": acks.append((String(fields[1]), String(fields[2]), time(fields[3])))
                case "retry": retries.append(line)
                case "conflict": conflicts += 1
                case "unknown": unknown.append(line)
                case "merged": merged.append(Int64(fields[1]) ?? -1)
                case "duplicate": duplicates.append(Int64(fields[1]) ?? -1)
                case "done-saving": doneSaving = time(fields[1])
                case "state":
                    var ages: [String: Int] = [:]
                    for pair in (fields.count > 2 ? fields[2].split(separator: ",") : []) {
                        let parts = pair.split(separator: "=")
                        if parts.count == 2 { ages[String(parts[0])] = Int(parts[1]) ?? -1 }
                    }
                    states.append((time(fields[1]), ages))
                default: break
                }
            }
        }

        /// When the main context first held `final` for good (nil: it does not now).
        func convergedAt(_ final: [String: Int]) -> Int64? {
            guard let last = states.last, last.ages == final else { return nil }
            var time = last.time
            for state in states.reversed() {
                guard state.ages == final else { break }
                time = state.time
            }
            return time
        }
    }

    @Test func workersRideOutAFailoverWithoutLosingAnAcknowledgedSave() throws {
        let workerCount = 3
        let counters = 3
        let postFailoverSaves = 5
        try ReplicatedPostgres.withTopology { topology in
            let database = "failover"
            try topology.createDatabase(database)
            do {
                let admin = try Connection(topology.primaryConfiguration(database))
                defer { admin.close() }
                for index in 0..<counters {
                    try admin.execute("INSERT INTO users (user_id, age) VALUES ($1, 0)", ["counter-\(index)"])
                }
            }
            let configuration = topology.failoverConfiguration(database)
            try TestDatabase.withTemporaryDirectory { phase in
                let workers = try (0..<workerCount).map { worker in
                    try HelperProcess.start(
                        "failover-worker", configuration,
                        [String(worker), String(counters), phase.path, String(postFailoverSaves)])
                }
                defer { workers.forEach { $0.stop() } }
                for worker in workers {
                    try worker.waitUntil("the worker is ready") { $0.contains { $0.hasPrefix("ready ") } }
                }
                _ = FileManager.default.createFile(atPath: phase.appendingPathComponent("start").path, contents: nil)
                for worker in workers {
                    try worker.waitUntil("the worker saved 20 times") { $0.filter { $0.hasPrefix("ack ") }.count >= 20 }
                }

                // The failover: the primary dies mid-save, the standby is promoted.
                let killed = Self.now()
                try topology.stopPrimaryImmediately()
                let stopped = Self.now()
                try topology.promoteStandby()
                let promoted = Self.now()
                _ = FileManager.default.createFile(atPath: phase.appendingPathComponent("failover").path, contents: nil)
                for worker in workers {
                    try worker.waitUntil("the worker saved after the failover", timeout: .seconds(30)) {
                        $0.contains { $0.hasPrefix("done-saving ") }
                    }
                }

                // A fresh fetch on the new primary is the truth every process must reach.
                let fresh = try Connection(topology.standbyConfiguration(database))
                defer { fresh.close() }
                var stored: [String: Int] = [:]
                for row in try fresh.query("SELECT user_id, age FROM users") {
                    stored[try row.decode(String.self, at: 0)] = try row.decode(Int?.self, at: 1) ?? -1
                }
                let final = stored.filter { $0.key.hasPrefix("counter-") }
                for worker in workers {
                    try worker.waitUntil("the worker's main context holds the stored counters \(final)", timeout: .seconds(20)) {
                        WorkerReport($0).convergedAt(final) != nil
                    }
                }
                let records = try fresh.query("SELECT id, origin_pid FROM pgdatakit_changes").map {
                    (id: try $0.decode(Int64.self, at: 0), pid: try $0.decode(Int32.self, at: 1))
                }
                // (Read before stopping: a stopped process's output files are gone.)
                let reports = workers.map { WorkerReport($0.lines) }
                workers.forEach { $0.stop() }

                // No acknowledged save lost, none applied twice, none the workers could not
                // settle.
                let acks = reports.flatMap(\.acks)
                let ackedKeys = Set(acks.map(\.key))
                #expect(acks.count == ackedKeys.count)
                let storedKeys = Set(stored.keys.filter { !$0.hasPrefix("counter-") })
                #expect(ackedKeys.subtracting(storedKeys).sorted() == [], "acknowledged saves lost")
                #expect(storedKeys.subtracting(ackedKeys).sorted() == [], "saves stored but reported failed")
                for index in 0..<counters {
                    let counter = "counter-\(index)"
                    #expect(final[counter] == acks.filter { $0.counter == counter }.count, "\(counter) vs its acknowledged increments")
                }
                #expect(reports.flatMap(\.unknown) == [])
                // Every failure was typed as one to redo: a save that did not commit
                // (transient) or a fetch without a connection.
                let retries = reports.flatMap(\.retries)
                #expect(retries.filter { $0.contains(" kind=other ") } == [])

                // Every process merged every other process's record exactly once.
                for (index, report) in reports.enumerated() {
                    let others = Set(reports.map(\.pid)).subtracting([report.pid])
                    let expected = Set(records.filter { others.contains($0.pid) }.map(\.id))
                    #expect(report.duplicates == [], "worker \(index) merged records twice")
                    #expect(report.merged.count == Set(report.merged).count)
                    #expect(Set(report.merged) == expected, "worker \(index) missed \(expected.subtracting(report.merged).sorted())")
                }

                // The times, from the moment the primary was told to stop. Saves acknowledged
                // before it had stopped were the old primary's; the first after is the new one's.
                let firstSave = try #require(acks.map(\.time).filter { $0 >= stopped }.min())
                let converged = try #require(reports.compactMap { $0.convergedAt(final) }.max())
                let retried = reports.map { $0.retries.filter { line in
                    line.split(separator: " ").dropFirst(2).first.flatMap { Int64($0.dropFirst(2)) }.map { $0 >= killed } ?? false
                }.count }
                let summary = """
                    failover: primary stopped in \(stopped - killed) ms, standby promoted \(promoted - killed) ms after \
                    the kill; first acknowledged save \(firstSave - killed) ms after the kill \
                    (\(firstSave - promoted) ms after the promotion); every process converged \(converged - killed) ms \
                    after the kill; \(acks.count) saves acknowledged (\(acks.filter { $0.time >= killed }.count) after \
                    the kill), retries after the kill per worker \(retried) (saves that did not commit: \
                    \(retries.filter { $0.contains(" kind=transient ") }.count), fetches without a connection: \
                    \(retries.filter { $0.contains(" kind=connection ") }.count)), conflicts \(reports.map(\.conflicts)), \
                    records merged per worker \(reports.map(\.merged.count))
                    """
                print(summary)
                for report in reports {
                    for line in report.retries.prefix(3) { print("  " + line) }
                }
                // The targets, 5 s and 10 s, are for a quiet run and measured well below
                // (Deployment.md, "Failover to a standby", from the summary printed above).
                // Here the bounds are generous: the suite runs on a loaded machine, and what
                // this test proves is the outcome, not the speed.
                #expect(firstSave - killed <= 60_000, "\(summary)")
                #expect(converged - killed <= 120_000, "\(summary)")
            }
        }
    }
}
