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
        guard let stat = Self.readProcFile(proc + "/stat") else { return false }
        // `pid (command) state …`: the state follows the last parenthesis.
        if let closing = stat.lastIndex(of: UInt8(ascii: ")")) {
            let state = stat[stat.index(after: closing)...].first { $0 != UInt8(ascii: " ") }
            if state == UInt8(ascii: "Z") || state == UInt8(ascii: "X") { return false }
        }
        guard let commandLine = Self.readProcFile(proc + "/cmdline") else { return false }
        let arguments = commandLine.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return arguments.contains { Self.samePath($0, dataDirectory.path) }
    }

    /// Reads a `/proc` file (their reported size is 0, so read to the end).
    private static func readProcFile(_ path: String) -> [UInt8]? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        return (try? handle.readToEnd()).map { Array($0) }
    }

    private static func samePath(_ first: String, _ second: String) -> Bool {
        func normalised(_ path: String) -> String {
            URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        }
        return first == second || normalised(first) == normalised(second)
    }
}
