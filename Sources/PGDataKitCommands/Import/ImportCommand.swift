import ArgumentParser
import Foundation
import PGDataKit

/// `import`: imports a JSON or JSON lines file into one of the model's entities, with the
/// library's import operation (batches matched on the entity's unique key, one fetch and
/// one save each; records equal to their rows write nothing).
///
/// Embed it with your model (see `CommandModel`): `myapp import users.json --entity users`.
/// The entity is named by its table or its class (`users` or `User`, any case) and needs
/// a unique key of one attribute to match records on. Without a database named it
/// imports into a throwaway server whose schema is created from the model (to try a file
/// and its mapping; removed on exit).
public struct ImportCommand<Entities: CommandModel>: ParsableCommand {
    /// The command's name, help and discussion.
    public static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "import",
            abstract: "Import a JSON file of records into an entity of the model.",
            discussion: """
                Reads FILE as it goes (a JSON array of objects, or JSON lines: one object per \
                line), so a file of any size fits, and imports it with the library's import \
                operation: batches of --batch-size records, each one fetch of the existing rows \
                (matched on the entity's unique key of one attribute), one save and a context \
                reset. Records identical to their rows write nothing (no UPDATE, no version \
                bump, no change record), so importing the same file twice changes nothing the \
                second time. Several processes may import overlapping keys at once. The \
                entity is named by its table or class name (users or User).

                Attributes are read from the member of the same name or its snake_case \
                (userID or user_id) unless --only-mapped; --map id=userID reads one from \
                another key path (dotted for nested objects: author.id); --link author=user \
                fills a to-one relationship from the related object's unique key (a stub is \
                created when it does not exist yet). A mapping file (--mapping) holds the same \
                as JSON: {"entity": "posts", "maps": {"id": "postID"}, "links": {"author": \
                "user"}, "onlyMapped": true, "parseNumbers": true, "keepOnNull": true}.

                Progress goes to standard error (a bar on a terminal, a line every two seconds \
                otherwise); the summary to standard output (--json for JSON). Ctrl-C stops \
                between batches: the batch in progress is rolled back, the saved ones stay. \
                Without DATABASE_URL the import goes into a throwaway server whose schema is \
                created from the model (removed on exit); a database of your own needs the \
                model's schema (the migrate command).

                Exit status: 0 every record imported; 1 the database failed (unreachable, \
                schema does not match, an error the retries did not overcome); 64 bad \
                options or mapping; 65 bad data (not JSON, a record that is not an object, a \
                missing key, a value of the wrong type) — the batches before the bad record \
                stay saved, its batch is rolled back; 66 FILE cannot be read; 130 \
                interrupted (Ctrl-C or SIGTERM).
                """)
    }

    /// The exit statuses above.
    typealias Status = ImportStatus

    /// The file to import.
    @Argument(help: "The JSON or JSON lines file.")
    public var file: String

    /// The entity, by table or class name.
    @Option(help: "The entity, by its table or class name (users or User).")
    public var entity: String?

    /// Records per batch.
    @Option(help: "Records per batch (one fetch, one save each).")
    public var batchSize = 1_000

    /// Whether rows whose keys are not in the file are deleted.
    @Flag(help: "Delete the entity's rows whose keys are not in the file (after the last batch).")
    public var prune = false

    /// Whether the summary is printed as JSON.
    @Flag(help: "Print the summary as JSON.")
    public var json = false

    /// Whether progress is left out.
    @Flag(help: "No progress on standard error.")
    public var quiet = false

    /// Maps, links and the mapping file.
    @OptionGroup(title: "Mapping") var mapping: MappingOptions

    /// Where the database is.
    @OptionGroup public var database: DatabaseOptions

    /// A command with the default options (the parser fills them in).
    public init() {}

    /// Refuses a batch size outside 1…1,000,000.
    public func validate() throws {
        guard (1...1_000_000).contains(batchSize) else { throw ValidationError("--batch-size takes 1 to 1000000") }
    }

    /// Imports the file and prints the summary; exits with the status above.
    public func run() throws {
        let mapping = try self.mapping.resolve()
        let entities = Entities.entities
        let tables = (try? Model(entities: entities))?.entities.map(\.tableName) ?? []
        guard let entityName = entity ?? mapping.entity else {
            throw ValidationError(
                "name the entity: --entity followed by one of \(tables.joined(separator: ", ")) (or \"entity\" in the mapping file)")
        }
        let file: RecordFile
        let stop = StopSignal()
        do {
            file = try RecordFile(path: self.file)
        } catch let error as RecordFileError {
            printError("Error: \(error)")
            throw ExitCode(error.isUnreadable ? Status.noInput.rawValue : Status.badData.rawValue)
        }
        let interrupt = stop.onInterrupt()
        defer { interrupt.cancel() }

        let (url, server) = try database.resolve()
        defer { try? server?.stop() }
        let outcome: ImportOutcome
        do {
            let manager = try ContextManager(
                configuration: ConnectionConfiguration(url), entities: entities, maximumConnections: 2,
                automaticallyMergesRemoteChanges: false, createsSchema: server != nil)
            defer { manager.close() }
            guard let description = Self.entity(named: entityName, in: manager.coordinator.model) else {
                throw ValidationError("unknown entity \"\(entityName)\": the model has \(tables.joined(separator: ", "))")
            }
            let run = ImportRun(
                file: file, mapping: mapping, manager: manager, stop: stop,
                options: ImportOptions(batchSize: batchSize, pruneMissingObjects: prune), quiet: quiet || json)
            guard let type = description.objectClass as? ManagedObject.Type else {
                throw ValidationError("\(description.name) is not a ManagedObject subclass")
            }
            outcome = try type.runImport(run)
        } catch let error as SchemaMismatchError {
            let program = CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "your program"
            printError("Error: \(error)\nThe database needs the model's schema: run `\(program) migrate` on it first.")
            throw ExitCode(Status.databaseFailed.rawValue)
        }
        if json { printLine(outcome.json()) } else { printLine(outcome.text()) }
        if let message = outcome.errorMessage { printError("Error: \(message)") }
        if outcome.status != .success { throw ExitCode(outcome.status.rawValue) }
    }

    /// The entity whose table or class name is `name` (any case).
    static func entity(named name: String, in model: Model) -> EntityDescription? {
        let wanted = name.lowercased()
        return model.entities.first { $0.tableName.lowercased() == wanted || $0.name.lowercased() == wanted }
    }
}

