import FluentKit
import FluentPostgresDriver
import Foundation
import Logging
import NIOCore
import NIOPosix
import PGDataKit
import PostgresKit

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
                throw CompareError("usage: compare [--records N] [--batch N] [--runs N]")
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

/// The libraries compared, each with its own table made like `users`.
enum Side: String, CaseIterable {
    case pgdatakit = "PGDataKit"
    case sqlkit = "SQLKit"
    case fluent = "Fluent"
}

/// What each side writes with.
struct Writers {
    let manager: ContextManager
    let sql: any SQLDatabase
    let fluent: any Database

    /// One batch of one side.
    func write(_ chunk: ArraySlice<JSONValue>, _ side: Side, context: ManagedObjectContext) async throws {
        switch side {
        case .pgdatakit: try pgDataKitBatch(chunk, in: context)
        case .sqlkit: try await sqlKitBatch(chunk, on: sql)
        case .fluent: try await fluentBatch(chunk, on: fluent)
        }
    }

    /// One pass, batch by batch; which side goes first rotates, so all meet the same
    /// moments of a shared machine. Seconds of each side.
    func timedPass(_ chunks: [ArraySlice<JSONValue>]) async throws -> [Side: Double] {
        let context = manager.newPrivateContext(name: "compare")
        var seconds: [Side: Double] = [:]
        for (index, chunk) in chunks.enumerated() {
            let sides = Side.allCases
            for offset in sides.indices {
                let side = sides[(index + offset) % sides.count]
                let start = ContinuousClock.now
                try await write(chunk, side, context: context)
                seconds[side, default: 0] += compare.seconds(since: start)
            }
        }
        return seconds
    }
}

@main
struct Compare {
    static func main() async {
        do {
            try await compare()
        } catch {
            FileHandle.standardError.write(Data("compare: \(error)\n".utf8))
            exit(1)
        }
    }

    static func compare() async throws {
        let options = try Options(Array(CommandLine.arguments.dropFirst()))
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
            throw CompareError("set DATABASE_URL (for example to scripts/bench-server's)")
        }
        let database = try ScratchDatabase(url: url)
        defer { database.drop() }
        let manager = try ContextManager(configuration: database.configuration, entities: [User.self])
        defer { manager.close() }
        var sqlConfiguration = try SQLPostgresConfiguration(url: url)
        sqlConfiguration.coreConfiguration.database = database.name
        sqlConfiguration.coreConfiguration.tls = .disable
        var logger = Logger(label: "compare")
        logger.logLevel = .warning
        let connection = try await PostgresConnection.connect(configuration: sqlConfiguration.coreConfiguration, id: 1, logger: logger)
        let databases = Databases(threadPool: NIOThreadPool.singleton, on: MultiThreadedEventLoopGroup.singleton)
        databases.use(.postgres(configuration: sqlConfiguration, sqlLogLevel: .trace), as: .psql)
        guard let fluent = databases.database(.psql, logger: logger, on: MultiThreadedEventLoopGroup.singleton.any()) else {
            throw CompareError("Fluent has no database")
        }
        let writers = Writers(manager: manager, sql: connection.sql(queryLogLevel: nil), fluent: fluent)
        let rates = try await run(options, writers: writers, database: database)
        try await connection.close()
        await databases.shutdownAsync()
        report(rates, records: options.records)
    }

    /// The runs: each empties the tables, then an insert pass and an update pass; after
    /// each run the three tables must hold the same rows, versions included. Rows/s by
    /// side and pass.
    static func run(_ options: Options, writers: Writers, database: ScratchDatabase) async throws -> [String: [Double]] {
        let chunks = (0..<2).map { generation($0, count: options.records) }.map { input in
            stride(from: 0, to: input.count, by: options.batch).map { input[$0..<min(input.count, $0 + options.batch)] }
        }
        var rates: [String: [Double]] = [:]
        print("upsert of \(options.records) records in batches of \(options.batch), \(options.runs) runs: PGDataKit, SQLKit, Fluent")
        for run in 1...options.runs {
            try database.setup.execute("TRUNCATE users, users_sqlkit, users_fluent CASCADE")
            for (pass, passChunks) in zip(["insert", "update"], chunks) {
                let seconds = try await writers.timedPass(passChunks)
                var line = "  run \(run) \(pass):"
                for side in Side.allCases {
                    let rate = Double(options.records) / (seconds[side] ?? .infinity)
                    rates["\(side.rawValue) \(pass)", default: []].append(rate)
                    line += " \(side.rawValue) \(Int(rate)) rows/s"
                }
                print(line)
            }
            try database.checkTablesAgree(records: options.records)
        }
        return rates
    }

    static func report(_ rates: [String: [Double]], records: Int) {
        for pass in ["insert", "update"] {
            for side in Side.allCases {
                let key = "\(side.rawValue) \(pass)"
                print("  \(key.padding(toLength: 18, withPad: " ", startingAt: 0)) \(String(format: "%10.0f", median(rates[key] ?? []))) rows/s")
            }
        }
        // Ratios above 1: PGDataKit's object path was faster than the other side.
        func ratio(_ side: Side, _ pass: String) -> String {
            String(format: "%.2f", median(rates["PGDataKit \(pass)"] ?? []) / max(median(rates["\(side.rawValue) \(pass)"] ?? []), 1e-9))
        }
        print(
            "RESULT compare sqlkit_insert_ratio=\(ratio(.sqlkit, "insert")) sqlkit_update_ratio=\(ratio(.sqlkit, "update")) "
                + "fluent_insert_ratio=\(ratio(.fluent, "insert")) fluent_update_ratio=\(ratio(.fluent, "update"))")
    }
}

/// A database of its own on `DATABASE_URL`'s server, with the repository's migrations and
/// the other sides' tables made like `users`; dropped at the end.
struct ScratchDatabase {
    let name: String
    let configuration: ConnectionConfiguration
    let setup: Connection
    private let admin: Connection

    init(url: String) throws {
        let base = ConnectionConfiguration(url)
        admin = try Connection(base)
        name = "pgdatakit_compare_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12))"
        try admin.execute("CREATE DATABASE \(Connection.quoteIdentifier(name))")
        configuration = base.database(name)
        setup = try Connection(configuration)
        let migrations = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("migrations")
        try Migrator(directory: migrations).migrate(on: setup)
        try setup.execute("CREATE TABLE users_sqlkit (LIKE users INCLUDING ALL)")
        try setup.execute("CREATE TABLE users_fluent (LIKE users INCLUDING ALL)")
    }

    func count(_ table: String) throws -> Int { try setup.query("SELECT count(*) FROM \(table)")[0].decode(Int.self, at: 0) }

    /// Every side did the same work: the same rows, versions included.
    func checkTablesAgree(records: Int) throws {
        for table in ["users", "users_sqlkit", "users_fluent"] where try count(table) != records {
            throw CompareError("\(table) holds \(try count(table)) rows, not \(records)")
        }
        for other in ["users_sqlkit", "users_fluent"] {
            let differing = try count(
                "(SELECT user_id, name, age, version FROM users EXCEPT SELECT user_id, name, age, version FROM \(other)) AS d")
            if differing > 0 { throw CompareError("\(differing) rows of users differ in \(other)") }
        }
    }

    func drop() {
        setup.close()
        _ = try? admin.execute("DROP DATABASE IF EXISTS \(Connection.quoteIdentifier(name)) WITH (FORCE)")
        admin.close()
    }
}
