import ArgumentParser
import Foundation
import PGDataKit
import Synchronization

struct HistoryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Replay change records after a history token: paged reads, the async sequence, and a raw floor.",
        discussion: """
            Writes --records change records, each in a transaction of its own (one save's \
            record each: an insert and an update of another object), in one server-side loop, \
            after taking a history token. Then, --runs times, replays everything after that \
            token: with history(after:limit: --page) page by page, and through the \
            history(after:) sequence (its pages of 2,000) — each record decoded and carrying \
            its token. The floor is one raw SELECT of the same records' ids and text. Figures \
            are medians. Last line: \
            `RESULT history records_per_s=… paged_records_per_s=… sequence_records_per_s=… \
            raw_rows_per_s=…`, where records_per_s is the slower of the two replays.
            """)

    @Option(help: "Change records to write and replay.")
    var records = 100_000

    @Option(help: "The limit of each paged read.")
    var page = 1_000

    @Option(help: "Timed runs (medians are reported).")
    var runs = 3

    func run() throws {
        guard records > 0, page > 0, runs > 0 else { throw ValidationError("--records, --page and --runs must be positive") }
        let database = try BenchDatabase()
        defer { database.drop() }
        let coordinator = try StoreCoordinator(model: try Model(entities: []), configuration: database.configuration)
        defer { coordinator.close() }
        let start = try coordinator.currentHistoryToken()
        let writer = try Connection(database.configuration)
        defer { writer.close() }
        let written = try measure {
            try writer.executeScript(
                """
                DO $$
                BEGIN
                    FOR i IN 1..\(records) LOOP
                        INSERT INTO pgdatakit_changes (origin, origin_pid, changes)
                        VALUES ('00000000-0000-0000-0000-00000000b0b0', 4242,
                                ('[{"entity":"User","inserted":[' || i || '],"updated":[{"keys":["age","name"],"ids":['
                                 || (i + 1000000) || ']}],"deleted":[]}]')::jsonb);
                        COMMIT;
                    END LOOP;
                END
                $$
                """)
            try writer.execute("ANALYZE pgdatakit_changes")
        }
        print(String(format: "wrote %d change records, one transaction each, in %.2f s", records, written))

        var paged: [Double] = []
        var sequenced: [Double] = []
        var raw: [Double] = []
        for run in 0..<runs {
            var count = 0
            let pagedTime = try measure {
                var token = start
                while true {
                    let result = try coordinator.history(after: token, limit: page)
                    count += result.records.count
                    token = result.records.last?.historyToken ?? result.token
                    if !result.hasMore { break }
                }
            }
            guard count == records else { throw ValidationError("the paged replay read \(count) records, not \(records)") }
            paged.append(Double(records) / pagedTime)

            let sequenceTime = try measure { count = try Self.replay(coordinator, after: start, expecting: records) }
            guard count == records else { throw ValidationError("the sequence read \(count) records, not \(records)") }
            sequenced.append(Double(records) / sequenceTime)

            var rows = 0
            let rawTime = try measure {
                let result = try writer.query("SELECT id, transaction_id::text, changes::text FROM pgdatakit_changes ORDER BY id")
                for row in result { rows += try row.decode(String.self, at: 2).utf8.count > 0 ? 1 : 0 }
            }
            raw.append(Double(rows) / rawTime)
            print(
                String(
                    format: "run %d: paged (limit %d) %.0f records/s, sequence %.0f records/s, raw select %.0f rows/s",
                    run + 1, page, paged[run], sequenced[run], raw[run]))
        }
        let (pagedRate, sequenceRate, rawRate) = (median(paged), median(sequenced), median(raw))
        print(String(format: "median: paged %.0f, sequence %.0f records/s (raw select %.0f rows/s)", pagedRate, sequenceRate, rawRate))
        print(
            "RESULT history records_per_s=\(Int(min(pagedRate, sequenceRate))) paged_records_per_s=\(Int(pagedRate)) "
                + "sequence_records_per_s=\(Int(sequenceRate)) raw_rows_per_s=\(Int(rawRate))")
    }

    /// Reads `expected` records from the sequence after `start`; how many came.
    static func replay(_ coordinator: StoreCoordinator, after start: HistoryToken, expecting expected: Int) throws -> Int {
        let outcome = Mutex<Result<Int, any Error>>(.success(0))
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            var count = 0
            do {
                for try await _ in coordinator.history(after: start) {
                    count += 1
                    if count == expected { break }
                }
                outcome.withLock { $0 = .success(count) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0 }.get()
    }
}
