import ArgumentParser
import Foundation
import PGDataKit

/// Where a command's database is: an explicit URL, DATABASE_URL, or a throwaway server.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: "postgres:// URL or libpq key=value string (default: $DATABASE_URL, else a throwaway server).")
    var databaseURL: String?

    /// Whether a database was named (`--database-url` or `DATABASE_URL`): without one,
    /// `resolve()` starts a throwaway server.
    var isGiven: Bool {
        if let databaseURL, !databaseURL.isEmpty { return true }
        return !(ProcessInfo.processInfo.environment["DATABASE_URL"] ?? "").isEmpty
    }

    /// The URL to use and, when a throwaway server was started for this run, that server.
    func resolve() throws -> (url: String, server: EmbeddedPostgres?) {
        if let databaseURL, !databaseURL.isEmpty { return (databaseURL, nil) }
        if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty {
            return (url, nil)
        }
        let server = try EmbeddedPostgres.start()
        printError("No DATABASE_URL set: using a throwaway PostgreSQL server at \(server.url) (removed on exit).")
        return (server.url, server)
    }
}

/// Writes a line to standard error.
func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Writes a line to standard output at once (`print` buffers when output is a pipe or a
/// file, so a reader would see nothing until exit).
func printLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
