import ArgumentParser
import Foundation
import PGDataKit

#if canImport(Glibc)
    import Glibc
#endif

/// `pgdatakit-bench fanout`: many processes on one dataset, a few of them writing. What
/// does a remote save cost the processes that hold what it changed (merge latency), and
/// the ones that hold none of it (statements they send, counted by the server)?
struct FanoutBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "Many processes, a few writing: merge latency where the changed objects are held, "
            + "statements per remote save where none are.",
        discussion: """
            Fills `users` with ROWS rows (one INSERT … SELECT generate_series; a row's age is \
            its number), then starts PROCESSES processes of this program \
            (`fanout-worker`), each a context manager that merges other processes' saves \
            and whose main context holds 100 users and one controller over 20 rows nobody \
            writes (by age; no save changes age). WRITERS of them rename users, one per \
            save in a private context, as fast as they can, taking turns over their share \
            of the first 100 rows ("hot" rows); their main contexts hold rows of their own \
            that nobody writes. Of the rest, half (rounded down) are holders: their main \
            contexts hold the 100 hot rows, so every save changes objects they hold; the \
            others are idle observers, holding 100 rows nobody writes.

            After --warmup seconds of writing, --seconds are measured: saves/s (writers' \
            saves that began in the window); merge p50/p99 over all holders (from the start \
            of a save — the writer writes it into the name — to the end of the merge that \
            shows the new name in the holder's main context, its objects-did-change, on the \
            system-wide monotonic clock); and the statements the observers send per remote \
            save, counted by the server: holders and idle observers log in as roles of their \
            own (made for the run, dropped after), and `pg_stat_statements` counts the calls \
            of each role in the benchmark's database between the start of the window and the \
            moment the counts settle after it. Per remote save per observer = calls / (saves \
            in the window × observers). The observers send nothing on purpose and add no \
            observer of the change log of their own (which might make the library read \
            it), so every call counted is the library's.

            Then the checks (exit status 2 when one fails; the figures are printed all the \
            same): every holder's main context must end with the database's names, and one \
            more save — renaming a row each idle observer holds — must reach every idle \
            observer's main context, so that an observer cannot look cheap by not \
            listening.

            Needs `pg_stat_statements` in shared_preload_libraries (scripts/bench-server \
            sets it; a throwaway server started here is asked to load it) and a superuser \
            URL to make the roles; without them the statement figures are `nan`. Each \
            process opens its listener's connection and a pool of at most two (the main \
            context, a writer's transaction): PROCESSES must fit the server's \
            max_connections; the peak is printed. \
            Last line: `RESULT fanout processes=… writers=… saves_per_s=… merge_p50_ms=… \
            merge_p99_ms=… idle_observer_queries_per_save=… holder_queries_per_save=… \
            idle_observer_statements=…` (the last: all the idle observers' statements in the \
            window; one of them may host the relay, which reads the log for the host).
            """)

    @Option(help: "Processes, writers included.")
    var processes = 32

    @Option(help: "Processes that write.")
    var writers = 4

    @Option(help: "Seconds measured.")
    var seconds = 20.0

    @Option(help: "Seconds the writers write before the measured window.")
    var warmup = 2.0

    @Option(help: "Rows in the table.")
    var rows = 100_000

    func validate() throws {
        guard writers >= 1, processes - writers >= 2, processes <= 500 else {
            throw ValidationError("need at least one writer and two other processes (a holder and an idle observer)")
        }
        let layout = FanoutLayout(processes: processes, writers: writers, rows: rows)
        guard rows >= layout.rowsNeeded else {
            throw ValidationError("\(processes) processes need at least \(layout.rowsNeeded) rows")
        }
        guard seconds > 0, seconds <= 3600, warmup >= 0, warmup <= 600 else {
            throw ValidationError("--seconds must be in (0, 3600] and --warmup in [0, 600]")
        }
    }

    func run() throws {
        let layout = FanoutLayout(processes: processes, writers: writers, rows: rows)
        // A process that died must not take this one with it when it is sent a line: the
        // roles made below are dropped on the way out.
        signal(SIGPIPE, SIG_IGN)
        let database = try BenchDatabase(preloading: ["pg_stat_statements"])
        defer { database.drop() }
        let admin = try Connection(database.configuration)
        defer { admin.close() }
        try admin.execute(
            "INSERT INTO users (user_id, name, age) SELECT 'user-' || i, 'Name ' || i, i FROM generate_series(0, $1 - 1) AS i",
            [rows])
        try admin.execute("ANALYZE users")
        let roles = StatementCountingRoles.create([FanoutKind.holder.rawValue, FanoutKind.idle.rawValue], on: admin)
        defer { roles.drop(on: admin) }

        try printHeader(layout, roles: roles, admin: admin, database: database)
        fflush(nil)

        var children: [(kind: FanoutKind, process: BenchProcess)] = []
        defer { children.forEach { $0.process.stop() } }
        for process in 0..<processes {
            let kind = layout.kind(of: process)
            guard let url = roles.configuration(for: kind.rawValue, base: database.configuration)
                .renderedConnectionString()
            else { throw ValidationError("the database configuration cannot be passed to another process") }
            children.append(
                (kind, try BenchProcess(arguments: [
                    "fanout-worker", url, kind.rawValue, String(process), "--writers", String(writers),
                    "--rows", String(rows), "--held-from", String(layout.heldFrom(process: process)),
                ])))
        }
        for (number, child) in children.enumerated() where !Self.skipUntil("ready", child.process) {
            throw ValidationError(
                "process \(number) (\(child.kind.rawValue)) did not start (see its messages above); "
                    + "with many processes, check the server's max_connections")
        }

        // Monotonic nanoseconds: the system-wide clock every process here reads alike.
        let warm = monotonicNanoseconds() + 500_000_000
        let from = warm + Int64(warmup * 1e9)
        let end = from + Int64(seconds * 1e9)
        for child in children { child.process.send("start \(warm) \(from) \(end)") }
        Self.sleep(until: from)
        let before = try roles.snapshot(on: admin)
        var connections = try Self.connections(admin)
        Self.sleep(until: from + (end - from) / 2)
        connections = max(connections, try Self.connections(admin))
        Self.sleep(until: end)
        let after = try roles.settledSnapshot(on: admin)

        // Counting is over. The probe: one save renaming the first row each idle observer
        // holds, which each must merge (it proves they were listening all along).
        let probeBegan = try Self.probe(
            rows: (0..<processes).filter { layout.kind(of: $0) == .idle }.map { layout.heldFrom(process: $0) },
            database.configuration)
        for child in children { child.process.send("finish \(probeBegan)") }
        var reports: [FanoutReport] = []
        for (number, child) in children.enumerated() {
            guard let report = FanoutReport(child.process, kind: child.kind) else {
                throw ValidationError("process \(number) (\(child.kind.rawValue)) ended without reporting")
            }
            reports.append(report)
        }
        let maximum = try admin.query("SELECT current_setting('max_connections')::int")[0].decode(Int.self, at: 0)
        try summarise(reports, layout: layout, roles: roles, before: before, after: after,
                      connections: (connections, maximum))
    }

    /// Prints what is measured, on what: the processes, the objects each holds, the
    /// server's settings and how remote saves' statements are counted.
    func printHeader(
        _ layout: FanoutLayout, roles: StatementCountingRoles, admin: Connection, database: BenchDatabase
    ) throws {
        print(
            "fanout: \(processes) processes on one database (writing: \(writers), holding the written rows: "
                + "\(layout.holders), idle observers: \(layout.idle)); \(format(seconds, 1)) s measured after "
                + "\(format(warmup, 1)) s of warm-up")
        print(
            "each main context holds \(FanoutLayout.heldObjects) of \(rows) users and a controller over "
                + "\(FanoutLayout.controllerRows) rows nobody writes; a save renames one of the \(FanoutLayout.heldObjects) "
                + "users every holder holds")
        print("server: \(try ContentionBenchmark.settings(admin))\(database.isThrowaway ? " (throwaway server)" : "")")
        if let reason = roles.unavailableReason {
            print("statements per remote save: not counted: \(reason)")
        } else {
            print("statements per remote save: counted by pg_stat_statements for the holders' and idle observers' roles")
        }
    }

    /// Prints the table and the RESULT line; exits with 2 when a holder ended out of step
    /// with the database or an idle observer did not merge the probe.
    func summarise(
        _ reports: [FanoutReport], layout: FanoutLayout, roles: StatementCountingRoles,
        before: StatementCountingRoles.Snapshot, after: StatementCountingRoles.Snapshot,
        connections: (peak: Int, maximum: Int)
    ) throws {
        let saves = reports.reduce(0) { $0 + $1.saves }
        let allSaves = reports.reduce(0) { $0 + $1.allSaves }
        let savesPerSecond = Double(saves) / seconds
        let merges = Percentiles(reports.flatMap(\.merges).map { Double($0) / 1000 })
        let timed = reports.reduce(0) { $0 + $1.merges.count }
        let holderReports = reports.filter { $0.kind == .holder }
        let inStep = holderReports.filter { $0.staleRows == 0 }.count
        let idleReports = reports.filter { $0.kind == .idle }
        let probes = idleReports.compactMap(\.probeMilliseconds).filter { $0 >= 0 }

        func statements(_ kind: FanoutKind, _ count: Int) -> (perSave: Double, kinds: [(calls: Int, query: String)]) {
            guard let calls = roles.calls(of: kind.rawValue, from: before, to: after), saves > 0, count > 0 else {
                return (.nan, [])
            }
            return (Double(calls.reduce(0) { $0 + $1.calls }) / Double(saves * count), calls)
        }
        let holders = statements(.holder, layout.holders)
        let idle = statements(.idle, layout.idle)

        print(
            "connections to the database at the peak: \(connections.peak) (max_connections \(connections.maximum))")
        // A relay per role (its key names the user): holders and idle observers log in as
        // roles of their own, so each kind has its relay, and one process of the kind hosts
        // it and reads the log for the others (its statements count among its kind's).
        // Reported as each process finished: a host that ended first hands over.
        let hosts = reports.filter(\.hostsRelay).map(\.kind.rawValue)
        print(
            "relays at the end: \(reports.filter(\.usesRelay).count) of \(reports.count) processes follow one; "
                + "hosted by: \(hosts.isEmpty ? "none" : hosts.joined(separator: ", "))")
        let widths = [7, 10, 8, 9, 14, 14, 24]
        print(Self.row(["kind", "processes", "saves", "saves/s", "merge p50 ms", "merge p99 ms",
                        "statements/remote save", "check"], widths))
        print(Self.row(["writers", "\(writers)", "\(saves)", format(savesPerSecond, 1)], widths))
        print(Self.row(["holders", "\(layout.holders)", "", "", format(merges.p50, 3), format(merges.p99, 3),
                        format(holders.perSave, 3), "\(inStep) of \(layout.holders) in step with the database"], widths))
        print(Self.row(["idle", "\(layout.idle)", "", "", "", "", format(idle.perSave, 3),
                        "\(probes.count) of \(layout.idle) merged the probe (slowest "
                            + "\(format(probes.max() ?? .nan, 1)) ms)"], widths))
        print(
            "(saves that began in the \(format(seconds, 1)) s window, \(allSaves) in all; merges timed in the holders: "
                + "\(timed) of \(saves * layout.holders) — a merge showing several saves of one row times the last)")
        for (kind, figures) in [("holders", holders), ("idle", idle)] where !figures.kinds.isEmpty {
            print("statements of the \(kind) per remote save, per observer:")
            let count = kind == "idle" ? layout.idle : layout.holders
            for statement in figures.kinds {
                let text = statement.query.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                print(
                    String(format: "  %8.3f  ", Double(statement.calls) / Double(max(1, saves * count)))
                        + (text.count > 100 ? String(text.prefix(100)) + "…" : text))
            }
        }
        // All the idle observers' statements in the window (one of them may host the relay,
        // which reads the log for the host).
        let idleCalls = idle.perSave.isNaN ? "nan" : String(idle.kinds.reduce(0) { $0 + $1.calls })
        print(
            "RESULT fanout processes=\(processes) writers=\(writers) saves_per_s=\(format(savesPerSecond, 1)) "
                + "merge_p50_ms=\(format(merges.p50, 3)) merge_p99_ms=\(format(merges.p99, 3)) "
                + "idle_observer_queries_per_save=\(format(idle.perSave, 3)) "
                + "holder_queries_per_save=\(format(holders.perSave, 3)) "
                + "idle_observer_statements=\(idleCalls)")
        if inStep < layout.holders || probes.count < layout.idle {
            printError(
                "fanout: \(layout.holders - inStep) holder(s) ended out of step with the database, "
                    + "\(layout.idle - probes.count) idle observer(s) did not merge the probe save")
            throw ExitCode(2)
        }
    }

    /// Reads lines until `expected` (other lines, such as log messages, are skipped);
    /// false when the process ended or went silent first.
    static func skipUntil(_ expected: String, _ process: BenchProcess) -> Bool {
        while let line = process.nextLine() {
            if line == expected { return true }
        }
        return false
    }

    /// Connections to the benchmark's database now.
    static func connections(_ admin: Connection) throws -> Int {
        try admin.query("SELECT count(*)::bigint FROM pg_stat_activity WHERE datname = current_database()")[0]
            .decode(Int.self, at: 0)
    }

    /// A table row: the first column left-aligned, the others right-aligned to `widths`.
    static func row(_ cells: [String], _ widths: [Int]) -> String {
        cells.enumerated().map { index, cell in
            let width = index < widths.count ? widths[index] : cell.count
            let padding = String(repeating: " ", count: max(0, width - cell.count))
            return index == 0 ? cell + padding : "  " + padding + cell
        }.joined()
    }

    /// Sleeps until `nanoseconds` on the monotonic clock (returns at once when past).
    static func sleep(until nanoseconds: Int64) {
        let wait = nanoseconds - monotonicNanoseconds()
        if wait > 0 { Thread.sleep(forTimeInterval: Double(wait) / 1e9) }
    }

    /// Saves, through the library, one rename of each of `rows` (by age) to the probe name;
    /// returns when the save began (monotonic nanoseconds).
    static func probe(rows: [Int], _ configuration: ConnectionConfiguration) throws -> Int64 {
        let manager = try ContextManager(
            configuration: configuration, entities: [BenchUser.self], maximumConnections: 1,
            automaticallyMergesRemoteChanges: false)
        defer { manager.close() }
        let context = manager.newPrivateContext(name: "probe")
        return try context.performAndWait {
            let users = try BenchUser.fetch(in: context, where: "age IN %@", rows)
            let began = monotonicNanoseconds()
            for user in users { user.name = FanoutWorker.probeName }
            try context.save()
            return began
        }
    }

    func format(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }
}

