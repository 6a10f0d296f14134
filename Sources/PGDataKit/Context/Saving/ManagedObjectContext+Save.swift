import Foundation

extension ManagedObjectContext {
    /// Writes the context's changes in one transaction and commits: inserts (in
    /// foreign-key order), updates, deletes, all or nothing.
    ///
    /// Statements are bounded by entities and kinds of change, not by rows: one
    /// statement reserves the new primary keys of an entity, one multi-row `INSERT`
    /// inserts its objects, one `UPDATE … FROM unnest(…)` per set of changed columns
    /// updates them, one `DELETE … USING unnest(…)` deletes them. Objects an import
    /// inserted for unique keys it did not find (`insertOrUpdate`) go as one `INSERT …
    /// ON CONFLICT (key) DO UPDATE` instead, taking their keys from the sequence, so a row
    /// another process inserted meanwhile is updated rather than duplicated.
    ///
    /// Updates and deletes check the version column. A row changed or deleted elsewhere
    /// since this context read it is a conflict, resolved by `mergePolicy`; with the
    /// default `.error` the save throws `MergeConflictError` and writes nothing. When a
    /// private context's own transaction cannot write a conflicting row (repeatable read
    /// refuses to), the save is rolled back and redone in a fresh read-committed
    /// transaction that locks the rows, resolves the conflicts and commits. Once saves of
    /// an entity had to be redone so, the coordinator's next saves that write it start in
    /// that mode for a while instead of failing into it (`StoreCoordinator.contentionWindow`;
    /// a save of one object's attributes keeps its one round trip).
    ///
    /// On any failure (but `SaveOutcomeUnknownError`) the database is untouched and the
    /// context keeps its changes for a retry or `rollback()`. After a save a private
    /// context's transaction is over: its next read sees a new snapshot.
    ///
    /// A save ends a pinned snapshot (`pinSnapshot()`), whatever its outcome, as Core
    /// Data's save moves a pinned context to the current generation: the objects keep
    /// the values and versions read in the snapshot, so a row changed since is a conflict
    /// for `mergePolicy` (a private context writes in the pinned transaction itself), and
    /// the changes merges brought while pinned are merged after the save, as one.
    ///
    /// A child context (one with a `parent`) writes nothing: its save pushes its inserts,
    /// changes and deletes into the parent, all or nothing, and the parent holds them as
    /// unsaved changes of its own until it saves (see `newChildContext(name:)`). It throws
    /// `ChildContextError.objectGoneFromParent` when the parent no longer has an object
    /// the changes name; the parent and the child are then left as they were.
    ///
    /// The outcome reported is never wrong, also when the connection breaks at the
    /// `COMMIT`. If the `COMMIT`'s answer arrived, the save succeeded, whatever happens
    /// to the connection afterwards. If the connection broke before it, the save looks
    /// its transaction up on a new connection (by the transaction id the statement sent
    /// just before the `COMMIT`, the change record, returned) before reporting:
    /// committed, and it returns as any successful save does; not committed, and it
    /// throws a lost connection that says so. Only when that cannot be found out within
    /// `StoreCoordinator.commitOutcomeTimeout` does it throw `SaveOutcomeUnknownError`,
    /// leaving the context's changes in place.
    ///
    /// Before anything is sent, every object the save writes is validated: its
    /// attributes' rules (`@Attribute(validate:)`) and its `validateForInsert()`,
    /// `validateForUpdate()` or `validateForDelete()`; any failure throws one
    /// `ObjectValidationError` naming them all, and nothing is sent.
    ///
    /// - Throws: `ObjectValidationError`, `MergeConflictError`, `ManagedObjectError.deleteDenied`,
    ///   `ChildContextError` (a child context),
    ///   `PostgresError` (for example `.uniqueViolation`; a lost connection only when
    ///   nothing was committed: `transactionDidNotCommit` is set and `isTransient` is
    ///   true, so the save may simply be redone), or `SaveOutcomeUnknownError` (not
    ///   transient: the save may have committed; its `transactionID` tells).
    public func save() throws {
        assertOnQueue()
        if let parent {
            try pushChanges(into: parent)
            return
        }
        // A save ends a pinned snapshot first, and merges what came meanwhile after it.
        let deferred = snapshotPin == nil ? nil : endPinForSave()
        defer { if let deferred { mergeDeferredAfterSave(deferred) } }
        guard coordinator.isTracing else {
            return try settlingLostConnections { try SavePipeline(context: self).run() }
        }
        try coordinator.tracing.withSpan(PGDataKitTracing.save) { span in
            if let span { noteSave(in: span) }
            try settlingLostConnections { try SavePipeline(context: self, trace: span).run() }
        }
    }

