import ArgumentParser
import Foundation
import PGDataKit

struct UpsertBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upsert",
        abstract: "insertOrUpdate in batches, beside raw INSERT … ON CONFLICT statements and a naive per-record loop.",
        discussion: """
            Each run: insertOrUpdate (one fetch + one save per batch, in a private context reset after \
            each) inserts all records into an empty table, then updates every row with new values, then \
            imports the same records once more (identical: no UPDATE may be written), then edits every \
            row as a worker edits objects it fetched (the batch's objects fetched with one predicate, given \
            new values, saved: no import). Beside the first two passes and the last, batch by batch, the \
            floor (one INSERT … SELECT FROM unnest(…) ON CONFLICT (user_id) \
            DO UPDATE per batch on a raw connection, into a table of its own made like the first) does the \
            same: the two alternate batch by batch, so both meet the same moments of a shared machine. \
            The ratios are medians of each run's own object/floor ratios. \
            The naive pattern — one fetch and one save per record — runs once, on new records. \
            Each pass also shows this process's CPU time per batch (the rest of the wall time is \
            the server and waiting for it): on a loaded machine the wall-clock ratios move a lot, \
            the CPU figures less.
            """)

    @Option(help: "Records per pass.")
    var records = 100_000

    @Option(help: "Records per batch.")
    var batch = 1_000

    @Option(help: "Records of the naive pass.")
    var naive = 2_000

    @Option(help: "Timed runs (medians are reported).")
    var runs = 3

    /// The records of one generation: the same keys, values that differ per generation.
    func generation(_ value: Int, count: Int, prefix: String = "user") -> [JSONValue] {
        (0..<count).map { index in
            [
                "UserID": .string(prefix + "-" + String(format: "%07d", index)),
                "Name": .string("Name \(index) generation \(value)"),
                "Age": .number(Double((index + value) % 90)),
            ]
        }
    }

    func run() throws {
        let database = try BenchDatabase()
        defer { database.drop() }
        let manager = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { manager.close() }
        let raw = try Connection(database.configuration)
        defer { raw.close() }
        let size = max(1, batch)
        let batches = (records + size - 1) / size

        var passes = UpsertPasses(manager: manager, raw: raw, size: size)

        func scalar(_ sql: String) throws -> Int { try raw.query(sql)[0].decode(Int.self, at: 0) }

        var insertRatios: [Double] = []
        var updateRatios: [Double] = []
        var editRatios: [Double] = []
        var rates: [String: [Double]] = [:]
        var statements: [String: Int] = [:]
        var identicalWrites = 0
        let inputs = (0..<3).map { generation($0, count: records) }
        try raw.execute("CREATE TABLE users_floor (LIKE users INCLUDING ALL)")
        print("upsert of \(records) records in batches of \(size), \(runs) runs")
        for run in 1...max(1, runs) {
            try raw.execute("TRUNCATE users, users_floor CASCADE")
            let insert = try passes.pass(inputs[0], object: "object insert", floor: "floor insert")
            let update = try passes.pass(inputs[1], object: "object update", floor: "floor update")
            let versions = try scalar("SELECT sum(version)::bigint FROM users")
            let changes = try scalar("SELECT count(*) FROM pgdatakit_changes")
            let identical = try passes.pass(inputs[1], object: "object identical", floor: nil)
            identicalWrites += try scalar("SELECT sum(version)::bigint FROM users") - versions
            identicalWrites += try scalar("SELECT count(*) FROM pgdatakit_changes") - changes
            let edit = try passes.pass(inputs[2], object: "object edit", floor: "floor edit", editing: true)
            guard try scalar("SELECT sum(version)::bigint FROM users") == 3 * records else {
                throw ValidationError("the edit pass did not update every row once")
            }
            guard try scalar("SELECT count(*) FROM users") == records, try scalar("SELECT count(*) FROM users_floor") == records else {
                throw ValidationError("the tables do not hold \(records) rows after run \(run)")
            }
            insertRatios.append(insert.floor / insert.object)
            updateRatios.append(update.floor / update.object)
            editRatios.append(edit.floor / edit.object)
            rates["floor insert", default: []].append(Double(records) / insert.floor)
            rates["object insert", default: []].append(Double(records) / insert.object)
            rates["floor update", default: []].append(Double(records) / update.floor)
            rates["object update", default: []].append(Double(records) / update.object)
            rates["object identical", default: []].append(Double(records) / identical.object)
            rates["floor edit", default: []].append(Double(records) / edit.floor)
            rates["object edit", default: []].append(Double(records) / edit.object)
            statements["insert"] = insert.statements
            statements["update"] = update.statements
            statements["identical"] = identical.statements
            print(
                String(
                    format: "  run %d: insert %.2f of floor, update %.2f of floor, edit %.2f of floor", run, insertRatios.last ?? 0,
                    updateRatios.last ?? 0, editRatios.last ?? 0))
        }

        let naiveSeconds = try naivePass(manager)
        let naiveRate = Double(naive) / naiveSeconds
        let objectInsertRate = median(rates["object insert"] ?? [])
        let batchCount = Double(max(1, runs) * batches)
        func show(_ name: String) {
            print(
                "  \(name.padding(toLength: 18, withPad: " ", startingAt: 0)) \(String(format: "%10.0f", median(rates[name] ?? []))) rows/s"
                    + String(format: "   client CPU %5.2f ms per batch", 1000 * (passes.cpu[name] ?? 0) / batchCount))
        }
        ["floor insert", "object insert", "floor update", "object update", "object identical", "floor edit", "object edit"]
            .forEach(show)
        print("  naive (\(naive) rows)    \(String(format: "%10.0f", naiveRate)) rows/s")
        let perBatch = { (key: String) in Double(statements[key] ?? 0) / Double(batches) }
        print(String(format: "  statements per batch: insert %.1f, update %.1f, identical %.1f", perBatch("insert"), perBatch("update"), perBatch("identical")))
        print("  identical records: \(identicalWrites) version bumps or change records (must be 0)")
        guard identicalWrites == 0 else { throw ValidationError("identical records were written") }
        print(
            "RESULT upsert insert_ratio=\(String(format: "%.2f", median(insertRatios))) update_ratio=\(String(format: "%.2f", median(updateRatios))) "
                + "naive_speedup=\(String(format: "%.1f", objectInsertRate / naiveRate)) statements_per_batch=\(String(format: "%.0f", perBatch("insert").rounded(.up))) "
                + "edit_ratio=\(String(format: "%.2f", median(editRatios)))"
        )
    }

    /// The naive pattern: one fetch and one save per record, on new keys. Seconds.
    func naivePass(_ manager: ContextManager) throws -> Double {
        let naiveInput = generation(0, count: naive, prefix: "naive")
        let context = manager.newPrivateContext(name: "naive")
        return try context.performAndWait {
            try measure {
                for record in naiveInput {
                    let id = record["UserID"]?.stringValue ?? ""
                    let user = try BenchUser.first(in: context, where: "userID == %@", id) ?? BenchUser(context: context)
                    user.userID = id
                    user.name = record["Name"]?.stringValue
                    user.age = record["Age"]?.intValue
                    try context.save()
                }
            }
        }
    }
}

/// CPU seconds the calling thread has used.
func threadCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