/// What one fanout process reported at the end.
struct FanoutReport {
    /// What the process did.
    var kind: FanoutKind
    /// Its saves that began in the measured window (writers).
    var saves = 0
    /// All its saves (writers).
    var allSaves = 0
    /// Held rows whose names differed from the database's at the end (holders).
    var staleRows: Int?
    /// Its merge times in microseconds (holders).
    var merges: [Int] = []
    /// From the start of the probe save to its merge here; -1 when it never came (idle).
    var probeMilliseconds: Double?
    /// Whether its listener followed the host's relay at the end, and whether it hosted it.
    var usesRelay = false
    var hostsRelay = false

    /// Reads the report lines up to `done`; nil when the process ended first.
    init?(_ process: BenchProcess, kind: FanoutKind) {
        self.kind = kind
        while let line = process.nextLine() {
            let parts = line.split(separator: " ", maxSplits: 2)
            switch parts.first {
            case "done":
                return
            case "saves" where parts.count == 3:
                saves = Int(parts[1]) ?? 0
                allSaves = Int(parts[2]) ?? 0
            case "stale" where parts.count == 2:
                staleRows = Int(parts[1])
            case "merges":
                merges = parts.count > 1 ? parts[1].split(separator: ",").compactMap { Int($0) } : []
            case "probe" where parts.count == 2:
                probeMilliseconds = Double(parts[1])
            case "relay" where parts.count == 3:
                usesRelay = parts[1] == "true"
                hostsRelay = parts[2] == "true"
            default:
                continue
            }
        }
        return nil
    }
}
