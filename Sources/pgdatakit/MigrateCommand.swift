import ArgumentParser
import Foundation
import PGDataKit

struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply the numbered SQL files of a migrations folder, or show their status.",
        discussion: """
            Applies every pending NNNN_name.sql file in order, each in its own transaction,
            holding an advisory lock so that workers starting together apply each file once.
            Exits with status 1 when an applied file was changed or a migration fails.
            """
    )

    @Option(name: .long, help: "The migrations folder.")
    var dir: String = "migrations"

    @Flag(name: .long, help: "Only show which migrations are applied and which are pending.")
    var status = false

    @OptionGroup var database: DatabaseOptions

    func run() throws {
        let migrator = try Migrator(directory: URL(fileURLWithPath: dir))
        let (url, server) = try database.resolve()
        defer { try? server?.stop() }
        let connection = try Connection(url: url)
        defer { connection.close() }
        if !status {
            let applied = try migrator.migrate(on: connection)
            if applied.isEmpty {
                print("Nothing to apply: the database is up to date.")
            } else {
                for migration in applied { print("Applied \(migration.fileName)") }
            }
        }
        let statuses = try migrator.status(on: connection)
        print(Self.table(statuses))
        let pending = statuses.filter { $0.state == .pending }.count
        print("\(statuses.count) migration(s): \(statuses.count - pending) applied, \(pending) pending.")
        if statuses.contains(where: { if case .changed = $0.state { return true } else { return false } }) {
            throw ExitCode(1)
        }
    }

    static func table(_ statuses: [MigrationStatus]) -> String {
        let formatter = ISO8601DateFormatter()
        var rows: [[String]] = [["VERSION", "NAME", "STATE", "APPLIED AT"]]
        for status in statuses {
            let (state, time): (String, String)
            switch status.state {
            case .applied(let date): (state, time) = ("applied", formatter.string(from: date))
            case .pending: (state, time) = ("pending", "")
            case .changed: (state, time) = ("CHANGED", "file edited after it was applied")
            case .missingFile: (state, time) = ("applied", "file missing")
            }
            rows.append([String(status.version), status.name, state, time])
        }
        let widths = (0..<4).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in
                cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n")
    }
}
