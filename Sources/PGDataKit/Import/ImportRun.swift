import Foundation
import Synchronization

/// One import job in its private context: imports batch after batch, each saved and
/// followed by a context reset, redoes a batch that hit a transient failure, and prunes
/// at the end. Import operations and `importRecords(_:mapper:options:progress:)` drive
/// it.
final class ImportRun<Object: ManagedObject>: @unchecked Sendable {
    // Sendable: every method runs on the context's queue (the drivers call it through
    // `perform`/`performAndWait`); nothing is touched from elsewhere.
    private final class SaveRecorder: Sendable {
        let changes = Mutex<ContextChanges?>(nil)
    }

    let context: ManagedObjectContext
    private var importer: RecordImport
    private let options: ImportOptions
    private let cache = ImportKeyCache()
    private let formatters = DateFormatters()
    private let recorder = SaveRecorder()
    private var token: ObserverToken?
    private var seenKeys: [StoredValue] = []
    private(set) var summary = ImportSummary()

    /// Prepares the context: the options' merge policy, read-committed transactions (a
    /// concurrent importer's rows are then updated, not a serialization failure).
    ///
    /// - Throws: `ImportError` when the mapper does not fit the model,
    ///   `.invalidMap` when the context is not a private one,
    ///   `ChildContextError.unsupported` in a child context.
    init(context: ManagedObjectContext, mapper: ObjectMapper<Object>, options: ImportOptions) throws {
        context.assertOnQueue()
        try context.refuseInChild(
            "importRecords(_:mapper:options:progress:) / ImportOperation",
            advice: "it saves and retries each batch against the database; import with insertOrUpdate or "
                + "importRecords(_:mapper:in:) in the child and save it, or run the operation in a private context")
        guard context.concurrencyType == .private else {
            throw ImportError.invalidMap(
                entity: Object.entityName, key: "context", reason: "imports run in a private context of their own")
        }
        self.context = context
        self.options = options
        self.importer = try mapper.recordImport(in: context)
        importer.guaranteedInsert = options.guaranteedInsert
        importer.updatesExisting = importer.updatesExisting && options.updatesExistingObjects
        if options.pruneMissingObjects && importer.key == nil {
            throw ImportError.invalidMap(
                entity: importer.entity.name, key: "pruneMissingObjects", reason: "pruning needs a unique key in the mapper")
        }
        context.mergePolicy = options.mergePolicy
        context.isolationLevel = .readCommitted
        let recorder = self.recorder
        token = context.observeDidSave { changes in recorder.changes.withLock { $0 = changes } }
    }

    deinit { token?.cancel() }

    /// Imports and saves one batch; on a serialization failure, deadlock, merge conflict
    /// or lost connection that did not commit (never on an unknown outcome) it rolls
    /// back and redoes the batch, up to `maximumAttempts` times.
    ///
    /// - Returns: `false` when `isCancelled` said so before the save (the batch is rolled
    ///   back).
    /// - Throws: `ImportError`, `PostgresError`, `MergeConflictError`; the batch is rolled
    ///   back.
    func importBatch(_ records: [JSONValue], firstIndex: Int, isCancelled: () -> Bool) throws -> Bool {
        try context.coordinator.tracing.withSpan(
            PGDataKitTracing.importBatch, table: importer.entity.tableName, entity: importer.entity.name
        ) { span in
            span?.set([PGDataKitTracing.records: .int64(Int64(records.count))])
            return try importBatch(records, firstIndex: firstIndex, span: span, isCancelled: isCancelled)
        }
    }