/// The import command's exit statuses (see its discussion).
enum ImportStatus: Int32 {
    case success = 0
    case databaseFailed = 1
    case usage = 64
    case badData = 65
    case noInput = 66
    case interrupted = 130
}

/// What one run of the import command works with: the file, the mapping, the manager, and
/// how it is stopped and shown.
struct ImportRun {
    let file: RecordFile
    let mapping: ImportMapping
    let manager: ContextManager
    let stop: StopSignal
    let options: ImportOptions
    let quiet: Bool
}

extension ManagedObject {
    /// Runs the import into the entity of this class (`Self` is the class the metatype
    /// holds, so the mapper and the operation are made for it, not for `ManagedObject`).
    static func runImport(_ run: ImportRun) throws -> ImportOutcome {
        try run.importRecords(Self.self)
    }
}

extension ImportRun {
    /// Runs the import operation on its own thread and shows its progress until it ends
    /// or Ctrl-C cancels it.
    func importRecords<Object: ManagedObject>(_ type: Object.Type) throws -> ImportOutcome {
        let model = manager.coordinator.model
        guard let description = model.entity(for: type) else { throw ValidationError("\(type) is not in the model") }
        let mapper = try mapping.mapper(for: type, entity: description, model: model)
        let operation = manager.importOperation(file, mapper: mapper, options: options)
        // Cancelled on the reading thread, so the batch with the bad record is not saved.
        file.state.onProblem { [progress = operation.progress] in progress.cancel() }
        let finished = DispatchSemaphore(value: 0)
        operation.completionBlock = { finished.signal() }
        let queue = OperationQueue()
        queue.addOperation(operation)

        var view = ImportProgressView(quiet: quiet)
        var cancelled = false
        let fraction = { file.size > 0 ? Double(file.state.bytesRead) / Double(file.size) : 1 }
        while finished.wait(timeout: .now() + 0.25) == .timedOut {
            if stop.isFired, !cancelled {
                cancelled = true
                operation.cancel()
                if file.state.problem == nil { view.note("Interrupted: rolling back the batch in progress…") }
            }
            view.show(records: operation.progress.completedUnitCount, fraction: fraction())
        }
        queue.waitUntilAllOperationsAreFinished()
        view.end(records: operation.progress.completedUnitCount, fraction: fraction())
        return ImportOutcome(
            entity: description.tableName, file: file, summary: operation.summary ?? ImportSummary(),
            error: operation.error, interrupted: cancelled && file.state.problem == nil, seconds: view.elapsed)
    }
}

