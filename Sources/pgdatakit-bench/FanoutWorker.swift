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
/// parent line by line on the system-wide monotonic clock (`monotonicNanoseconds()`).
///
/// It prints `ready` once its main context holds its rows and its controller has fetched,
/// then reads `start <warm> <from> <end>`. A writer saves from `warm` to `end`, writing
/// into each name when its save began. A holder notes, when a merge into its main
/// context shows a held row with a new name whose save began in [`from`, `end`), the time
/// from that save's start to the end of the merge. An idle observer does nothing at all:
/// no observer of the change log of its own, which could make the library read it.
/// On `finish`, after the parent's last measurement: a writer prints `saves <in window>
/// <all>`; a holder checks its held rows against the database (`stale <rows that differ>`)
/// and prints `merges <µs,…>`; an idle observer waits for the parent's probe save (which
/// renames its first held row to `probe`; `finish <when the probe save began>`) to reach
/// its main context and prints `probe <ms>` (-1 when it did not within 10 s). Then
/// `relay <follows the host's relay> <hosts it>` and `done`.
struct FanoutWorker: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout-worker", abstract: "A process of `fanout` (not run by hand).", shouldDisplay: false)

    @Argument(help: "The database (libpq key=value string).") var databaseURL: String
    @Argument(help: "writer, holder or idle.") var kind: FanoutKind
    @Argument(help: "The writer's number (its share of the hot rows).") var index: Int
    @Option(help: "Writer processes in the run.") var writers: Int
    @Option(help: "Rows in the table.") var rows: Int
    @Option(help: "The first row (by age) of those the main context holds.") var heldFrom: Int

    /// The name a probe save gives the first row an idle observer holds.
    static let probeName = "probe"

    func run() throws {
        // The listener has a connection of its own; the pool serves the main context and a
        // writer's transaction (one connection most of the time, two at most).
        let configuration = ConnectionConfiguration(databaseURL)
        let manager = try ContextManager(configuration: configuration, entities: [BenchUser.self], maximumConnections: 2)
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

        // The merges a holder or idle observer sees, from its main context's
        // objects-did-change (posted when a merge is done), as any application would.
        let tally = FanoutTally()
        let token = main.observeObjectsDidChange { changes in
            let now = monotonicNanoseconds()
            for id in changes.updated where heldIDs.contains(id) {
                guard let name = (try? main.existingObject(with: id) as? BenchUser)?.name else { continue }
                tally.merged(id, name: name, at: now)
            }
        }
        defer { token.cancel() }
        emitLine("ready")

        guard let start = readLine()?.split(separator: " "), start.count == 4, start[0] == "start",
            let warm = Int64(start[1]), let from = Int64(start[2]), let end = Int64(start[3])
        else { throw ValidationError("expected `start <warm> <from> <end>` from the parent") }
        tally.open(from: from, end: end)
        let saves = kind == .writer ? try write(manager, warm: warm, from: from, end: end) : (measured: 0, all: 0)

        var probeBegan = Int64.max
        while let line = readLine() {
            let parts = line.split(separator: " ")
            guard parts.first == "finish" else { continue }
            probeBegan = parts.count > 1 ? Int64(parts[1]) ?? .max : .max
            break
        }
        main.performAndWait {}  // the merges queued so far are done
        var text: String
        switch kind {
        case .writer:
            text = "saves \(saves.measured) \(saves.all)\n"
        case .holder:
            text = "stale \(try staleRows(held: heldIDs, main: main, configuration: configuration))\n"
            text += "merges " + tally.merges.map(String.init).joined(separator: ",") + "\n"
        case .idle:
            let merged = tally.waitForProbe(timeout: .seconds(10))
            text = "probe \(merged.map { String(format: "%.3f", Double(max(0, $0 - probeBegan)) / 1e6) } ?? "-1")\n"
        }
        text += "relay \(manager.coordinator.listenerUsesRelay) \(manager.coordinator.hostsListenerRelay)\n"
        text += "done\n"
        FileHandle.standardOutput.write(Data(text.utf8))
        withExtendedLifetime((held, controller)) {}
    }

    /// Renames this writer's share of the hot rows, one per save, from `warm` until `end`
    /// (monotonic nanoseconds), writing each save's start into the name; returns the saves
    /// that began in [`from`, `end`) and all of them.
    func write(_ manager: ContextManager, warm: Int64, from: Int64, end: Int64) throws -> (measured: Int, all: Int) {
        let context = manager.newPrivateContext(name: "writer \(index)")
        let mine = try context.performAndWait {
            try BenchUser.fetch(in: context, where: "age >= 0 AND age < %d", FanoutLayout.heldObjects)
                .filter { ($0.age ?? -1) % writers == index }
        }
        guard !mine.isEmpty else { throw ValidationError("writer \(index) has no rows to write") }
        let wait = warm - monotonicNanoseconds()
        if wait > 0 { Thread.sleep(forTimeInterval: Double(wait) / 1e9) }
        var measured = 0
        var all = 0
        while true {
            let began = monotonicNanoseconds()
            guard began < end else { break }
            let user = mine[all % mine.count]
            let name = FanoutTally.name(writer: index, save: all, began: began)
            try context.performAndWait {
                user.name = name
                try context.save()
            }
            all += 1
            if began >= from { measured += 1 }
        }
        return (measured, all)
    }

    /// How many held rows' names differ from the database's once the merges have had up
    /// to 10 s to arrive (the writers have stopped: the database's names are final). Read
    /// on a plain connection, after the parent's last count of statements.
    func staleRows(held: Set<ObjectID>, main: ManagedObjectContext, configuration: ConnectionConfiguration) throws -> Int {
        let connection = try Connection(configuration)
        defer { connection.close() }
        var names: [Int64: String?] = [:]
        for row in try connection.query("SELECT id, name FROM users WHERE id = ANY($1)", [held.compactMap(\.primaryKey)]) {
            names[try row.decode(Int64.self, at: 0)] = try row.decode(String?.self, at: 1)
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            let stale = main.performAndWait {
                held.filter { id in
                    guard let key = id.primaryKey, let user = try? main.existingObject(with: id) as? BenchUser else {
                        return true
                    }
                    return names[key] != .some(user.name)
                }.count
            }
            if stale == 0 || ContinuousClock.now >= deadline { return stale }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }
}

