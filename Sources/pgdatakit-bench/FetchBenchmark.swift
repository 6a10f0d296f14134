import ArgumentParser
import CFetchFloor
import Foundation
import PGDataKit

final class BenchUser: ManagedObject {
    override class var entityName: String { "User" }
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
}

/// One raw row, as a program using only the database layer would hold it.
struct RawUser {
    var id: Int64
    var version: Int64
    var userID: String
    var name: String?
    var age: Int?
}

struct FetchBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Fetch rows as managed objects, beside the same rows through a raw connection.")

    @Option(help: "Rows in the table.")
    var rows = 100_000

    @Option(help: "Timed runs of each side (the median is reported).")
    var runs = 9

    func run() throws {
        let database = try BenchDatabase()
        defer { database.drop() }
        let loader = try Connection(database.configuration)
        let seed: [[(any PostgresEncodable)?]] = (0..<rows).map { index in
            ["user-\(index)", index % 7 == 0 ? nil : "Name \(index)", index % 5 == 0 ? nil : index % 90]
        }
        try loader.copy(into: "users", columns: ["user_id", "name", "age"], rows: seed)
        try loader.execute("ANALYZE users")
        loader.close()

        let manager = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        let raw = try Connection(database.configuration)
        defer { raw.close() }
        guard let conninfo = database.configuration.renderedConnectionString(),
            let cConnection = pgdatakit_c_floor_open(conninfo)
        else { throw ValidationError("the C floor could not connect") }
        defer { pgdatakit_c_floor_close(cConnection) }

        var rawTimes: [Double] = []
        var objectTimes: [Double] = []
        var cTimes: [Double] = []
        var checksum = (raw: 0, objects: 0, c: Int64(0))
        for _ in 0..<(runs + 1) {  // the first round warms up and is not counted
            // The C floor: libpq and C structs only (Sources/CFetchFloor).
            var cRows: Int64 = 0
            let cTime = measure {
                cRows = pgdatakit_c_floor_scan(cConnection, "SELECT id, version, user_id, name, age FROM users ORDER BY id", &checksum.c)
            }
            guard cRows == rows else { throw ValidationError("the C floor read \(cRows) rows of \(rows)") }
            cTimes.append(cTime)
            let rawTime = try measure {
                let result = try raw.query("SELECT id, version, user_id, name, age FROM users ORDER BY id")
                var users: [RawUser] = []
                users.reserveCapacity(result.count)
                for row in result {
                    users.append(
                        RawUser(
                            id: try row.decode(Int64.self, at: 0), version: try row.decode(Int64.self, at: 1),
                            userID: try row.decode(String.self, at: 2), name: try row.decode(String?.self, at: 3),
                            age: try row.decode(Int?.self, at: 4)))
                }
                checksum.raw = users.reduce(0) { $0 + ($1.age ?? 0) }
            }
            let context = manager.newPrivateContext()
            let objectTime = try context.performAndWait {
                try measure {
                    let users = try context.fetch(FetchRequest<BenchUser>())
                    checksum.objects = users.reduce(0) { $0 + ($1.age ?? 0) }
                }
            }
            context.performAndWait { context.reset() }
            rawTimes.append(rawTime)
            objectTimes.append(objectTime)
        }
        guard checksum.raw == checksum.objects, Int64(checksum.raw) == checksum.c else {
            throw ValidationError("checksums differ: raw \(checksum.raw), objects \(checksum.objects), C \(checksum.c)")
        }
        let cRate = Double(rows) / median(Array(cTimes.dropFirst()))
        let cRatio = median(zip(cTimes, objectTimes).dropFirst().map { c, objects in c / objects })
        let rawRate = Double(rows) / median(Array(rawTimes.dropFirst()))
        let objectRate = Double(rows) / median(Array(objectTimes.dropFirst()))
        // Each run fetches raw rows, then objects, back to back: the ratio is the median of
        // the runs' own ratios, so a slow phase of a shared machine affects both sides of
        // a pair rather than one side of the medians.
        let ratio = median(zip(rawTimes, objectTimes).dropFirst().map { raw, objects in raw / objects })
        print("fetch of \(rows) rows, median of \(runs) runs (after one warm-up)")
        print("  raw connection rows:  \(String(format: "%10.0f", rawRate)) rows/s  (\(String(format: "%.1f", 1000 * Double(rows) / rawRate)) ms)")
        print("  managed objects:      \(String(format: "%10.0f", objectRate)) rows/s  (\(String(format: "%.1f", 1000 * Double(rows) / objectRate)) ms)")
        print("  ratio objects/raw:    \(String(format: "%.2f", ratio))  (median of the runs' ratios; of the medians: \(String(format: "%.2f", objectRate / rawRate)))")
        print("  C libpq loop rows:    \(String(format: "%10.0f", cRate)) rows/s  (\(String(format: "%.1f", 1000 * Double(rows) / cRate)) ms)")
        print("  ratio objects/C:      \(String(format: "%.2f", cRatio))  (median of the runs' ratios)")
        print(
            "RESULT fetch object_rows_per_s=\(Int(objectRate)) raw_rows_per_s=\(Int(rawRate)) ratio=\(String(format: "%.2f", ratio)) "
                + "c_rows_per_s=\(Int(cRate)) c_ratio=\(String(format: "%.2f", cRatio))")
        manager.close()
    }
}
