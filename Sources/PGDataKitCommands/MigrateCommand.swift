import Foundation

/// `migrate`: applies the numbered SQL files of a migrations folder, shows their status,
/// or (`--generate NAME`) writes the next one from the model's difference with the
/// database (`SchemaDiff`).
///
/// Embed it with your model (see `CommandModel`): `myapp migrate`, `myapp migrate
/// --status`, `myapp migrate --generate "add notes"`.
public struct MigrateCommand<Entities: CommandModel>: ParsableCommand {
    /// The command's name, help and discussion.
    public static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "migrate",
            abstract: "Apply the numbered SQL files of a migrations folder, or show their status.",
            discussion: """
                Applies every pending NNNN_name.sql file in order, each in its own transaction, \
                holding an advisory lock so that workers starting together apply each file once. \
                Every pending file is checked first: if one begins, commits or rolls back a \
                transaction itself (BEGIN, COMMIT, END, ROLLBACK…), nothing is applied. A \
                failing file is rolled back and the error names file:line:column. Then prints \
                the status of every migration.

                DDL runs only for what is missing (the catalog is read first), so the \
                application role (DML rights plus SELECT on pgdatakit_migrations) may run it at \
                start-up once everything is applied; a pending migration is then an error \
                naming the right the role lacks.

                Exits with status 1 when a migration fails or is refused, when an applied file \
                was changed (CHANGED), or when a migration recorded as applied has no file any \
                more (MISSING), also with --status. Pending files alone are not an error.

                Applying needs DATABASE_URL (or --database-url): a throwaway server is deleted \
                on exit, so applying to one is refused unless --throwaway says it is meant.

                --generate NAME writes the next migration file instead: the difference between \
                the model and the database, additive changes as SQL, \
                drops, renames, type changes and new requirements commented out with a sentence \
                each, to review before applying. With a database, every file of the folder must \
                be applied there first; without one, the folder's files are applied to a \
                throwaway server and the model is compared with that.
                """
        )
    }

    /// A command with the default options.
    public init() {}

    @Option(name: .long, help: "The migrations folder.")
    var dir: String = "migrations"

    @Flag(name: .long, help: "Only show which migrations are applied and which are pending.")
    var status = false

    @Option(name: .long, help: "Write the next migration file, named NAME, for the model's difference with the database.")
    var generate: String?

    @Flag(name: .long, help: "Apply to a throwaway server (deleted on exit) when no database is given.")
    var throwaway = false

    @OptionGroup var database: DatabaseOptions

    /// Applies, shows or generates, as the options say.
    public func run() throws {
        if let generate { return try generateMigration(named: generate) }
        if !status, !throwaway, !database.isGiven {
            printError(
                "Error: no DATABASE_URL (or --database-url) is set, and migrations applied to a throwaway server "
                    + "are deleted with it on exit; name the database, or pass --throwaway to try them anyway.")
            throw ExitCode(1)
        }
        let migrator = try Migrator(directory: URL(fileURLWithPath: dir))
        let (url, server) = try database.resolve()
        defer { try? server?.stop() }
        let connection = try Connection(url: url)
        defer { connection.close() }
        if !status {
            let applied: [Migration]
            do {
                applied = try migrator.migrate(on: connection)
            } catch {
                // Show what the database holds now, then the error.
                if let statuses = try? migrator.status(on: connection) { Self.printStatus(statuses) }
                throw error
            }
            if applied.isEmpty {
                print("Nothing to apply: the database is up to date.")
            } else {
                for migration in applied { print("Applied \(migration.fileName)") }
            }
        }
        let statuses = try migrator.status(on: connection)
        Self.printStatus(statuses)
        let problems = Self.problems(statuses, migrator: migrator, folder: dir)
        if !problems.isEmpty {
            for problem in problems { printError("Error: \(problem)") }
            throw ExitCode(1)
        }
    }

    /// `--generate`: writes the next file of the folder for the model's
    /// difference with the database (or with the folder applied to a throwaway server).
    func generateMigration(named name: String) throws {
        let folder = URL(fileURLWithPath: dir)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let migrator = try Migrator(directory: folder)
        let (url, server) = try database.resolve()
        defer { try? server?.stop() }
        let connection = try Connection(url: url)
        defer { connection.close() }
        if server != nil {
            try migrator.migrate(on: connection)
        } else {
            let pending = try migrator.pending(on: connection)
            if !pending.isEmpty {
                printError(
                    "Error: \(pending.count) migration(s) of \(dir) are not applied to this database "
                        + "(\(pending.map(\.fileName).joined(separator: ", "))): apply them first, or generate "
                        + "without DATABASE_URL to compare with the folder applied to a throwaway server.")
                throw ExitCode(1)
            }
        }
        let diff = try SchemaDiff(model: try Model(entities: Entities.entities), on: connection)
        guard let file = try diff.writeMigration(named: name, into: folder) else {
            print("Nothing to generate: the database matches the model.")
            return
        }
        let review = diff.changes.filter { !$0.isAdditive }.count
        print("Wrote \(dir)/\(file.lastPathComponent): \(diff.changes.count) change(s), \(review) to review.")
        for change in diff.changes { print("  \(change.isAdditive ? "+" : "?") \(change.description)") }
    }

    static func printStatus(_ statuses: [MigrationStatus]) {
        print(table(statuses))
        var applied = 0, pending = 0, changed = 0, missing = 0
        for status in statuses {
            switch status.state {
            case .applied: applied += 1
            case .pending: pending += 1
            case .changed: changed += 1
            case .missingFile: missing += 1
            }
        }
        var summary = "\(statuses.count) migration(s): \(applied) applied, \(pending) pending"
        if changed > 0 { summary += ", \(changed) changed" }
        if missing > 0 { summary += ", \(missing) missing" }
        print(summary + ".")
    }

    /// What makes the command fail: applied files edited since, applied files gone.
    static func problems(_ statuses: [MigrationStatus], migrator: Migrator, folder: String) -> [String] {
        statuses.compactMap { status in
            switch status.state {
            case .applied, .pending:
                return nil
            case .changed:
                let file = migrator.migrations.first { $0.version == status.version }
                let place = file?.path ?? file?.fileName ?? "its file"
                return "migration \(status.version) (\(status.name)) was changed after it was applied "
                    + "(\(place)); applied migrations must not be edited: restore it and add a new migration"
            case .missingFile:
                return "migration \(status.version) (\(status.name)) is recorded as applied, but no file in "
                    + "\(folder) has version \(status.version); restore the file "
                    + "(or run a checkout whose folder has it)"
            }
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
            case .missingFile: (state, time) = ("MISSING", "applied, but the file is gone")
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
