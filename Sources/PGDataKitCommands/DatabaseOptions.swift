import ArgumentParser
import Foundation
import PGDataKit

/// Where a command's database is: `--database-url`, else `DATABASE_URL`, else a throwaway
/// server started for the run (`EmbeddedPostgres`).
///
/// For example, in a command of your own:
///
/// ```swift
/// @OptionGroup var database: DatabaseOptions
/// // in run():
/// let (url, server) = try database.resolve()
/// defer { try? server?.stop() }
/// ```
public struct DatabaseOptions: ParsableArguments, Sendable {
    /// `--database-url`: a `postgres://` URL or a libpq `key=value` string.
    @Option(
        name: .customLong("database-url"),
        help: "postgres:// URL or libpq key=value string (default: $DATABASE_URL, else a throwaway server).")
    public var databaseURL: String?

    /// Options with no database named.
    public init() {}

    /// Whether a database was named (`--database-url` or `DATABASE_URL`): without one,
    /// `resolve()` starts a throwaway server.
    public var isGiven: Bool {
        if let databaseURL, !databaseURL.isEmpty { return true }
        return !(ProcessInfo.processInfo.environment["DATABASE_URL"] ?? "").isEmpty
    }

    /// The URL to use and, when a throwaway server was started for this run, that server
    /// (stop it when done; a line on standard error says it was started).
    ///
    /// - Throws: `EmbeddedPostgresError` when a throwaway server cannot start.
    public func resolve() throws -> (url: String, server: EmbeddedPostgres?) {
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
