import ArgumentParser
import Foundation
import PGDataKit
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `pgdatakit-bench contention`: the demo's mix of overlapping work in N processes on one
/// dataset, with the server's deadlock count, lock timeouts and retries beside saves/s.
struct ContentionBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contention",
        abstract: "Saves/s, merge latency, deadlocks, lock timeouts and retries of the demo's mix as workers grow.",
        discussion: """
            For each worker count N, runs `pgdatakit demo --workers N --duration <seconds>
            --json --keep-database` — the `pgdatakit` program built next to this one — so \
            the mix is exactly the demo's: keyed imports of users and posts whose keys \
            overlap (posts linked to their users), renames under the three merge policies \
            (object trump, store trump, error + retry), increments under `.error`, deletes. \
            The demo makes a database of its own on the server (DATABASE_URL, else a \
            throwaway server started here); after it ends, this program reads the \
            database's `pg_stat_database.deadlocks` (noted at 0 when the demo created it, \
            read again once the demo's sessions are gone and the counter is still), then \
            drops it.

            Per row: saves (all workers) and the seconds they wrote, saves/s, merge p50/p99 \
            in the demo's parent (an observing process: from the start of a save to its \
            merge there), deadlocks (the server's count for the database), lock timeouts \
            and retries as the demo's summary reports them (`lockTimeouts`, 0 when the \
            summary has no such field; `retries`, else the demo's `conflictsRetried`: steps \
            redone after a merge conflict under `.error` or a transient error), and the \
            demo's exit status (0 when its proofs hold). Last line: `RESULT contention \
            workers=… saves_per_s=… deadlocks=… lock_timeouts=… merge_p50_ms=… \
            merge_p99_ms=… retries=… demo_exit=… library_retries=…` for the last worker \
            count (`library_retries`: the saves among `retries` that the library redid \
            itself, the demo's `libraryRetries`; their causes are in the demo's summary).

            Exit status: 0 when every demo run proved its claims; 2 when every run gave \
            its figures but a demo's proofs failed (the table and the RESULT line are \
            printed all the same); 1 when a demo run could not start or gave no summary \
            (the remaining counts still run; no RESULT line when the last one failed). \
            For figures that mean something: a release build, on a server with default \
            settings (scripts/bench-server: fsync on, deadlock_timeout 1 s).
            """)

    @Option(help: "Worker process counts, comma-separated (1 to 16 each).")
    var workers = "2,4,8"

    @Option(help: "Seconds the workers of each run write.")
    var seconds = 20.0

    func run() throws {
        let counts = workers.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !counts.isEmpty, counts.allSatisfy({ (1...16).contains($0) }) else {
            throw ValidationError("--workers takes counts from 1 to 16, such as 2,4,8")
        }
        guard seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds must be in (0, 3600]") }
        let demo = try Self.demoExecutable()
        let server = try BenchServer()
        defer { server.stop() }
        let admin = try Connection(ConnectionConfiguration(server.url))
        defer { admin.close() }

        print("contention: `pgdatakit demo` in N worker processes on one database, \(format(seconds, 1)) s each")
        print("(overlapping keyed imports with links, renames under three merge policies, increments under .error, deletes)")
        print("server: \(try Self.settings(admin))\(server.isThrowaway ? " (throwaway server)" : "")")
        print("merge = save began → merged in the demo's parent; deadlocks = pg_stat_database delta for the database")
        print(
            "workers    saves  seconds   saves/s  merge p50 ms  merge p99 ms  deadlocks  lock timeouts  retries  demo exit"
                + "         library retries")
        var last: ContentionRow?
        var unread = 0
        var unproven = 0
        for count in counts {
            do {
                let row = try measure(workers: count, demo: demo, server: server, admin: admin)
                print(row.line())
                fflush(nil)  // a row per run as it comes, even into a file or a pipe
                if row.demoStatus != 0 { unproven += 1 }
                last = row
            } catch {
                print(String(format: "%7d  ", count) + "failed: \(error)")
                printError("contention: the demo with \(count) workers gave no figures: \(error)")
                unread += 1
                last = nil
            }
        }
        if let last {
            print(last.result())
        }
        if unread > 0 { throw ExitCode(1) }
        if unproven > 0 {
            printError("contention: \(unproven) demo run(s) exited non-zero: their proofs failed (see the demo's output above)")
            throw ExitCode(2)
        }
    }

    /// Runs the demo once with `count` workers and reads its figures and the server's.
    func measure(workers count: Int, demo: URL, server: BenchServer, admin: Connection) throws -> ContentionRow {
        let before = Set(try Self.demoDatabases(admin))
        let process = Process()
        process.executableURL = demo
        process.arguments = [
            "demo", "--workers", String(count), "--duration", String(seconds), "--json", "--keep-database",
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = server.url
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = errors
        let run = DemoOutput()
        try process.run()
        run.read(output.fileHandleForReading, errors: errors.fileHandleForReading, label: "demo \(count)")

        // The demo names its database on standard error right after creating it, before its
        // workers start: note the counter there (a new database starts at 0).
        var deadlocksAtStart: Int?
        var database: String?
        let deadline = Date().addingTimeInterval(seconds + 330)
        while process.isRunning {
            if deadlocksAtStart == nil, let name = run.databaseName {
                database = name
                deadlocksAtStart = try Self.deadlocks(in: name, admin)
            }
            if Date() > deadline {
                process.terminate()
                break
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        process.waitUntilExit()
        run.waitUntilClosed()
        if database == nil {
            database = try run.databaseName ?? Set(Self.demoDatabases(admin)).subtracting(before).first
        }
        defer {
            if let database {
                _ = try? admin.execute("DROP DATABASE IF EXISTS \(Connection.quoteIdentifier(database)) WITH (FORCE)")
            }
        }
        guard let database else {
            throw ValidationError("the demo (exit status \(process.terminationStatus)) made no database: \(run.errorTail)")
        }
        let deadlocks = try Self.settledDeadlocks(in: database, admin) - (deadlocksAtStart ?? 0)
        let summary: DemoSummaryFields
        do {
            summary = try run.summary()
        } catch {
            throw ValidationError(
                "no JSON summary from the demo (exit status \(process.terminationStatus)): \(error); \(run.errorTail)")
        }
        let saves = summary.saves ?? 0
        let writing = summary.seconds ?? 0
        return ContentionRow(
            workers: count, saves: saves, seconds: writing, savesPerSecond: writing > 0 ? Double(saves) / writing : 0,
            mergeP50: summary.mergeP50Milliseconds ?? 0, mergeP99: summary.mergeP99Milliseconds ?? 0,
            deadlocks: deadlocks, lockTimeouts: summary.lockTimeouts ?? 0,
            retries: summary.retries ?? summary.conflictsRetried ?? 0, demoStatus: process.terminationStatus,
            libraryRetries: summary.libraryRetries ?? 0)
    }

    /// The `pgdatakit` program in this program's folder (one build folder holds both).
    static func demoExecutable() throws -> URL {
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        let demo = URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent("pgdatakit")
        guard FileManager.default.isExecutableFile(atPath: demo.path) else {
            throw ValidationError(
                "contention runs `pgdatakit demo`, and \(demo.path) is missing: build it beside this program with "
                    + "`swift build --product pgdatakit` (with the same -c and --scratch-path as pgdatakit-bench)")
        }
        return demo
    }

    /// The names of the demo's databases on the server now.
    static func demoDatabases(_ admin: Connection) throws -> [String] {
        try admin.query(#"SELECT datname FROM pg_database WHERE datname LIKE 'pgdatakit\_demo\_%'"#)
            .map { try $0.decode(String.self, at: 0) }
    }

    /// The server's deadlock count for a database (`pg_stat_database.deadlocks`).
    static func deadlocks(in database: String, _ admin: Connection) throws -> Int {
        try admin.query(
            "SELECT coalesce((SELECT deadlocks FROM pg_stat_database WHERE datname = $1), 0)::bigint", [database]
        )[0].decode(Int.self, at: 0)
    }

    /// The deadlock count once it is final: statistics reach `pg_stat_database` when a
    /// session flushes them (at most once a second while it runs, and when it ends), so
    /// this waits (up to 10 s) until no session is left in the database, then reads until
    /// two reads 250 ms apart agree (up to 2 s).
    static func settledDeadlocks(in database: String, _ admin: Connection) throws -> Int {
        let gone = Date().addingTimeInterval(10)
        while Date() < gone,
            try admin.query("SELECT count(*)::bigint FROM pg_stat_activity WHERE datname = $1", [database])[0]
                .decode(Int.self, at: 0) > 0
        {
            Thread.sleep(forTimeInterval: 0.05)
        }
        var value = try deadlocks(in: database, admin)
        let stable = Date().addingTimeInterval(2)
        while Date() < stable {
            Thread.sleep(forTimeInterval: 0.25)
            let again = try deadlocks(in: database, admin)
            if again == value { break }
            value = again
        }
        return value
    }

    /// The server's version and the settings that shape contention figures.
    static func settings(_ admin: Connection) throws -> String {
        let rows = try admin.query("""
            SELECT name, setting || coalesce(unit, '') FROM pg_settings
             WHERE name IN ('server_version', 'fsync', 'synchronous_commit', 'deadlock_timeout', 'lock_timeout',
                            'max_connections')
             ORDER BY name = 'server_version' DESC, name
            """)
        return try rows.map { "\(try $0.decode(String.self, at: 0))=\(try $0.decode(String.self, at: 1))" }
            .joined(separator: " ")
    }

    func format(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }
}

/// Writes a line to standard error.
func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// One row of the contention table: one demo run's figures.
struct ContentionRow {
    /// Worker processes.
    var workers: Int
    /// Saves of all workers.
    var saves: Int
    /// Seconds the workers wrote.
    var seconds: Double
    /// `saves / seconds`.
    var savesPerSecond: Double
    /// Median merge latency in the demo's parent, in milliseconds.
    var mergeP50: Double
    /// 99th percentile merge latency in the demo's parent, in milliseconds.
    var mergeP99: Double
    /// Deadlocks the server found in the demo's database.
    var deadlocks: Int
    /// Lock timeouts the demo reported (0 when its summary has no such field).
    var lockTimeouts: Int
    /// Steps the demo's workers redid.
    var retries: Int
    /// The demo's exit status: 0 when its proofs held.
    var demoStatus: Int32
    /// Of `retries`, the saves the library redid itself (0 when the demo does not say).
    var libraryRetries: Int

    /// The row as printed under the table's header.
    func line() -> String {
        String(
            format: "%7d  %7d  %7.1f  %8.1f  %12.3f  %12.3f  %9d  %13d  %7d  ",
            workers, saves, seconds, savesPerSecond, mergeP50, mergeP99, deadlocks, lockTimeouts, retries)
            + (demoStatus == 0 ? "0 (proven)" : "\(demoStatus) (proofs failed)")
                .padding(toLength: 17, withPad: " ", startingAt: 0)
            + String(format: "  %15d", libraryRetries)
    }

    /// The `RESULT contention …` line.
    func result() -> String {
        "RESULT contention workers=\(workers) saves_per_s=\(String(format: "%.1f", savesPerSecond)) "
            + "deadlocks=\(deadlocks) lock_timeouts=\(lockTimeouts) "
            + "merge_p50_ms=\(String(format: "%.3f", mergeP50)) merge_p99_ms=\(String(format: "%.3f", mergeP99)) "
            + "retries=\(retries) demo_exit=\(demoStatus) library_retries=\(libraryRetries)"
    }
}

/// The fields of `pgdatakit demo --json` this benchmark reads. All optional: a field an
/// older demo does not write reads as absent (and counts as 0).
struct DemoSummaryFields: Decodable {
    /// Saves of all workers.
    var saves: Int?
    /// Seconds the workers wrote.
    var seconds: Double?
    /// Median merge latency in the demo's parent, in milliseconds.
    var mergeP50Milliseconds: Double?
    /// 99th percentile merge latency in the demo's parent, in milliseconds.
    var mergeP99Milliseconds: Double?
    /// Steps redone after a merge conflict under `.error` or a transient error.
    var conflictsRetried: Int?
    /// Lock waits that ran out of time, when the demo counts them.
    var lockTimeouts: Int?
    /// Retries of any kind, when the demo counts them.
    var retries: Int?
    /// The saves among `retries` the library redid itself, when the demo says.
    var libraryRetries: Int?
}

/// What a demo run writes: its standard output (the JSON summary) collected, its standard
/// error passed on to this program's and searched for the name of the demo's database.
final class DemoOutput: Sendable {
    private struct State {
        var output = Data()
        var errorLines: [String] = []
        var databaseName: String?
        var closed = 0
    }

    private let state = Mutex(State())

    /// Reads both pipes to their end on threads of their own.
    func read(_ output: FileHandle, errors: FileHandle, label: String) {
        Thread.detachNewThread { [self] in
            let data = output.readDataToEndOfFile()
            state.withLock {
                $0.output = data
                $0.closed += 1
            }
        }
        Thread.detachNewThread { [self] in
            var buffer = Data()
            while true {
                let chunk = errors.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    add(errorLine: line, label: label)
                }
            }
            if !buffer.isEmpty { add(errorLine: String(decoding: buffer, as: UTF8.self), label: label) }
            state.withLock { $0.closed += 1 }
        }
    }

    private func add(errorLine line: String, label: String) {
        printError("[\(label)] \(line)")
        // "Demo database: pgdatakit_demo_… (kept afterwards)"
        let prefix = "Demo database: "
        let name = line.hasPrefix(prefix) ? line.dropFirst(prefix.count).prefix { $0 != " " } : nil
        state.withLock {
            $0.errorLines.append(line)
            if let name, $0.databaseName == nil { $0.databaseName = String(name) }
        }
    }

    /// The database the demo said it made, once it said so.
    var databaseName: String? { state.withLock { $0.databaseName } }

    /// The last lines of the demo's standard error, for error messages.
    var errorTail: String {
        state.withLock { $0.errorLines.suffix(5).joined(separator: " | ") }
    }

    /// Waits until both pipes reached their end (the demo and its workers closed them), or
    /// 30 seconds (a worker left behind keeps standard error open).
    func waitUntilClosed() {
        let deadline = Date().addingTimeInterval(30)
        while state.withLock({ $0.closed < 2 }), Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
    }

    /// The demo's JSON summary.
    func summary() throws -> DemoSummaryFields {
        let output = state.withLock { $0.output }
        guard let start = output.firstIndex(of: UInt8(ascii: "{")) else {
            throw ValidationError("its standard output holds no JSON object (\(output.count) bytes)")
        }
        return try JSONDecoder().decode(DemoSummaryFields.self, from: output[start...])
    }
}
