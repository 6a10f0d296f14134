import ArgumentParser
import Foundation
import PGDataKit
import Synchronization

/// What one process of the fanout benchmark does.
enum FanoutKind: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// Renames its share of the hot rows, one per save in a private context, as fast as
    /// it can; its main context holds rows nobody writes.
    case writer
    /// Holds the hot rows in its main context: its merges are timed.
    case holder
    /// Holds rows nobody writes: the statements it sends per remote save are counted.
    case idle
}

/// Which rows each process of the fanout benchmark holds and writes. A row's `age` is its
/// number (0-based) and never changes; writers change only `name`.
///
/// - rows 0..<100: the hot rows. Writer `w` renames those whose number is `w` modulo the
///   writer count; every holder holds all of them.
/// - rows 100·(p+1)..<100·(p+2): held by process `p` when it is a writer or an idle
///   observer (nobody writes them).
/// - the last 20 rows: every process's controller (`age` in that range; nobody writes
///   them, and no save changes `age`, so no controller needs the database's word on a
///   remote save).
struct FanoutLayout {
    /// Objects each main context holds.
    static let heldObjects = 100
    /// Rows each process's controller shows.
    static let controllerRows = 20

    let processes: Int
    let writers: Int
    let rows: Int

    /// Processes that hold the hot rows: half the non-writers, rounded down.
    var holders: Int { (processes - writers) / 2 }
    /// Processes that hold only rows nobody writes.
    var idle: Int { processes - writers - holders }
    /// The table must be at least this large.
    var rowsNeeded: Int { Self.heldObjects * (processes + 1) + Self.controllerRows }

    /// Processes 0..<writers write, then come the holders, then the idle observers.
    func kind(of process: Int) -> FanoutKind {
        process < writers ? .writer : process < writers + holders ? .holder : .idle
    }

    /// The first row of the 100 the process's main context holds.
    func heldFrom(process: Int) -> Int {
        kind(of: process) == .holder ? 0 : Self.heldObjects * (process + 1)
    }
}

