import ArgumentParser
import Foundation
import PGDataKit
import PGDataKitCommands
import Synchronization

struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show every save of every process on a database, live.",
        discussion: """
            Follows the change log of the database, as every context manager does: one line \
            per save of another process with its change-log id, the saving process, the \
            entities and their inserted (+), updated (~) and deleted (-) objects, and the \
            delay from the start of the saving transaction to its arrival here. On a terminal \
            a table of totals per entity and per process is redrawn twice a second above the \
            last saves. Works on any database with the library's change log, whatever its \
            entities. Stops on Ctrl-C, after --duration seconds or after --count saves.

            With --since TOKEN or --reader NAME it follows the change log's history instead: \
            first every save after the token (or after where that history reader last \
            acknowledged), then live — this process's own included, each once, in commit \
            order — printing the history token after each save and, on exit, the token to go \
            on from (`Last token: …`). --acknowledge makes the watch that reader: it registers \
            the reader when missing (with every record the log still holds) and acknowledges \
            each save it prints.

            Exit status: 0 when stopped by Ctrl-C, --duration or --count; 1 when the database \
            cannot be reached or has no change log (run `pgdatakit migrate`), when the reader \
            does not exist, or when the history after the token was pruned (the message names \
            the oldest token still held).
            """)

    @Option(help: "Follow the history after this token (printed by an earlier watch, or a record's historyToken).")
    var since: String?

    @Option(help: "Follow the history after where this history reader last acknowledged.")
    var reader: String?

    @Flag(help: "With --reader: acknowledge each save as that reader (registering it when missing).")
    var acknowledge = false

    @Option(help: "Stop after this many seconds (default: until Ctrl-C).")
    var duration: Double?

    @Option(help: "Stop after this many saves.")
    var count: Int?

    @Flag(help: "Print one line per save even on a terminal (no redrawn table).")
    var plain = false

    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        if since != nil, reader != nil { throw ValidationError("--since and --reader cannot be used together") }
        if acknowledge, reader == nil { throw ValidationError("--acknowledge needs --reader") }
        if let since {
            do {
                _ = try HistoryToken(parsing: since)
            } catch {
                throw ValidationError("--since: \(error)")
            }
        }
    }

    func run() throws {
        if let duration, !(duration > 0) { throw ValidationError("--duration must be positive") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        let (url, server) = try database.resolve()
        defer { try? server?.stop() }
        if server != nil {
            printError("Nothing else writes to a throwaway server: set DATABASE_URL to watch a shared database.")
            let connection = try Connection(url: url)
            defer { connection.close() }
            try Migrator.installLibrarySchema(on: connection)
        }
        // No entities: change records name their entities themselves.
        let coordinator = try StoreCoordinator(
            model: try Model(entities: []), configuration: ConnectionConfiguration(url), maximumConnections: 1)
        defer { coordinator.close() }

        let live = !plain && isatty(STDOUT_FILENO) == 1
        let state = WatchState()
        let stop = StopSignal()
        let interrupt = stop.onInterrupt()
        defer { interrupt.cancel() }
        let watching = "Watching \(ConnectionConfiguration(url)) — Ctrl-C stops."
        var history: HistoryWatch?
        var token: ObserverToken?
        if since != nil || reader != nil {
            // (Replayed from the token: the lines may come at once.)
            if !live { printLine(watching) }
            history = try HistoryWatch.start(self, coordinator: coordinator, state: state, live: live, stop: stop)
        } else {
            token = coordinator.observeRemoteChanges { record in
                let seen = state.add(record, arrived: Date())
                if !live { printLine(WatchState.line(for: record, delay: seen.delay)) }
                if let count, seen.total >= count { stop.fire() }
            }
            // Once listening: what is saved from now on is shown.
            if !live { printLine(watching) }
        }
        defer { token?.cancel() }
        let deadline = duration.map { Date().addingTimeInterval($0) }
        if live { FileHandle.standardOutput.write(Data("\u{1B}[2J".utf8)) }  // a clear screen to draw on
        while !stop.isFired, deadline.map({ Date() < $0 }) ?? true {
            if live { Terminal.redraw(state.frame(header: "pgdatakit watch \(ConnectionConfiguration(url))")) }
            stop.wait(upTo: live ? 0.5 : 0.2)
        }
        let failure = history?.finish()
        if live { Terminal.redraw(state.frame(header: "pgdatakit watch — stopped")) }
        printLine(state.summary())
        if let last = history?.lastToken { printLine("Last token: \(last)") }
        if let failure {
            if let expired = failure as? HistoryError, expired.code == .historyExpired, let oldest = expired.oldestAvailable {
                printError(
                    "Error: \(failure)\nRecords were pruned unread; go on from what is left with --since \(oldest)"
                        + (reader.map { " (or acknowledge it as \($0))" } ?? ""))
            } else {
                printError("Error: \(failure)")
            }
            throw ExitCode(1)
        }
    }
}

