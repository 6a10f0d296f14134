extension ManagedObjectContext {
    /// Merges another context's (or another process's) saved changes into this one (Core
    /// Data's `mergeChanges(fromContextDidSave:)`).
    ///
    /// Registered objects that were updated are re-read with one query per entity. Their
    /// unsaved local changes follow the context's `mergePolicy`: `.rollback` drops them,
    /// `.mergeByPropertyStoreTrump` drops those of the keys the other save changed and
    /// keeps the rest, the other policies keep them all on top (a later save settles any
    /// conflict). Deleted objects are marked deleted and leave the context: `isDeleted` is
    /// true, `managedObjectContext` is `nil`, and `value(forKey:)` / `setValue(_:forKey:)`
    /// on them throw `ManagedObjectError.objectDeleted` (typed properties still read the
    /// last values; setting one logs a warning and is saved nowhere). Inserted objects
    /// need nothing:
    /// fetches find them. Afterwards the context tells its objects-did-change observers.
    ///
    /// While the context's snapshot is pinned (`pinSnapshot()`), the changes are kept
    /// instead, and `unpinSnapshot()` (or `save()`) merges everything kept as one change
    /// set: the manager's merges of other contexts' and processes' saves, and calls of
    /// your own.
    ///
    /// - Throws: `PostgresError` when re-reading fails.
    public func mergeChanges(_ changes: ContextChanges) throws {
        assertOnQueue()
        if snapshotPin != nil { return deferMerge(changes) }
        try coordinator.tracing.withSpan(PGDataKitTracing.merge) { span in
            if let span {
                let model = coordinator.model
                span.set([PGDataKitTracing.context: .string(concurrencyType == .main ? "main" : "private")])
                span.setObjects(
                    inserted: changes.inserted.count, updated: changes.updated.count, deleted: changes.deleted.count,
                    entities: (changes.inserted.union(changes.updated).union(changes.deleted)).compactMap {
                        model.entity(named: $0.entityName)
                    })
            }
            try ContextMerger(context: self).merge(changes)
        }
    }
}