/// One process of the fanout benchmark (`pgdatakit-bench fanout-worker`), talking to the
/// parent line by line: it prints `ready` once its main context holds its rows and its
/// controller has fetched; then reads `start <warm> <from> <end>` (seconds since 1970);
/// a writer saves from `warm` to `end`; every process counts the records of other
/// processes' saves its listener delivers; a holder times, for each record of a save that
/// began in [`from`, `end`) and changed objects it holds, the span from the start of the
/// saving transaction (`ChangeRecord.time`, the server's clock) to the end of the merge
/// into its main context. On `finish` it prints `saves <in window> <all>`, `records
/// <all>`, `merges <µs,…>` (holders) and `done`.
struct FanoutWorker: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout-worker", abstract: "A process of `fanout` (not run by hand).", shouldDisplay: false)

    @Argument(help: "The database (libpq key=value string).") var databaseURL: String
    @Argument(help: "writer, holder or idle.") var kind: FanoutKind
    @Argument(help: "The writer's number (its share of the hot rows).") var index: Int
    @Option(help: "Writer processes in the run.") var writers: Int
    @Option(help: "Rows in the table.") var rows: Int
    @Option(help: "The first row (by age) of those the main context holds.") var heldFrom: Int

    func run() throws {
        // A listener, the main context's connection, and a writer's transaction.
        let manager = try ContextManager(
            configuration: ConnectionConfiguration(databaseURL), entities: [BenchUser.self], maximumConnections: 2)
        defer { manager.close() }
        let main = manager.mainContext
        let held = try main.performAndWait {
            try BenchUser.fetch(in: main, where: "age >= %d AND age < %d", heldFrom, heldFrom + FanoutLayout.heldObjects)
        }
        guard held.count == FanoutLayout.heldObjects else {
            throw ValidationError("rows \(heldFrom)..<\(heldFrom + FanoutLayout.heldObjects) are not all there")
        }
        let heldIDs = main.performAndWait { Set(held.map(\.objectID)) }
        let controller = ManagedObjectController(
            fetchRequest: FetchRequest<BenchUser>(
                predicate: try FetchPredicate(
                    format: "age >= %d AND age < %d", rows - FanoutLayout.controllerRows, rows),
                sortDescriptors: [FetchSortDescriptor("age")]),
            context: main)
        try main.performAndWait { try controller.performFetch() }

        let tally = FanoutTally()
        let measuresMerges = kind == .holder
        // Registered after the manager's own observer, which queues the merge on the main
        // context: this block is queued behind it, so it runs when that merge is done.
        let token = manager.coordinator.observeRemoteChanges { record in
            guard tally.received(record), measuresMerges, !heldIDs.isDisjoint(with: record.changes.updated) else {
                return
            }
            let began = record.time
            main.perform { tally.merged(after: Date().timeIntervalSince(began)) }
        }
        defer { token.cancel() }
        emitLine("ready")

        guard let start = readLine()?.split(separator: " "), start.count == 4, start[0] == "start",
            let warm = Double(start[1]), let from = Double(start[2]), let end = Double(start[3])
        else { throw ValidationError("expected `start <warm> <from> <end>` from the parent") }
        tally.open(from: Date(timeIntervalSince1970: from), end: Date(timeIntervalSince1970: end))
        let saves =
            kind == .writer
            ? try write(
                manager, warm: Date(timeIntervalSince1970: warm), from: Date(timeIntervalSince1970: from),
                end: Date(timeIntervalSince1970: end))
            : (measured: 0, all: 0)

        while let line = readLine(), line != "finish" {}
        main.performAndWait {}  // the merges queued so far are done
        var text = "saves \(saves.measured) \(saves.all)\nrecords \(tally.records)\n"
        if measuresMerges {
            text += "merges " + tally.merges.map(String.init).joined(separator: ",") + "\n"
        }
        text += "done\n"
        FileHandle.standardOutput.write(Data(text.utf8))
        withExtendedLifetime((held, controller)) {}
    }

    /// Renames this writer's share of the hot rows, one per save, from `warm` until
    /// `end`; returns the saves that began in [`from`, `end`) and all of them.
    func write(_ manager: ContextManager, warm: Date, from: Date, end: Date) throws -> (measured: Int, all: Int) {
        let context = manager.newPrivateContext(name: "writer \(index)")
        let mine = try context.performAndWait {
            try BenchUser.fetch(in: context, where: "age >= 0 AND age < %d", FanoutLayout.heldObjects)
                .filter { ($0.age ?? -1) % writers == index }
        }
        guard !mine.isEmpty else { throw ValidationError("writer \(index) has no rows to write") }
        let wait = warm.timeIntervalSinceNow
        if wait > 0 { Thread.sleep(forTimeInterval: wait) }
        var measured = 0
        var all = 0
        while true {
            let began = Date()
            guard began < end else { break }
            let user = mine[all % mine.count]
            let name = "writer \(index) save \(all)"
            try context.performAndWait {
                user.name = name
                try context.save()
            }
            all += 1
            if began >= from { measured += 1 }
        }
        return (measured, all)
    }
}

/// What one fanout process counts: the records its listener delivered, and a holder's
/// merge times.
final class FanoutTally: Sendable {
    private struct State {
        var from = Date.distantFuture
        var end = Date.distantFuture
        var records = 0
        var merges: [Int] = []
    }

    private let state = Mutex(State())

    /// Sets the measured window.
    func open(from: Date, end: Date) {
        state.withLock {
            $0.from = from
            $0.end = end
        }
    }

    /// Counts a record; whether its saving transaction began in the measured window.
    func received(_ record: ChangeRecord) -> Bool {
        state.withLock {
            $0.records += 1
            return record.time >= $0.from && record.time < $0.end
        }
    }

    /// Notes a merge that ended `seconds` after its save began.
    func merged(after seconds: TimeInterval) {
        state.withLock { $0.merges.append(Int((seconds * 1e6).rounded())) }
    }

    /// Records delivered so far.
    var records: Int { state.withLock { $0.records } }
    /// Merge times so far, in microseconds.
    var merges: [Int] { state.withLock { $0.merges } }
}