/// `watch --since` / `--reader`: the history sequence, run in a task until the watch
/// stops.
final class HistoryWatch: Sendable {
    /// Where the watch stands, and the error that ended it.
    private let outcome: Mutex<(token: HistoryToken?, error: (any Error)?)>
    /// Signalled when the task has ended.
    private let ended = DispatchSemaphore(value: 0)
    private let task = Mutex<Task<Void, Never>?>(nil)

    private init(
        _ sequence: HistorySequence, from start: HistoryToken?, acknowledgingAs reader: HistoryReader?, count: Int?,
        state: WatchState, live: Bool, stop: StopSignal
    ) {
        outcome = Mutex((start, nil))
        let task = Task { [self] in
            defer { ended.signal() }
            var records = sequence.makeAsyncIterator()
            do {
                while let record = try await records.next() {
                    let seen = state.add(record, arrived: Date())
                    if !live {
                        let token = record.historyToken.map { "  \($0)" } ?? ""
                        printLine(WatchState.line(for: record, delay: seen.delay) + token)
                    }
                    try await reader?.acknowledge(record)
                    outcome.withLock { $0.token = record.historyToken }
                    if let count, seen.total >= count { break }
                }
            } catch {
                outcome.withLock { $0.error = error }
            }
            if let token = records.token { outcome.withLock { $0.token = token } }
            stop.fire()
        }
        self.task.withLock { $0 = task }
    }

    /// Starts following the history the command names.
    ///
    /// - Throws: `HistoryError.readerNotRegistered` (without --acknowledge), and what
    ///   looking up or registering the reader throws.
    static func start(
        _ command: WatchCommand, coordinator: StoreCoordinator, state: WatchState, live: Bool, stop: StopSignal
    ) throws -> HistoryWatch {
        if let text = command.since {
            let token = try HistoryToken(parsing: text)
            return HistoryWatch(
                coordinator.history(after: token), from: token, acknowledgingAs: nil, count: command.count,
                state: state, live: live, stop: stop)
        }
        guard let name = command.reader else { throw ValidationError("--since or --reader is needed") }
        let reader =
            command.acknowledge
            ? try coordinator.historyReader(named: name) : try coordinator.existingHistoryReader(named: name)
        return HistoryWatch(
            reader.records(), from: try reader.acknowledgedToken(), acknowledgingAs: command.acknowledge ? reader : nil,
            count: command.count, state: state, live: live, stop: stop)
    }

    /// Stops the sequence and waits for it; the error that ended it, if any.
    func finish() -> (any Error)? {
        task.withLock { $0?.cancel() }
        ended.wait()
        ended.signal()  // a second call returns at once
        return outcome.withLock { $0.error }
    }

    /// Where the watch stands: the position after the last save printed (or further, when
    /// reads since found nothing), to go on from with --since.
    var lastToken: HistoryToken? { outcome.withLock { $0.token } }
}

/// What `watch` has seen so far.
final class WatchState: Sendable {
    private struct Totals {
        var inserted = 0, updated = 0, deleted = 0, saves = 0
    }

    private struct Contents {
        var entities: [String: Totals] = [:]
        var processes: [Int32: Int] = [:]
        var delays: [Double] = []
        var recent: [String] = []
        var total = 0
    }

    private let contents = Mutex(Contents())

