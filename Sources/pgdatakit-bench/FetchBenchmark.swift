import ArgumentParser
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

        var rawTimes: [Double] = []
        var objectTimes: [Double] = []
        var checksum = (raw: 0, objects: 0)
        for _ in 0..<(runs + 1) {  // the first round warms up and is not counted
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
        guard checksum.raw == checksum.objects else {
            throw ValidationError("checksums differ: raw \(checksum.raw), objects \(checksum.objects)")
        }
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
        print("RESULT fetch object_rows_per_s=\(Int(objectRate)) raw_rows_per_s=\(Int(rawRate)) ratio=\(String(format: "%.2f", ratio))")
        manager.close()
    }
}
