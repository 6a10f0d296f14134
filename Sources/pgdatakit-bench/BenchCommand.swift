import ArgumentParser
import Foundation
import PGDataKit

@main
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pgdatakit-bench",
        abstract: "Measures PGDataKit against a floor measured in the same run.",
        discussion: """
            Uses DATABASE_URL, or a throwaway PostgreSQL server. Each scenario works in a \
            database of its own, dropped afterwards, and ends with a line \
            `RESULT <scenario> key=value …`. Build in release mode for meaningful figures:
            swift run -c release pgdatakit-bench fetch
            """,
        subcommands: [
            FetchBenchmark.self, LatencyBenchmark.self, LatencyListener.self, ThroughputBenchmark.self,
            ThroughputWriter.self, ControllerBenchmark.self, ControllerWriter.self, UpsertBenchmark.self,
            ImportMemoryBenchmark.self, ContentionBenchmark.self, FanoutBenchmark.self, FanoutWorker.self,
            HistoryBenchmark.self, RequestsBenchmark.self, SaveBenchmark.self, CancelBenchmark.self, UpdateAllBenchmark.self,
            PayloadBenchmark.self,
        ]
    )
}

/// The server a benchmark runs on: `DATABASE_URL`, or a throwaway server started for the
/// run (stopped by `stop()`).
struct BenchServer {
    /// The server's URL, naming the database to connect to for administration.
    let url: String
    private let embedded: EmbeddedPostgres?

    /// Uses `DATABASE_URL` when set, else starts a throwaway server.
    ///
    /// - Parameter libraries: server libraries a throwaway server should preload
    ///   (`shared_preload_libraries`, such as `pg_stat_statements`); when it cannot start
    ///   with them (not installed), it starts without. `DATABASE_URL`'s server is taken as
    ///   it is.
    init(preloading libraries: [String] = []) throws {
        if let environment = ProcessInfo.processInfo.environment["DATABASE_URL"], !environment.isEmpty {
            url = environment
            embedded = nil
        } else if !libraries.isEmpty,
            let started = try? EmbeddedPostgres.start(
                EmbeddedPostgres.Options(settings: ["shared_preload_libraries": "'\(libraries.joined(separator: ","))'"]))
        {
            url = started.url
            embedded = started
        } else {
            let started = try EmbeddedPostgres.start()
            url = started.url
            embedded = started
        }
    }

    /// Whether this is a throwaway server (fsync off: fast, not durable).
    var isThrowaway: Bool { embedded != nil }

    /// Stops the throwaway server, if one was started.
    func stop() {
        try? embedded?.stop()
    }
}

/// A database for one benchmark run, created with the example schema and dropped after.
struct BenchDatabase {
    let configuration: ConnectionConfiguration
    private let admin: Connection
    private let name: String
    private let server: BenchServer

    /// Creates the database on `DATABASE_URL`'s server or a throwaway one.
    ///
    /// - Parameter libraries: what a throwaway server preloads (see `BenchServer`).
    init(preloading libraries: [String] = []) throws {
        server = try BenchServer(preloading: libraries)
        let base = ConnectionConfiguration(server.url)
        admin = try Connection(base)
        name = "pgdatakit_bench_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12))"
        try admin.execute("CREATE DATABASE \(Connection.quoteIdentifier(name))")
        configuration = base.database(name)
        let connection = try Connection(configuration)
        defer { connection.close() }
        try Migrator(directory: BenchDatabase.migrationsDirectory()).migrate(on: connection)
    }

    /// `migrations/` of the package (the working folder, or next to the sources).
    static func migrationsDirectory() -> URL {
        let local = URL(fileURLWithPath: "migrations")
        if FileManager.default.fileExists(atPath: local.path) { return local }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("migrations")
    }

    /// Whether the database is on a throwaway server (fsync off: fast, not durable).
    var isThrowaway: Bool { server.isThrowaway }

    /// Drops the database and stops a throwaway server.
    func drop() {
        _ = try? admin.execute("DROP DATABASE IF EXISTS \(Connection.quoteIdentifier(name)) WITH (FORCE)")
        admin.close()
        server.stop()
    }
}

/// Seconds taken by `body`.
func measure(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// The median of some numbers.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