    /// `importBatch(_:firstIndex:isCancelled:)`'s attempts, told to its span.
    private func importBatch(
        _ records: [JSONValue], firstIndex: Int, span: TraceSpan?, isCancelled: () -> Bool
    ) throws -> Bool {
        var attempt = 1
        while true {
            recorder.changes.withLock { $0 = nil }
            var stubs: [RecordImport.Stub] = []
            do {
                let undo = ImportUndo(tracks: false)
                if !importer.updatesExisting { undo.noteInsertedBefore(importer.entity, in: context) }
                let objects = try importer.importBatch(
                    records, firstIndex: firstIndex, in: context, cache: cache, undo: undo, formatters: formatters,
                    stubs: &stubs)
                if isCancelled() {
                    context.rollback()
                    return false
                }
                try context.save()
                tally(objects, records: records.count)
                for stub in stubs {
                    guard let key = stub.object.objectID.primaryKey else { continue }
                    cache.store(key, entity: stub.entity, attribute: stub.attribute, value: stub.value)
                }
                if options.pruneMissingObjects, let key = importer.key {
                    seenKeys.append(contentsOf: objects.map { $0.storage.value(at: key.index) })
                }
                context.reset()
                return true
            } catch where Self.isTransient(error) && attempt < options.maximumAttempts {
                context.rollback()
                let cause: TransientCause? = error is MergeConflictError ? .conflict : TransientCause(error)
                context.coordinator.metrics.retry(cause, unit: "import")
                span?.retried(cause)
                context.logger.debug("import batch at record \(firstIndex) hit \(error); redoing it (attempt \(attempt + 1))")
                attempt += 1
                summary.retries += 1
                usleep(UInt32.random(in: 2_000...20_000) * UInt32(attempt))
            } catch {
                context.rollback()
                throw error
            }
        }
    }

    /// Deletes the rows whose keys were not imported (within the prune predicate), with
    /// one statement; nothing unless `pruneMissingObjects`.
    ///
    /// - Returns: how many rows were deleted.
    /// - Throws: `FetchPredicateError`, `PostgresError`.
    func prune() throws -> Int {
        guard options.pruneMissingObjects, let key = importer.key else { return 0 }
        var attempt = 1
        while true {
            do {
                let query = try context.storeQuery(
                    FetchRequest<Object>(predicate: options.prunePredicate), entity: importer.entity, ordered: false
                ).excluding(key, values: seenKeys)
                let deleted = try context.batchDelete(of: importer.entity, query).count
                summary.deleted += deleted
                seenKeys = []
                return deleted
            } catch where Self.isTransient(error) && attempt < options.maximumAttempts {
                context.rollback()
                attempt += 1
                summary.retries += 1
            }
        }
    }

    /// Counts a saved batch: inserts and updates from the save's own change set (an
    /// insert that met a row inserted meanwhile counts as an update), the rest unchanged.
    private func tally(_ objects: [ManagedObject], records: Int) {
        let changes = recorder.changes.withLock { $0 } ?? ContextChanges()
        let name = importer.entity.name
        // (A sub-entity's objects carry their root's name: their kind is in `entityNames`.)
        let kinds = changes.entityNames
        let inserted = changes.inserted.lazy.filter { (kinds.isEmpty ? $0.entityName : changes.entityName(of: $0)) == name }.count
        let updated = changes.updated.lazy.filter { (kinds.isEmpty ? $0.entityName : changes.entityName(of: $0)) == name }.count
        summary.records += records
        summary.batches += 1
        context.coordinator.metrics.count(PGDataKitMetrics.importedRecords, [("entity", name)], by: records)
        summary.inserted += inserted
        summary.updated += updated
        summary.unchanged += Swift.max(0, objects.count - inserted - updated)
    }

    /// Failures a redo of the batch can overcome, and that left nothing committed
    /// (`SaveOutcomeUnknownError` is not one of them).
    static func isTransient(_ error: any Error) -> Bool {
        switch error {
        case let error as PostgresError: return error.isTransient
        case is MergeConflictError, is UpsertVanishedRowError: return true
        default: return false
        }
    }
}

/// Reads a record sequence in batches.
struct RecordBatches<Iterator: IteratorProtocol<JSONValue>> {
    var iterator: Iterator
    let size: Int
    private(set) var nextIndex = 0

    init(_ iterator: Iterator, size: Int) {
        self.iterator = iterator
        self.size = Swift.max(1, size)
    }

    /// The most records reserved for a batch up front.
    static var reservedRecords: Int { 4_096 }

    /// The next batch and the index of its first record; `nil` at the end.
    mutating func next() -> (records: [JSONValue], firstIndex: Int)? {
        var records: [JSONValue] = []
        // Not the caller's size: `Int.max` (CRLoom's "one save at the end") would overflow
        // the allocation; the array grows past this as records come.
        records.reserveCapacity(Swift.min(size, RecordBatches.reservedRecords))
        while records.count < size, let record = iterator.next() { records.append(record) }
        guard !records.isEmpty else { return nil }
        defer { nextIndex += records.count }
        return (records, nextIndex)
    }
}
