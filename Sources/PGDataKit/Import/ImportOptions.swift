/// How an import operation runs (CRLoom's import options).
///
/// For example:
///
/// ```swift
/// var options = ImportOptions(batchSize: 5_000)
/// options.pruneMissingObjects = true
/// options.prunePredicate = try FetchPredicate(format: "userID BEGINSWITH %@", "feed-")
/// ```
public struct ImportOptions: Sendable {
    /// Records per batch. Each batch is one fetch, one save (one transaction) and a
    /// context reset, so memory stays flat however long the input is. Any value works:
    /// `.max` (CRLoom's `NSUIntegerMax`) imports everything in one batch and one save,
    /// a value below 1 means batches of one.
    public var batchSize: Int
    /// Skip the fetch: the caller knows the records are new. Rows that exist after all
    /// are still updated, not duplicated (the save is an upsert), but the objects of such
    /// records do not start from the stored values.
    public var guaranteedInsert: Bool
    /// After the last batch, delete the entity's rows whose unique keys were not in the
    /// input (within `prunePredicate` when given), with one `DELETE` statement. Needs a
    /// unique key; keeps the input's keys in memory.
    public var pruneMissingObjects: Bool
    /// Limits pruning to the rows matching this predicate.
    public var prunePredicate: FetchPredicate?
    /// How often a batch is tried when it fails with a serialization failure, a
    /// deadlock, a merge conflict or a lost connection that did not commit
    /// (`PostgresError.isTransient`): it is rolled back and redone (fetched, applied and
    /// saved again). A batch whose outcome is unknown (`SaveOutcomeUnknownError`) is not
    /// redone: the import stops with that error.
    public var maximumAttempts: Int
    /// How the import's saves treat rows changed elsewhere since they were read. By
    /// default the import's values win for the properties it sets and the other
    /// properties keep the stored values.
    public var mergePolicy: MergePolicy
    /// The number of records, when known: the total of the progress.
    public var expectedCount: Int64?
    /// Whether records update the objects whose keys exist (`true`, the default). With
    /// `false` (Vokoder's `overwriteObjectsWithServerChanges = NO`) the import inserts
    /// new objects and leaves existing ones untouched, including a row another process
    /// inserts with the same key before the batch is saved (its insert is `ON CONFLICT DO
    /// NOTHING`, and the object takes the stored values). The mapper's
    /// `ObjectMapper.updatesExistingObjects` says the same for every import path: either
    /// set to `false` keeps existing objects.
    public var updatesExistingObjects = true

    /// Options; the defaults import in batches of 1,000 with fetches, no pruning, up to
    /// 5 attempts per batch.
    public init(
        batchSize: Int = 1_000, guaranteedInsert: Bool = false, pruneMissingObjects: Bool = false,
        prunePredicate: FetchPredicate? = nil, maximumAttempts: Int = 5,
        mergePolicy: MergePolicy = .mergeByPropertyObjectTrump, expectedCount: Int64? = nil
    ) {
        self.batchSize = batchSize
        self.guaranteedInsert = guaranteedInsert
        self.pruneMissingObjects = pruneMissingObjects
        self.prunePredicate = prunePredicate
        self.maximumAttempts = maximumAttempts
        self.mergePolicy = mergePolicy
        self.expectedCount = expectedCount
    }
}

/// What an import did.
public struct ImportSummary: Sendable, Equatable, CustomStringConvertible {
    /// Records read and saved.
    public var records = 0
    /// Rows inserted.
    public var inserted = 0
    /// Rows updated (records that differed from their rows).
    public var updated = 0
    /// Records identical to their rows: nothing written, no version bump, no change
    /// record.
    public var unchanged = 0
    /// Rows deleted by pruning.
    public var deleted = 0
    /// Batches saved.
    public var batches = 0
    /// Batches redone after a serialization failure, deadlock, merge conflict or lost
    /// connection that did not commit.
    public var retries = 0

    /// An empty summary.
    public init() {}

    /// `1000 records in 1 batches: 600 inserted, 300 updated, 100 unchanged, 0 deleted, 0 retries`.
    public var description: String {
        "\(records) records in \(batches) batches: \(inserted) inserted, \(updated) updated, \(unchanged) unchanged, "
            + "\(deleted) deleted, \(retries) retries"
    }
}
