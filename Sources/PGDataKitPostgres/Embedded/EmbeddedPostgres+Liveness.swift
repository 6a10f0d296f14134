import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension EmbeddedPostgres {
    /// Whether a server started earlier is still there.
    public enum Liveness: Sendable, Equatable {
        /// The postmaster runs and answers at `url` as this server (same data directory).
        case running
        /// The postmaster process is gone: killed, crashed or stopped behind our back, or
        /// `stop()` was called. Its folder may still be there; `stop()` removes it.
        case dead
        /// The postmaster process exists but does not answer at `url` as this server
        /// (it is starting or shutting down, refuses connections, or another server
        /// took the port); `reason` says what the check saw.
        case notAnswering(reason: String)
    }

    /// Checks that the server is alive: the process named in `data/postmaster.pid`
    /// exists (and is not a zombie left for its parent to reap), and a connection to
    /// `url` reaches a server whose data directory is this server's.
    ///
    /// Use it before handing out the URL of a server started by another process, which
    /// may have died since (`pgdatakit db url` does).
    ///
    /// For example:
    ///
    /// ```swift
    /// let server = try EmbeddedPostgres.attach(to: directory)
    /// if server.liveness() != .running { try server.stop() }
    /// ```
    public func liveness() -> Liveness {
        guard !isStopped, postmasterIsAlive() else { return .dead }
        let configuration = ConnectionConfiguration(url, overrides: ["connect_timeout": "5"])
        do {
            let connection = try Connection(configuration)
            defer { connection.close() }
            let reported = try connection.query("SELECT current_setting('data_directory')")[0]
                .decode(String.self, at: 0)
            guard Self.samePath(reported, dataDirectory.path) else {
                return .notAnswering(reason: "\(url) is served from \(reported), not \(dataDirectory.path)")
            }
            return .running
        } catch {
            // The process may have died while we connected.
            return postmasterIsAlive() ? .notAnswering(reason: "\(error)") : .dead
        }
    }

    /// Whether the postmaster named in `data/postmaster.pid` is a live process.
    ///
    /// `kill(pid, 0)` alone is not enough: a killed postmaster stays a zombie until its
    /// parent (often PID 1, which in containers may never reap) collects it, and a pid
    /// can be reused. Where `/proc` shows the process, it must not be a zombie and must
    /// have this server's data directory on its command line.
    func postmasterIsAlive() -> Bool {
        let pidFile = dataDirectory.appendingPathComponent("postmaster.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8),
            let firstLine = text.split(separator: "\n").first,
            let pid = pid_t(firstLine.trimmingCharacters(in: .whitespaces)), pid > 0
        else { return false }
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        let proc = "/proc/\(pid)"
        guard FileManager.default.fileExists(atPath: proc) else { return true }  // no /proc here
        guard !Self.isZombie(proc) else { return false }
        guard let commandLine = Self.readProcFile(proc + "/cmdline") else { return false }
        let arguments = commandLine.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return arguments.contains { Self.samePath($0, dataDirectory.path) }
    }

    /// The processes that still work in this server's data directory although its
    /// postmaster is gone: the postmaster's children (backends, checkpointer, …) after a
    /// `kill -9`, which keep its shared memory, and so keep PostgreSQL from starting
    /// again, until they exit. A busy backend notices its postmaster's death only when it
    /// next waits, which can be long.
    ///
    /// PostgreSQL's processes run with the data directory as working directory; a
    /// process counts when that is its working directory and its program is `postgres`
    /// (a shell that `cd`ed there does not). Zombies (exited, not reaped) do not count.
    /// Empty without `/proc`: PostgreSQL's own start-up check then decides.
    func remainingServerProcesses() -> [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        var found: [pid_t] = []
        for entry in entries {
            guard let pid = pid_t(entry), pid > 0, pid != getpid() else { continue }
            let proc = "/proc/\(entry)"
            guard let workingDirectory = try? FileManager.default.destinationOfSymbolicLink(atPath: proc + "/cwd"),
                Self.samePath(workingDirectory, dataDirectory.path),
                let program = try? FileManager.default.destinationOfSymbolicLink(atPath: proc + "/exe"),
                // A binary replaced by a package upgrade reads "…/postgres (deleted)".
                URL(fileURLWithPath: program).lastPathComponent.hasPrefix("postgres"),
                !Self.isZombie(proc)
            else { continue }
            found.append(pid)
        }
        return found.sorted()
    }

    /// Whether `/proc/<pid>/stat` shows an exited process (zombie or dead); `true` when
    /// it cannot be read (the process is gone).
    private static func isZombie(_ proc: String) -> Bool {
        guard let stat = readProcFile(proc + "/stat") else { return true }
        // `pid (command) state …`: the state follows the last parenthesis.
        guard let closing = stat.lastIndex(of: UInt8(ascii: ")")) else { return false }
        let state = stat[stat.index(after: closing)...].first { $0 != UInt8(ascii: " ") }
        return state == UInt8(ascii: "Z") || state == UInt8(ascii: "X")
    }

    /// Reads a `/proc` file (their reported size is 0, so read to the end).
    private static func readProcFile(_ path: String) -> [UInt8]? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        return (try? handle.readToEnd()).map { Array($0) }
    }

    static func samePath(_ first: String, _ second: String) -> Bool {
        func normalised(_ path: String) -> String {
            URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        }
        return first == second || normalised(first) == normalised(second)
    }
}
