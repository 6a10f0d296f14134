import Foundation
import Logging
import PGDataKit
import PostgresKit

/// The benchmark's entity: the `users` table of the repository's migrations.
final class User: ManagedObject {
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
}

/// Seconds since `start`.
func seconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The records of one generation: the same keys, values that differ per generation (as
/// `pgdatakit-bench upsert` makes them).
func generation(_ value: Int, count: Int) -> [JSONValue] {
    (0..<count).map { index in
        [
            "UserID": .string("user-" + String(format: "%07d", index)),
            "Name": .string("Name \(index) generation \(value)"),
            "Age": .number(Double((index + value) % 90)),
        ]
    }
}

struct Options {
    var records = 100_000
    var batch = 1_000
    var runs = 3

    init(_ arguments: [String]) throws {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            guard let value = iterator.next().flatMap(Int.init), value > 0 else {
                throw CompareError("usage: compare-sqlkit [--records N] [--batch N] [--runs N]")
            }
            switch argument {
            case "--records": records = value
            case "--batch": batch = value
            case "--runs": runs = value
            default: throw CompareError("unknown option \(argument)")
            }
        }
    }
}

struct CompareError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// SQLKit's upsert of one batch: one `INSERT … VALUES (…), (…) ON CONFLICT (user_id) DO
/// UPDATE`, values bound, into `users_sqlkit` (made like `users`).
func sqlKitBatch(_ chunk: ArraySlice<JSONValue>, on sql: some SQLDatabase) async throws {
    var insert = sql.insert(into: "users_sqlkit").columns("user_id", "name", "age")
    for record in chunk {
        insert = insert.values(
            [record["UserID"]?.stringValue ?? "", record["Name"]?.stringValue, record["Age"]?.intValue] as [any Encodable & Sendable])
    }
    try await insert.onConflict(with: ["user_id"]) {
        $0.set(excludedValueOf: "name").set(excludedValueOf: "age").set("version", to: SQLRaw("users_sqlkit.version + 1"))
    }.run()
}

/// PGDataKit's batch: insertOrUpdate (one IN fetch, the objects' changes), a save (one
/// transaction: locks, statements, change record, NOTIFY), a reset.
func pgDataKitBatch(_ chunk: ArraySlice<JSONValue>, in context: ManagedObjectContext) throws {
    try context.performAndWait {
        try User.insertOrUpdate(Array(chunk), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, batchSize: chunk.count) {
            record, user in
            user.name = record["Name"]?.stringValue
            user.age = record["Age"]?.intValue
        }
        try context.save()
        context.reset()
    }
}

@main
struct CompareSQLKit {
    static func main() async throws {
        let options = try Options(Array(CommandLine.arguments.dropFirst()))
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            throw CompareError("set DATABASE_URL (for example to scripts/bench-server's)")
        }
        // A database of its own, with the repository's migrations.
        let base = ConnectionConfiguration(url)
        let admin = try Connection(base)
        let name = "pgdatakit_compare_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12))"
        try admin.execute("CREATE DATABASE \(Connection.quoteIdentifier(name))")
        defer {
            _ = try? admin.execute("DROP DATABASE IF EXISTS \(Connection.quoteIdentifier(name)) WITH (FORCE)")
            admin.close()
        }
        let configuration = base.database(name)
        let migrations = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("migrations")
        let setup = try Connection(configuration)
        try Migrator(directory: migrations).migrate(on: setup)
        try setup.execute("CREATE TABLE users_sqlkit (LIKE users INCLUDING ALL)")
        func count(_ table: String) throws -> Int { try setup.query("SELECT count(*) FROM \(table)")[0].decode(Int.self, at: 0) }

        let manager = try ContextManager(configuration: configuration, entities: [User.self])
        defer { manager.close() }
        var sqlConfiguration = try SQLPostgresConfiguration(url: url)
        sqlConfiguration.coreConfiguration.database = name
        sqlConfiguration.coreConfiguration.tls = .disable
        var logger = Logger(label: "compare-sqlkit")
        logger.logLevel = .warning
        let connection = try await PostgresConnection.connect(configuration: sqlConfiguration.coreConfiguration, id: 1, logger: logger)
        let sql = connection.sql(queryLogLevel: nil)

        let inputs = (0..<2).map { generation($0, count: options.records) }
        let chunks = inputs.map { input in
            stride(from: 0, to: input.count, by: options.batch).map { input[$0..<min(input.count, $0 + options.batch)] }
        }
        var ratios: [String: [Double]] = [:]
        var rates: [String: [Double]] = [:]
        print("upsert of \(options.records) records in batches of \(options.batch), \(options.runs) runs, PGDataKit beside SQLKit")
        for run in 1...options.runs {
            try setup.execute("TRUNCATE users, users_sqlkit CASCADE")
            for (pass, passChunks) in zip(["insert", "update"], chunks) {
                let seconds = try await timedPass(passChunks, manager: manager, sql: sql)
                ratios[pass, default: []].append(seconds.sqlkit / seconds.pgdatakit)
                rates["pgdatakit \(pass)", default: []].append(Double(options.records) / seconds.pgdatakit)
                rates["sqlkit \(pass)", default: []].append(Double(options.records) / seconds.sqlkit)
                print(String(format: "  run %d %@: PGDataKit %.0f rows/s, SQLKit %.0f rows/s", run, pass,
                    Double(options.records) / seconds.pgdatakit, Double(options.records) / seconds.sqlkit))
            }
            // Both sides did the same work: the same rows, versions included.
            let differing = try count(
                "(SELECT user_id, name, age, version FROM users EXCEPT SELECT user_id, name, age, version FROM users_sqlkit) AS d")
            guard try count("users") == options.records, try count("users_sqlkit") == options.records, differing == 0 else {
                throw CompareError("the tables differ or do not hold \(options.records) rows after run \(run)")
            }
        }
        try await connection.close()
        setup.close()
        for key in ["pgdatakit insert", "sqlkit insert", "pgdatakit update", "sqlkit update"] {
            print("  \(key.padding(toLength: 18, withPad: " ", startingAt: 0)) \(String(format: "%10.0f", median(rates[key] ?? []))) rows/s")
        }
        // A ratio above 1: PGDataKit's object path was faster than SQLKit's raw statement.
        print(
            "RESULT compare-sqlkit insert_ratio=\(String(format: "%.2f", median(ratios["insert"] ?? []))) "
                + "update_ratio=\(String(format: "%.2f", median(ratios["update"] ?? [])))")
    }

    /// One pass, batch by batch, which side goes first alternating (both meet the same
    /// moments of a shared machine): seconds of each side.
    static func timedPass(
        _ chunks: [ArraySlice<JSONValue>], manager: ContextManager, sql: some SQLDatabase
    ) async throws -> (pgdatakit: Double, sqlkit: Double) {
        let context = manager.newPrivateContext(name: "compare")
        var seconds = (pgdatakit: 0.0, sqlkit: 0.0)
        for (index, chunk) in chunks.enumerated() {
            var start = ContinuousClock.now
            if index % 2 == 1 {
                try await sqlKitBatch(chunk, on: sql)
                seconds.sqlkit += compare_sqlkit.seconds(since: start)
                start = ContinuousClock.now
            }
            try pgDataKitBatch(chunk, in: context)
            seconds.pgdatakit += compare_sqlkit.seconds(since: start)
            if index % 2 == 0 {
                start = ContinuousClock.now
                try await sqlKitBatch(chunk, on: sql)
                seconds.sqlkit += compare_sqlkit.seconds(since: start)
            }
        }
        return seconds
    }
}
