import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Imports in real OS processes (`pgdatakit-test-helper import-race` / `import-memory`).
@Suite("Imports across processes and at scale", .heavy)
struct ImportProcessTests {
    /// Four processes import 20,000 users each at the same moment; each shares half its
    /// keys with the next one, touching them at the same time. Every key ends as one row
    /// and no import fails.
    @Test func fourProcessesImportingOverlappingKeysEndWithOneRowPerKey() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            try TestDatabase.withTemporaryDirectory { directory in
                let barrier = directory.appendingPathComponent("go").path
                let workers = try (0..<4).map { worker in
                    try HelperProcess.start("import-race", configuration, [String(worker), barrier])
                }
                for worker in workers {
                    try worker.waitUntil("the importer is ready", timeout: .seconds(60)) { $0.contains("ready") }
                }
                _ = FileManager.default.createFile(atPath: barrier, contents: Data())
                var inserted = 0
                for (index, worker) in workers.enumerated() {
                    let outcome = try worker.waitForExit()
                    #expect(outcome.status == 0, "worker \(index): \(outcome.output) \(outcome.error.suffix(2000))")
                    let done = try #require(outcome.output.split(separator: "\n").first { $0.hasPrefix("done ") })
                    let fields = Dictionary(
                        uniqueKeysWithValues: done.split(separator: " ").dropFirst().compactMap { part -> (String, Int)? in
                            let pair = part.split(separator: "=")
                            return pair.count == 2 ? (String(pair[0]), Int(pair[1]) ?? -1) : nil
                        })
                    #expect(fields["records"] == 20_000)
                    #expect((fields["inserted"] ?? 0) + (fields["updated"] ?? 0) + (fields["unchanged"] ?? 0) == 20_000)
                    inserted += fields["inserted"] ?? 0
                }
                let connection = try Connection(configuration)
                defer { connection.close() }
                let row = try connection.query(
                    "SELECT count(*), count(DISTINCT user_id), count(*) FILTER (WHERE name IS NULL) FROM users")[0]
                #expect(try row.decode(Int.self, at: 0) == 50_000)
                #expect(try row.decode(Int.self, at: 1) == 50_000)
                #expect(try row.decode(Int.self, at: 2) == 0)
                #expect(inserted == 50_000)  // every row was inserted by exactly one worker
                // A key of worker w's own first half carries w's name; a shared key one of
                // the two workers' names.
                let wrong = try connection.query(
                    """
                    SELECT count(*) FROM users
                    WHERE NOT (substring(name from 8)::int IN (substring(user_id from 6)::int / 10000,
                                                              substring(user_id from 6)::int / 10000 - 1))
                    """)[0].decode(Int.self, at: 0)
                #expect(wrong == 0)
            }
        }
    }

    /// A million generated records through an import operation with batches of 5,000:
    /// the helper's peak memory stays bounded and flat. It takes over a minute
    /// (66-80 s in a full run with CPU burners): memory that grows a little per record
    /// shows only over many batches (200 here).
    @Test(.timeLimitOnceRunning(.seconds(600))) func aMillionRecordsImportInBoundedMemory() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let helper = try HelperProcess.start("import-memory", configuration, ["1000000", "5000"])
            let outcome = try helper.waitForExit()
            #expect(outcome.status == 0, "\(outcome.output) \(outcome.error.suffix(2000))")
            let lines = outcome.output.split(separator: "\n").map(String.init)
            func peak(at records: String) throws -> Double {
                let line = try #require(lines.first { $0.hasPrefix("rss at=\(records) ") })
                return try #require(Double(line.split(separator: "=").last ?? "")) / 1024
            }
            let early = try peak(at: "100000")
            let late = try peak(at: "1000000")
            #expect(late < 300, "peak RSS \(late) MB after 1,000,000 records")
            #expect(late < early * 1.2 + 10, "peak RSS grew from \(early) MB to \(late) MB")
            #expect(lines.contains("done inserted=1000000 records=1000000 batches=200 progress=1000000"))
            let connection = try Connection(configuration)
            defer { connection.close() }
            #expect(try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 1_000_000)
        }
    }
}
