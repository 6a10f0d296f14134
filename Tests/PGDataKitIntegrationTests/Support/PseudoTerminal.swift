import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Runs a program on a pseudo-terminal, through util-linux's `script` (in every Debian
/// installation), to see what it draws on a real terminal.
enum PseudoTerminal {
    struct Output {
        var status: Int32
        /// Everything the program wrote to the terminal, escapes and carriage returns
        /// included.
        var text: String
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Output {
        try TestDatabase.withTemporaryDirectory { directory in
            let typescript = directory.appendingPathComponent("typescript").path
            let command = ([executable] + arguments).map(shellQuoted).joined(separator: " ")
            var merged = ProcessInfo.processInfo.environment
            merged.removeValue(forKey: "DATABASE_URL")
            merged["TERM"] = merged["TERM"] ?? "xterm"
            for (key, value) in environment { merged[key] = value }
            let outcome = try ChildProcess.start(
                "/usr/bin/script", ["-q", "-f", "-e", "-c", command, typescript], in: TestDatabase.repositoryRoot,
                environment: merged
            ).wait()
            let text = (try? String(contentsOfFile: typescript, encoding: .utf8)) ?? outcome.output
            return Output(status: outcome.status, text: text)
        }
    }

    private static func shellQuoted(_ argument: String) -> String {
        "'" + argument.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

/// The command lines of the machine's processes, from `/proc`.
enum ProcessTable {
    static func commandLines() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc").compactMap { entry in
            guard Int(entry) != nil, let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"), !data.isEmpty
            else { return nil }
            return String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
        }
    }
}

extension ProcessTable {
    /// The data directory of the running PostgreSQL server on `port` (read from each
    /// server's `postmaster.pid`, whose fourth line is its port).
    static func postgresDataDirectory(port: String) throws -> String? {
        for line in try commandLines() {
            guard let match = line.firstMatch(of: /postgres -D (\S+)/) else { continue }
            let directory = String(match.1)
            guard let pid = try? String(contentsOfFile: directory + "/postmaster.pid", encoding: .utf8) else { continue }
            let fields = pid.split(separator: "\n", omittingEmptySubsequences: false)
            if fields.count > 3, fields[3].trimmingCharacters(in: .whitespaces) == port { return directory }
        }
        return nil
    }
}
