import Foundation
import PGDataKit
import Synchronization

/// The demo's worker processes: this program run again as `demo-worker`, its reports read
/// on a thread per worker, its commands written to its standard input.
final class DemoProcesses: Sendable {
    /// The latest report of each worker, and the final ones.
    struct Board: Sendable {
        var latest: [Int: WorkerReport] = [:]
        var finals: [Int: WorkerReport] = [:]
        var stopped: Set<Int> = []
        var failures: [Int: String] = [:]
        var exited: Set<Int> = []
    }

    private let processes: [Process]
    private let inputs: [FileHandle]
    let board = Mutex(Board())

    /// Starts `count` workers against the database at `url` (passed in the environment,
    /// never on the command line where `ps` shows it).
    init(count: Int, url: String, seed: UInt64, users: Int, posts: Int) throws {
        let executable = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0])
        var processes: [Process] = []
        var inputs: [FileHandle] = []
        var outputs: [FileHandle] = []
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = url
        for index in 0..<count {
            let process = Process()
            process.executableURL = executable
            process.arguments = [
                "demo-worker", "--index", String(index), "--seed", String(seed), "--users", String(users),
                "--posts", String(posts),
            ]
            process.environment = environment
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            processes.append(process)
            inputs.append(input.fileHandleForWriting)
            outputs.append(output.fileHandleForReading)
        }
        self.processes = processes
        self.inputs = inputs
        for (index, output) in outputs.enumerated() {
            Thread.detachNewThread { [self] in read(output, worker: index) }
        }
    }

    private func read(_ output: FileHandle, worker: Int) {
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
                    if report.kind != .failed { board.latest[worker] = report }
                    switch report.kind {
                    case .stopped: board.stopped.insert(worker)
                    case .final: board.finals[worker] = report
                    case .failed: board.failures[worker] = report.message ?? "failed"
                    default: break
                    }
                }
            }
        }
        board.withLock { _ = $0.exited.insert(worker) }
    }

    var count: Int { processes.count }

    /// Writes a command line to one worker (ignored when it is gone).
    func send(_ command: String, to worker: Int) {
        let data = Data((command + "\n").utf8)
        try? inputs[worker].write(contentsOf: data)
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
        for input in inputs { try? input.close() }
        let deadline = Date().addingTimeInterval(10)
        for process in processes {
            while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }
}
