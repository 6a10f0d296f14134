import Foundation

/// Batch insert-or-update (SQKDataKit's `sqk_insertOrUpdate`), on every entity type.
extension ManagedObjectQueries where Self: ManagedObject {
    /// Finds or creates one object per unique key of the records and calls `setter` with
    /// each record and its object; nothing is saved (call `save()`).
    ///
    /// Per batch of `batchSize` records it sends exactly one fetch for the keys the
    /// context does not hold already — one array parameter, like `= ANY($1)`, looked up
    /// key by key in the unique index (objects registered or inserted in the context
    /// count as existing: no second object for a key the context has) — plus one key
    /// lookup per linked relationship. Objects created for new keys are saved as
    /// `INSERT … ON CONFLICT (key) DO UPDATE`, so processes importing overlapping keys at
    /// the same moment end with one row per key.
    ///
    /// For example:
    ///
    /// ```swift
    /// let records = try JSONDecoder().decode([JSONValue].self, from: data)
    /// try context.performAndWait {
    ///     try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) { record, user in
    ///         user.name = record["Name"]?.stringValue
    ///         user.age = record["Age"]?.intValue
    ///     }
    ///     try context.save()
    /// }
    ///
    /// // Stubs: posts known only by their ids (remote key "self": the record is the key).
    /// try Post.insertOrUpdate(["p1", "p2"], uniqueModelKey: \.postID, uniqueRemoteKey: "self", in: context)
    ///
    /// // Posts linked to their users by the users' remote ids (stubs for unknown users).
    /// try Post.insertOrUpdate(
    ///     postRecords, uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context,
    ///     relationships: [.relationship("UserID", to: \.user, matching: \User.userID)]
    /// ) { record, post in
    ///     post.title = record["Title"]?.stringValue
    /// }
    /// ```
    ///
    /// - Records with the same key (duplicates in the input) share one object; `setter`
    ///   is called for each of them in input order, so the last one's values win. Keys
    ///   are compared byte for byte, as the unique index compares them: canonically
    ///   equivalent texts (which Swift's `==` holds equal) are two keys.
    /// - Keys are converted to the attribute's type where that is unambiguous: `123` for a
    ///   `String` key is `"123"`, `"123"` for an integer key is `123`; anything else (a
    ///   fraction, a boolean, text that is no number) is `ImportError.typeMismatch`.
    /// - A record without the key, or with `null`, is `ImportError.missingKey`.
    /// - On any error the context is left as it was before the call (objects this call
    ///   inserted leave it, objects it changed get their values back), so nothing of it
    ///   can be saved by accident.
    ///
    /// - Parameters:
    ///   - records: JSON objects, or bare key values with `uniqueRemoteKey: "self"`.
    ///   - uniqueModelKey: the unique attribute (`@Attribute(unique: true)`).
    ///   - uniqueRemoteKey: where the key is in a record: a member name, a dotted path
    ///     (`"user.id"`), or `"self"`.
    ///   - context: the context the objects are fetched into and created in.
    ///   - batchSize: records per fetch.
    ///   - relationships: to-one relationships to link by the related objects' remote
    ///     keys (`ObjectMap.relationship`); one lookup per batch and relationship,
    ///     remembered in `keyCache` when given.
    ///   - keyCache: related keys → object IDs, shared across calls and batches.
    ///   - updatesExisting: `false` (Vokoder's `overwriteObjectsWithServerChanges = NO`)
    ///     inserts the new keys and leaves the objects of existing ones untouched — rows,
    ///     objects the context holds (also unsaved inserts from before the call), a row
    ///     another process inserts before the save —; they are still returned.
    ///   - setter: applies a record to its object; optional for stubs.
    /// - Returns: the objects, one per distinct key, in order of first appearance.
    /// - Throws: `ImportError` naming the record index, `PostgresError`.
    @discardableResult
    public static func insertOrUpdate<Key: AttributeValue>(
        _ records: [JSONValue], uniqueModelKey: ReferenceWritableKeyPath<Self, Key>, uniqueRemoteKey: String,
        in context: ManagedObjectContext, batchSize: Int = 1_000, relationships: [ObjectMap<Self>] = [],
        keyCache: ImportKeyCache? = nil, updatesExisting: Bool = true, _ setter: ((JSONValue, Self) throws -> Void)? = nil
    ) throws -> [Self] {
        try insertOrUpdate(
            records, uniqueModelKey: propertyName(uniqueModelKey), uniqueRemoteKey: uniqueRemoteKey, in: context,
            batchSize: batchSize, relationships: relationships, keyCache: keyCache, updatesExisting: updatesExisting, setter)
    }

