import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// This program run again as one of its hidden subcommands (`latency-listener`,
/// `throughput-writer`, `controller-writer`), with a pipe to its standard input and one
/// from its standard output, read line by line.
final class BenchProcess {
    private let pid: pid_t
    private let input: FileHandle
    private let output: FileHandle
    private var buffer = Data()
    private var stopped = false

    init(arguments: [String]) throws {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var toChild: [Int32] = [-1, -1]
        var fromChild: [Int32] = [-1, -1]
        guard pipe(&toChild) == 0 else { throw ValidationError("pipe failed") }
        guard pipe(&fromChild) == 0 else {
            close(toChild[0])
            close(toChild[1])
            throw ValidationError("pipe failed")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addclose(&actions, toChild[1])
        posix_spawn_file_actions_addclose(&actions, fromChild[0])
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(toChild[0])
        close(fromChild[1])
        guard result == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw ValidationError("could not start \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
        self.input = FileHandle(fileDescriptor: toChild[1], closeOnDealloc: true)
        self.output = FileHandle(fileDescriptor: fromChild[0], closeOnDealloc: true)
    }

    /// Writes a line to the process's standard input. A process that has ended is not an
    /// error here (with SIGPIPE ignored, the write fails quietly): the caller finds out
    /// when it reads what the process should have answered.
    func send(_ line: String) {
        try? input.write(contentsOf: Data((line + "\n").utf8))
    }

    /// The next line, or nil when the process ended or printed nothing for 30 seconds.
    func nextLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            var descriptor = pollfd(fd: output.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 30_000) > 0 else { return nil }
            let chunk = output.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    /// The time on the line `<kind> <index> <nanoseconds>`, skipping other lines.
    func time(of kind: String, _ index: Int) throws -> Int64 {
        while let line = nextLine() {
            let parts = line.split(separator: " ")
            if parts.count == 3, parts[0] == kind, Int(parts[1]) == index, let time = Int64(parts[2]) {
                return time
            }
        }
        throw ValidationError("the other process ended or went silent before reporting \(kind) \(index)")
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        try? input.close()
        kill(pid, SIGTERM)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

    deinit { stop() }
}