    /// Records a save; returns its delay in milliseconds and the number of saves so far.
    func add(_ record: ChangeRecord, arrived: Date) -> (delay: Double, total: Int) {
        let delay = max(0, arrived.timeIntervalSince(record.time) * 1000)
        return contents.withLock { contents in
            for (entity, counts) in Self.counts(record.changes) {
                var totals = contents.entities[entity, default: Totals()]
                totals.inserted += counts.inserted
                totals.updated += counts.updated
                totals.deleted += counts.deleted
                totals.saves += 1
                contents.entities[entity] = totals
            }
            contents.processes[record.originProcessID, default: 0] += 1
            contents.delays.append(delay)
            if contents.delays.count > 10_000 { contents.delays.removeFirst(5_000) }
            contents.recent.append(Self.line(for: record, delay: delay))
            if contents.recent.count > 10 { contents.recent.removeFirst() }
            contents.total += 1
            return (delay, contents.total)
        }
    }

    /// Inserted, updated and deleted objects per entity of one save.
    static func counts(_ changes: ContextChanges) -> [String: (inserted: Int, updated: Int, deleted: Int)] {
        var result: [String: (inserted: Int, updated: Int, deleted: Int)] = [:]
        for id in changes.inserted { result[id.entityName, default: (0, 0, 0)].inserted += 1 }
        for id in changes.updated { result[id.entityName, default: (0, 0, 0)].updated += 1 }
        for id in changes.deleted { result[id.entityName, default: (0, 0, 0)].deleted += 1 }
        return result
    }

    /// `Post +1 ~0 -0, User +2 ~1 -0`, or `(no objects)`.
    static func entitySummary(of changes: ContextChanges) -> String {
        let entities = counts(changes).sorted { $0.key < $1.key }
            .map { "\($0.key) +\($0.value.inserted) ~\($0.value.updated) -\($0.value.deleted)" }
            .joined(separator: ", ")
        return entities.isEmpty ? "(no objects)" : entities
    }

    /// `#42  pid 1234  Post +1 ~0 -0, User +2 ~1 -0  3.2 ms`
    static func line(for record: ChangeRecord, delay: Double) -> String {
        "#\(record.id)  pid \(record.originProcessID)  \(entitySummary(of: record.changes))  " + String(format: "%.1f ms", delay)
    }

    /// The live view: totals per entity and per process, delay percentiles, last saves.
    func frame(header: String) -> [String] {
        contents.withLock { contents in
            var lines = [header, ""]
            lines.append(Terminal.row(["ENTITY", "SAVES", "INSERTED", "UPDATED", "DELETED"], widths: [16, 8, 10, 10, 10]))
            for (entity, totals) in contents.entities.sorted(by: { $0.key < $1.key }) {
                lines.append(Terminal.row(
                    [entity, "\(totals.saves)", "\(totals.inserted)", "\(totals.updated)", "\(totals.deleted)"],
                    widths: [16, 8, 10, 10, 10]))
            }
            lines.append("")
            let processes = contents.processes.sorted { $0.key < $1.key }.map { "pid \($0.key): \($0.value)" }
            lines.append("saves by process: " + (processes.isEmpty ? "none yet" : processes.joined(separator: ", ")))
            let sorted = contents.delays.sorted()
            if !sorted.isEmpty {
                let p50 = sorted[(sorted.count - 1) / 2], p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
                lines.append(String(format: "delay since the save began: p50 %.1f ms, p99 %.1f ms", p50, p99))
            }
            lines.append("")
            lines.append("last saves:")
            lines.append(contentsOf: contents.recent.map { "  " + $0 })
            return lines
        }
    }

    /// `Watched 12 saves from 3 processes.`
    func summary() -> String {
        contents.withLock { "Watched \($0.total) saves from \($0.processes.count) processes." }
    }
}

/// A few lines of ANSI: redraw a frame in place, pad table cells.
enum Terminal {
    /// Moves to the top left, writes the lines, clears what is left of the screen.
    static func redraw(_ lines: [String]) {
        let text = "\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\n") + "\n\u{1B}[J"
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    static func row(_ cells: [String], widths: [Int]) -> String {
        zip(cells, widths).map { cell, width in
            cell.count >= width ? cell + " " : cell.padding(toLength: width, withPad: " ", startingAt: 0)
        }.joined()
    }
}