    /// What a save span says of the save before it runs: the kind of context, and the
    /// objects and entities it writes.
    private func noteSave(in span: TraceSpan) {
        span.set([PGDataKitTracing.context: .string(concurrencyType == .main ? "main" : "private")])
        span.setObjects(
            inserted: insertedSet.count, updated: changedSet.count, deleted: deletedSet.count,
            entities: (Array(insertedSet) + Array(changedSet) + Array(deletedSet)).map(\.entity))
    }

    /// Runs a write that ends in a commit. A lost connection it throws comes from
    /// before the `COMMIT` was sent (one that breaks at the `COMMIT` is settled by the
    /// Store: a success, a lost connection marked not committed, or
    /// `SaveOutcomeUnknownError`), so nothing committed: it is marked so, and transient.
    func settlingLostConnections<T>(_ write: () throws -> T) throws -> T {
        do {
            return try write()
        } catch let error as PostgresError where error.isConnectionError && !error.transactionDidNotCommit {
            throw error.notCommitted()
        }
    }

    // MARK: - Transactions of a save

    /// The transaction writes go into: a private context's own, or a read-committed one
    /// on a borrowed connection for the main context.
    func beginWriteTransaction() throws -> Connection {
        switch concurrencyType {
        case .private: return try transactionConnection()
        case .main: return try coordinator.beginTransaction(isolation: .readCommitted, statementTimeout: statementTimeout)
        }
    }

    /// Rolls a write transaction back and gives its connection back.
    func abortWriteTransaction(_ connection: Connection) {
        transaction.close(ifItIs: connection)
        coordinator.rollbackAndRelease(connection)
    }

    // MARK: - Validation

    /// What a save checks before it writes (a root save) or pushes (a child's): delete
    /// rules, then every object's validation rules and hooks.
    ///
    /// - Throws: `ManagedObjectError.abstractEntity` (an object of an abstract entity is
    ///   to be inserted), `.deleteDenied`, `ObjectValidationError`.
    func validateChanges() throws {
        if coordinator.model.hasAbstractEntities, let object = insertedSet.first(where: { $0.entity.isAbstract }) {
            throw ManagedObjectError.abstractEntity(object.objectID, entity: object.entity.name)
        }
        try validateDeleteRules()
        try validatePendingObjects()
    }

    /// Refuses to save the deletion of an object that still has related objects through a
    /// relationship whose delete rule is `.deny` (a root save checks before it writes, a
    /// child's before it pushes into the parent).
    ///
    /// - Throws: `ManagedObjectError.deleteDenied`.
    func validateDeleteRules() throws {
        for object in deletedSet {
            for relationship in object.entity.relationships where relationship.deleteRule == .deny {
                let remaining = object.relatedObjects(at: relationship.index).filter { !$0.deletedFlag }
                if !remaining.isEmpty {
                    throw ManagedObjectError.deleteDenied(
                        entity: object.entity.name, relationship: relationship.name, objectID: object.objectID,
                        relatedCount: remaining.count)
                }
            }
        }
    }

    /// Refuses to save objects that break rules: each inserted object's attribute rules
    /// and `validateForInsert()`, each changed one's rules and `validateForUpdate()`, each
    /// deleted one's `validateForDelete()` (a root save checks before it sends anything,
    /// a child's before it pushes into the parent). The failures of a changed object with
    /// nothing left to write (changed back) do not count.
    ///
    /// - Throws: `ObjectValidationError` with every failure, objects in the order of their
    ///   first unsaved change.
    func validatePendingObjects() throws {
        var failures: [ValidationFailure] = []
        for (object, membership) in bookkeeping.pending.entries {
            let kind: ValidationKind
            if membership.contains(.deleted) {
                if membership.contains(.inserted) { continue }  // never written
                kind = .delete
            } else if membership.contains(.inserted) {
                kind = .insert
            } else {
                kind = .update
            }
            if let found = object.validationFailures(for: kind),
                kind != .update || object.hasPersistentChangedValues || object.hasJoinChanges
            {
                failures += found
            }
        }
        if !failures.isEmpty { throw ObjectValidationError(failures) }
    }

    // MARK: - Row locations

    /// The location of an object's row when this transaction's import read it.
    func rowLocation(of object: ManagedObject) -> RowLocation? {
        Self.rowLocation(of: object, serial: transaction.locationSerial)
    }

    /// The location of an object's row when an import read it in the transaction of
    /// location serial `serial` (`0`: none): for a loop over many objects, which reads
    /// the serial once (each read of `transaction` is checked for exclusive access at
    /// run time, about 80 instructions).
    static func rowLocation(of object: ManagedObject, serial: UInt16) -> RowLocation? {
        guard serial != 0, let location = RowLocation(packed: object.storage.rowLocation), location.serial == serial
        else { return nil }
        return location
    }
}
