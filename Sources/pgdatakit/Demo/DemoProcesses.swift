import Foundation
import PGDataKit
import Synchronization

/// The demo's worker processes: this program run again as `demo-worker`, its reports read
/// on a thread per worker, its commands written to its standard input. Under `--chaos` a
/// worker can be killed (`SIGKILL`) and replaced by a new process with the same index.
final class DemoProcesses: Sendable {
    /// The latest report of each worker, and the final ones.
    struct Board: Sendable {
        var latest: [Int: WorkerReport] = [:]
        var finals: [Int: WorkerReport] = [:]
        var stopped: Set<Int> = []
        var failures: [Int: String] = [:]
        var exited: Set<Int> = []
        /// The last report of each worker killed under `--chaos`, in kill order.
        var killed: [WorkerReport] = []
        /// When each process (by pid) became ready, by this process's clock (its report
        /// read here, so a little after it listened): it must merge every save that began
        /// after that.
        var readyAt: [Int32: Date] = [:]
        /// The serial number of the process that holds each index now: reports and the
        /// end of output of an older (killed) process of that index change nothing.
        fileprivate var serials: [Int: Int] = [:]
        /// Processes (by serial) whose output ended.
        fileprivate var drained: Set<Int> = []
        /// Processes (by serial) being killed: their end is not a worker's failure.
        fileprivate var killing: Set<Int> = []
    }

    /// A running worker process and the pipe to its standard input.
    private struct Running: Sendable {
        var process: Process
        var input: FileHandle
        var serial: Int
    }

    /// The application name the workers' sessions carry (`PGAPPNAME`), so that chaos
    /// terminates their backends and never this process's.
    static let applicationName = "pgdatakit-demo-worker"

    private let running: Mutex<[Running]>
    private let nextSerial = Atomic<Int>(0)
    private let executable: URL
    private let arguments: @Sendable (Int) -> [String]
    private let environment: [String: String]
    let board = Mutex(Board())

    /// Starts `count` workers against the database at `url` (passed in the environment,
    /// never on the command line where `ps` shows it); `chaos` makes them survive
    /// terminated backends and server restarts (`demo-worker --chaos`).
    init(count: Int, url: String, seed: UInt64, users: Int, posts: Int, chaos: Bool = false) throws {
        executable = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0])
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = url
        environment["PGAPPNAME"] = Self.applicationName
        self.environment = environment
        arguments = { index in
            ["demo-worker", "--index", String(index), "--seed", String(seed), "--users", String(users),
             "--posts", String(posts)] + (chaos ? ["--chaos"] : [])
        }
        running = Mutex([])
        for index in 0..<count {
            let started = try start(index: index)
            running.withLock { $0.append(started) }
        }
    }

    /// Starts the worker process for `index` and the thread that reads its reports.
    private func start(index: Int) throws -> Running {
        let process = Process()
        process.executableURL = executable
        // A replacement draws other numbers than the process it replaces.
        let serial = nextSerial.wrappingAdd(1, ordering: .relaxed).oldValue
        process.arguments = arguments(index)
        process.environment = environment
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        board.withLock { $0.serials[index] = serial }
        try process.run()
        let reader = output.fileHandleForReading
        Thread.detachNewThread { [self] in read(reader, worker: index, serial: serial) }
        return Running(process: process, input: input.fileHandleForWriting, serial: serial)
    }

    private func read(_ output: FileHandle, worker: Int, serial: Int) {
        var buffer = Data()
        while true {
            let chunk = output.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                guard let report = WorkerReport(line: line) else { continue }
                board.withLock { board in
                    guard board.serials[worker] == serial else { return }
                    if report.kind != .failed { board.latest[worker] = report }
                    switch report.kind {
                    case .ready: board.readyAt[report.pid] = Date()
                    case .stopped: board.stopped.insert(worker)
                    case .final: board.finals[worker] = report
                    case .failed: board.failures[worker] = report.message ?? "failed"
                    default: break
                    }
                }
            }
        }
        board.withLock { board in
            board.drained.insert(serial)
            if board.serials[worker] == serial, !board.killing.contains(serial) { board.exited.insert(worker) }
        }
    }

    var count: Int { running.withLock { $0.count } }

    /// Kills worker `index` with `SIGKILL`, waits until its last report is read, records
    /// that report in `Board.killed`, and starts a replacement with the same index.
    /// Returns the killed process's last report (nil when it had sent none).
    ///
    /// - Throws: when the replacement cannot be started.
    @discardableResult
    func killAndReplace(_ index: Int) throws -> WorkerReport? {
        let old = running.withLock { $0[index] }
        // From now on that process's end is not a worker's failure.
        board.withLock { _ = $0.killing.insert(old.serial) }
        kill(old.process.processIdentifier, SIGKILL)
        old.process.waitUntilExit()
        try? old.input.close()
        // Its last reports are still in the pipe until the reader reaches its end.
        let deadline = Date().addingTimeInterval(10)
        while !board.withLock({ $0.drained.contains(old.serial) }), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        let last = board.withLock { board -> WorkerReport? in
            // One killed before its first report had saved nothing.
            let last = board.latest[index]
                ?? WorkerReport(kind: .status, worker: index, pid: old.process.processIdentifier, state: "starting")
            board.killed.append(last)
            board.latest[index] = nil
            return last
        }
        let replacement = try start(index: index)
        running.withLock { $0[index] = replacement }
        return last
    }

    /// Writes a command line to one worker (ignored when it is gone).
    func send(_ command: String, to worker: Int) {
        let data = Data((command + "\n").utf8)
        let input = running.withLock { $0[worker].input }
        try? input.write(contentsOf: data)
    }

    func sendAll(_ command: String) {
        for worker in 0..<count { send(command, to: worker) }
    }

    /// Waits until `done` holds for the board, or `seconds` pass; returns whether it held.
    func wait(seconds: Double, until done: (Board) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if board.withLock({ done($0) }) { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return board.withLock { done($0) }
    }

    /// Closes the workers' input (they stop and end) and waits for them; kills the ones
    /// that do not end within ten seconds.
    func finish() {
        let processes = running.withLock { $0 }
        for worker in processes { try? worker.input.close() }
        let deadline = Date().addingTimeInterval(10)
        for worker in processes {
            let process = worker.process
            while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }
}