    /// `insertOrUpdate` with the unique attribute named by a string (`"userID"`).
    ///
    /// - Throws: `ImportError` (also `.unknownKey` / `.notUniqueKey` for the attribute),
    ///   `PostgresError`.
    @discardableResult
    public static func insertOrUpdate(
        _ records: [JSONValue], uniqueModelKey: String, uniqueRemoteKey: String, in context: ManagedObjectContext,
        batchSize: Int = 1_000, relationships: [ObjectMap<Self>] = [], keyCache: ImportKeyCache? = nil,
        updatesExisting: Bool = true, _ setter: ((JSONValue, Self) throws -> Void)? = nil
    ) throws -> [Self] {
        context.assertOnQueue()
        let entity = try context.entityDescription(for: self)
        var importer = RecordImport(
            entity: entity, objectClass: self, key: try RecordImport.uniqueAttribute(uniqueModelKey, of: entity),
            keyPaths: [RemoteKeyPath(uniqueRemoteKey)], keyName: uniqueRemoteKey,
            links: try RecordImport.links(relationships, of: entity, model: context.coordinator.model, ignoresNull: false),
            apply: { record, object, _, _ in
                guard let setter, let typed = ManagedObject.cast(object, to: Self.self) else { return }
                try setter(record, typed)
            })
        importer.updatesExisting = updatesExisting
        return ManagedObject.cast(try importer.run(records, batchSize: batchSize, in: context, cache: keyCache), to: Self.self)
    }
}

extension RecordImport {
    /// Runs the import over all records in batches, in a caller's context; on error the
    /// context is put back as it was. The call is one group of the context's undo
    /// manager.
    func run(_ records: [JSONValue], batchSize: Int, in context: ManagedObjectContext, cache: ImportKeyCache?) throws
        -> [ManagedObject]
    {
        let undo = ImportUndo()
        if !updatesExisting { undo.noteInsertedBefore(entity, in: context) }
        // The whole call is one group of the context's undo manager (none when it fails).
        let undoManager = context.undoManager
        undoManager?.beginCall()
        var failed = false
        defer { undoManager?.endCall(discarding: failed) }
        let formatters = DateFormatters()
        var stubs: [Stub] = []
        var objects: [ManagedObject] = []
        var seen: Set<ObjectIdentifier> = []
        let size = Swift.max(1, batchSize)
        do {
            var start = 0
            while start < records.count {
                let end = records.count - start <= size ? records.count : start + size
                let batch = try context.coordinator.tracing.withSpan(
                    PGDataKitTracing.importBatch, table: entity.tableName, entity: entity.name
                ) { span in
                    span?.set([PGDataKitTracing.records: .int64(Int64(end - start))])
                    return try importBatch(
                        start == 0 && end == records.count ? records : Array(records[start..<end]), firstIndex: start,
                        in: context, cache: cache, undo: undo, formatters: formatters, stubs: &stubs)
                }
                if start == 0 && end == records.count {
                    objects = batch  // one batch: its objects are distinct
                } else {
                    for object in batch where seen.insert(ObjectIdentifier(object)).inserted { objects.append(object) }
                }
                start = end
            }
        } catch {
            undo.revert(in: context)
            failed = true
            throw error
        }
        return objects
    }
}