/// What an import run did, and how the command ends.
struct ImportOutcome {
    let entity: String
    let summary: ImportSummary
    let status: ImportStatus
    let errorMessage: String?
    let seconds: Double

    init(entity: String, file: RecordFile, summary: ImportSummary, error: (any Error)?, interrupted: Bool, seconds: Double) {
        self.entity = entity
        self.summary = summary
        self.seconds = seconds
        if let problem = file.state.problem {
            (status, errorMessage) = (
                .badData, "\(file.path):\(problem.line): record \(problem.recordIndex): \(problem.reason); nothing of its batch was saved"
            )
        } else if interrupted || error is CancellationError {
            (status, errorMessage) = (.interrupted, "interrupted: the batch in progress was rolled back")
        } else if let error = error as? ImportError {
            let isMapping = error.recordIndex == nil
            let place = error.recordIndex.flatMap { Self.line(ofRecord: $0, in: file) }.map { ":\($0)" } ?? ""
            (status, errorMessage) = (
                isMapping ? .usage : .badData,
                "\(file.path)\(place): \(error)" + (isMapping ? "" : "; nothing of its batch was saved")
            )
        } else if let error {
            (status, errorMessage) = (.databaseFailed, "\(error)")
        } else {
            (status, errorMessage) = (.success, nil)
        }
    }

    var outcomeName: String {
        switch status {
        case .success: return "complete"
        case .interrupted: return "interrupted"
        case .badData, .usage, .noInput: return "refused"
        case .databaseFailed: return "failed"
        }
    }

    /// `users: 10000 records in 10 batches: 10000 inserted, … (2.1 s, 4762 records/s)`
    func text() -> String {
        let rate = seconds > 0 ? Int(Double(summary.records) / seconds) : 0
        let end = status == .success ? "" : " — \(outcomeName)"
        return "\(entity): \(summary) (\(String(format: "%.1f", seconds)) s, \(rate) records/s)\(end)"
    }

    /// The summary as one JSON object.
    func json() -> String {
        var members: [String: JSONValue] = [
            "entity": .string(entity), "outcome": .string(outcomeName), "exitStatus": .number(Double(status.rawValue)),
            "records": .number(Double(summary.records)), "inserted": .number(Double(summary.inserted)),
            "updated": .number(Double(summary.updated)), "unchanged": .number(Double(summary.unchanged)),
            "deleted": .number(Double(summary.deleted)), "batches": .number(Double(summary.batches)),
            "retries": .number(Double(summary.retries)), "seconds": .number((seconds * 1000).rounded() / 1000),
        ]
        if let errorMessage { members["error"] = .string(errorMessage) }
        return JSONValue.object(members).jsonText
    }

    /// The line a record starts on, found by reading the file again.
    private static func line(ofRecord index: Int, in file: RecordFile) -> Int? {
        guard let again = try? RecordFile(path: file.path) else { return nil }
        var iterator = again.makeIterator()
        for _ in 0...index where iterator.next() == nil { return nil }
        return iterator.lastRecordLine
    }
}

extension RecordFileError {
    var isUnreadable: Bool {
        if case .unreadable = self { return true }
        return false
    }
}