/// What one fanout process sees of the merges into its main context: a holder's merge
/// times, an idle observer's probe.
final class FanoutTally: Sendable {
    private struct State {
        var from = Int64.max
        var end = Int64.max
        var merges: [Int] = []
        var lastNames: [ObjectID: String] = [:]
        var probe: Int64?
    }

    private let state = Mutex(State())
    private let probeMerged = DispatchSemaphore(value: 0)

    /// The name a writer gives a row: who saved it, and when the save began.
    static func name(writer: Int, save: Int, began: Int64) -> String {
        "writer \(writer) save \(save) began \(began)"
    }

    /// Sets the measured window (monotonic nanoseconds).
    func open(from: Int64, end: Int64) {
        state.withLock {
            $0.from = from
            $0.end = end
        }
    }

    /// Notes a merge that showed a held row named `name` at `now`: a merge time when the
    /// name is new and its save began in the window (a merge showing several saves of one
    /// row times the last), the probe's arrival when it is the probe.
    func merged(_ id: ObjectID, name: String, at now: Int64) {
        let probe = state.withLock { state -> Bool in
            guard state.lastNames[id] != name else { return false }
            state.lastNames[id] = name
            if name == FanoutWorker.probeName {
                if state.probe == nil { state.probe = now }
                return true
            }
            guard let began = name.split(separator: " ").last.flatMap({ Int64($0) }),
                began >= state.from, began < state.end
            else { return false }
            state.merges.append(Int((now - began) / 1000))
            return false
        }
        if probe { probeMerged.signal() }
    }

    /// Merge times so far, in microseconds.
    var merges: [Int] { state.withLock { $0.merges } }

    /// When the probe's merge into the main context was done (monotonic nanoseconds), or
    /// nil when it was not within `timeout`.
    func waitForProbe(timeout: Duration) -> Int64? {
        if state.withLock({ $0.probe }) == nil {
            _ = probeMerged.wait(timeout: .now() + .milliseconds(Int(timeout.components.seconds * 1000)))
        }
        return state.withLock { $0.probe }
    }
}
