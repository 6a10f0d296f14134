import Foundation
import Synchronization

/// An import as a Foundation `Operation` (CRLoom's import operation), for
/// `OperationQueue` users: records in, batch by batch, in a private context of its own.
///
/// Each batch (`batchSize` records) is one fetch of the existing objects, the maps
/// applied, one save (one transaction: upserts, updates, the change record) and a context
/// reset, so memory stays flat however long the record sequence is; read the records
/// lazily (a generator, a file read line by line) to keep it so. A batch that hits a
/// serialization failure, deadlock, merge conflict or lost connection that did not
/// commit is rolled back and redone (`maximumAttempts`); one whose outcome is unknown
/// (`SaveOutcomeUnknownError`) stops the import. Cancelling stops between batches; a batch in progress is rolled
/// back, the saved ones stay. `progress` counts the records saved.
///
/// For example:
///
/// ```swift
/// let context = manager.newPrivateContext(name: "import")
/// let operation = ImportOperation(records, mapper: User.objectMapper, options: ImportOptions(batchSize: 5_000), context: context)
/// operation.completionBlock = { print(operation.summary ?? ImportSummary()) }
/// queue.addOperation(operation)
/// ```
///
/// `ContextManager.importOperation(_:mapper:options:)` makes one with a new private context.
public final class ImportOperation<Object: ManagedObject>: Operation, @unchecked Sendable {
    // Sendable: the configuration is immutable, the outcome sits in a Mutex, and the
    // context is used only through its queue, from `main()`.
    private let makeIterator: @Sendable () -> AnyIterator<JSONValue>
    private let mapper: ObjectMapper<Object>
    private let options: ImportOptions
    private let context: ManagedObjectContext
    private let outcome = Mutex<(summary: ImportSummary?, error: (any Error)?)>((nil, nil))

    /// The records saved so far, of `options.expectedCount` (indeterminate when not
    /// given). Cancelling it cancels the operation.
    public let progress: Progress

    /// Prepares an import of `records` into `context`, which must be a private context
    /// used by nothing else.
    public init<Records: Sequence & Sendable>(
        _ records: Records, mapper: ObjectMapper<Object>, options: ImportOptions = ImportOptions(),
        context: ManagedObjectContext
    ) where Records.Element == JSONValue {
        self.makeIterator = { AnyIterator(records.makeIterator()) }
        self.mapper = mapper
        self.options = options
        self.context = context
        self.progress = Progress(totalUnitCount: options.expectedCount ?? -1)
        super.init()
    }

    /// What the import did once finished (also after a failure or cancellation: the
    /// batches saved until then).
    public var summary: ImportSummary? { outcome.withLock { $0.summary } }

    /// Why the import stopped early, if it did: an `ImportError`, a `PostgresError`, or
    /// `CancellationError`.
    public var error: (any Error)? { outcome.withLock { $0.error } }

    /// Runs the import (called by the queue or `start()`).
    public override func main() {
        let progress = self.progress
        var run: ImportRun<Object>?
        do {
            let context = self.context
            let created = try context.performAndWait {
                try ImportRun(context: context, mapper: mapper, options: options)
            }
            run = created
            var batches = RecordBatches(makeIterator(), size: options.batchSize)
            let cancelled = { [unowned self] in self.isCancelled || progress.isCancelled }
            while true {
                if cancelled() { throw CancellationError() }
                guard let (records, firstIndex) = batches.next() else { break }
                let saved = try context.performAndWait {
                    try created.importBatch(records, firstIndex: firstIndex, isCancelled: cancelled)
                }
                guard saved else { throw CancellationError() }
                progress.completedUnitCount += Int64(records.count)
            }
            try context.performAndWait { _ = try created.prune() }
            let summary = context.performAndWait { created.summary }
            outcome.withLock { $0 = (summary, nil) }
        } catch {
            let summary = run.map { run in context.performAndWait { run.summary } }
            outcome.withLock { $0 = (summary, error) }
        }
    }
}

extension ManagedObjectContext {
    /// Imports records through a mapper in this private context, batch by batch, for
    /// structured-concurrency users (the async twin of `ImportOperation`; see there for
    /// batches, retries and memory).
    ///
    /// For example:
    ///
    /// ```swift
    /// let context = manager.newPrivateContext(name: "import")
    /// let summary = try await context.importRecords(records, mapper: User.objectMapper, options: ImportOptions(batchSize: 5_000))
    /// print(summary)   // 100000 records in 20 batches: 99000 inserted, 0 updated, 1000 unchanged, …
    /// ```
    ///
    /// - Parameters:
    ///   - records: the records to import, in order.
    ///   - mapper: how records map to objects (unique key, attribute maps).
    ///   - options: batch size, pruning, retries and the other import options.
    ///   - progress: counts the records saved; cancelling it cancels the import.
    /// - Throws: `CancellationError` when the task (or `progress`) was cancelled — the
    ///   batch in progress is rolled back, earlier ones stay saved —, `ImportError`,
    ///   `PostgresError`.
    @discardableResult
    public func importRecords<Object: ManagedObject, Records: Sequence & Sendable>(
        _ records: Records, mapper: ObjectMapper<Object>, options: ImportOptions = ImportOptions(),
        progress: Progress? = nil
    ) async throws -> ImportSummary where Records.Element == JSONValue {
        let run = try await perform { [self] in try ImportRun(context: self, mapper: mapper, options: options) }
        let flag = CancellationFlag()
        return try await withTaskCancellationHandler {
            var batches = RecordBatches(records.makeIterator(), size: options.batchSize)
            while true {
                if flag.isSet || progress?.isCancelled == true { throw CancellationError() }
                guard let (batch, firstIndex) = batches.next() else { break }
                let saved = try await perform {
                    try run.importBatch(batch, firstIndex: firstIndex) { flag.isSet || progress?.isCancelled == true }
                }
                guard saved else { throw CancellationError() }
                progress?.completedUnitCount += Int64(batch.count)
            }
            return try await perform {
                _ = try run.prune()
                return run.summary
            }
        } onCancel: {
            flag.set()
        }
    }
}

/// A flag set once from any thread.
final class CancellationFlag: Sendable {
    private let value = Atomic<Bool>(false)

    var isSet: Bool { value.load(ordering: .acquiring) }

    func set() { value.store(true, ordering: .releasing) }
}
