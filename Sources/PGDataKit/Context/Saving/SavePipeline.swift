import Foundation

/// One save of a root context: plan → row locks → statements → commit → outcome, driven
/// by `SaveStateMachine` (which decides the path: nothing to write, one row in one round
/// trip, the context's own transaction, the read-committed redo that resolves conflicts).
/// `ManagedObjectContext.save()` makes one and runs it; it lives for that save.
///
/// `SavePlan` decides what is written; the pipeline sends it through the context's
/// `coordinator` on a connection from the context's write transaction
/// (`beginWriteTransaction`, `abortWriteTransaction`, `transaction`). It reads the
/// context's pending changes (`insertedSet`, `changedSet`, `deletedSet`, through
/// `bookkeeping`), `mergePolicy` and `concurrencyType`; after a commit it writes the
/// context's state: the objects' IDs and committed values, the registry and pending
/// changes (`bookkeeping`), `resolvedConflicts`, and it tells the did-save `observers`.
struct SavePipeline {
    /// The context whose changes this save writes (held for the one save).
    let context: ManagedObjectContext
    /// The save's span, when a tracer is bootstrapped: told of each redo.
    var trace: TraceSpan? = nil

    /// `save()`'s work: the shell of a `SaveStateMachine`, which decides the path (one
    /// round trip, the own transaction, the read-committed redo) and what is counted; this
    /// runs the statements and tells it how each attempt ended.
    func run() throws {
        var machine = SaveStateMachine()
        let hasChanges = context.hasUnsavedChanges
        if hasChanges { try context.validateChanges() }
        let only = hasChanges ? oneRowSave() : nil
        let contention = context.coordinator.saveContention
        let contended = hasChanges && only == nil && contention.mayBeContended && contention.isContended(entityNames())
        var step = machine.start(hasChanges: hasChanges, oneRow: only != nil, contended: contended)
        var reservedKeys: [ObjectIdentifier: Int64] = [:]
        var overwrite: Set<ObjectIdentifier> = []
        var own: (connection: Connection, outcome: WriteOutcome)?
        var lastError: (any Error)?
        while true {
            context.coordinator.metrics.transientFailure(step.failure)
            switch step.action {
            case .finishWithoutWriting:
                context.endTransaction()
                context.resolvedConflicts = []
                context.undoManager?.removeAllActions()
                return
            case .saveOneRow:
                guard let only else { preconditionFailure("a one-row save without its row") }
                let connection = try context.beginWriteTransaction()
                do {
                    step = try saveOneRow(only, on: connection) ? machine.committed() : machine.versionMissed()
                } catch {
                    lastError = error
                    step = machine.failed(.of(error))
                }
            case .writeInOwnTransaction:
                let connection = try context.beginWriteTransaction()
                do {
                    let outcome = try writeChanges(on: connection, reservedKeys: &reservedKeys, overwrite: overwrite, locked: nil)
                    if outcome.conflicts.isEmpty { own = (connection, outcome) } else { context.abortWriteTransaction(connection) }
                    step = machine.written(conflicts: !outcome.conflicts.isEmpty)
                } catch {
                    context.abortWriteTransaction(connection)
                    lastError = error
                    step = machine.failed(.of(error))
                }
            case .commit:
                guard let (connection, outcome) = own else { preconditionFailure("a commit without its transaction") }
                do {
                    try commitSave(on: connection, outcome: outcome, reservedKeys: reservedKeys)
                    context.resolvedConflicts = []
                    step = machine.committed()
                } catch {
                    context.abortWriteTransaction(connection)
                    lastError = error
                    step = machine.failed(.of(error))
                }
            case .resolveConflictsFirst:
                context.logger.debug("save started in a read-committed transaction that locks its rows (contended entities)")
                // The own transaction's snapshot is of no use to it: given back first.
                let continuing = context.transaction.isOpen
                context.endTransaction()
                let connection = try context.coordinator.beginTransaction(
                    isolation: .readCommitted, statementTimeout: context.statementTimeout, continuesWork: continuing)
                step = resolveConflicts(on: connection, &machine, &reservedKeys, &overwrite, &lastError)
            case .resolveConflicts(let attempt):
                context.coordinator.metrics.retry(step.failure, unit: "save")
                trace?.retried(step.failure)
                context.logger.debug(
                    "save redone in a read-committed transaction (attempt \(attempt), after \((step.failure ?? .other).rawValue))")
                if attempt == 1, Self.meansContention(step.failure) { contention.noteContention(on: entityNames()) }
                let connection = try context.coordinator.beginTransaction(
                    isolation: .readCommitted, statementTimeout: context.statementTimeout, continuesWork: true)
                step = resolveConflicts(on: connection, &machine, &reservedKeys, &overwrite, &lastError)
            case .finished:
                return
            case .throwError:
                throw lastError ?? CancellationError()
            case .throwLockError:
                guard let met = lastError as? KeyedInsertsMetUnlockedRows else { throw lastError ?? CancellationError() }
                throw met.lockError
            }
        }
    }

    /// One attempt in the redo's mode (`resolveConflictsAndCommit`) on a read-committed
    /// transaction just begun; the machine's next step.
    private func resolveConflicts(
        on connection: Connection, _ machine: inout SaveStateMachine, _ reservedKeys: inout [ObjectIdentifier: Int64],
        _ overwrite: inout Set<ObjectIdentifier>, _ lastError: inout (any Error)?
    ) -> SaveStateMachine.Step {
        do {
            try resolveConflictsAndCommit(on: connection, reservedKeys: &reservedKeys, overwrite: &overwrite)
            return machine.committed()
        } catch {
            lastError = error
            return machine.failed(.of(error))
        }
    }

    /// Whether a first attempt that failed with this cause met another transaction's
    /// work on its rows (so that its entities are contended), rather than a lost
    /// connection or statement.
    private static func meansContention(_ cause: TransientCause?) -> Bool {
        switch cause {
        case .conflict?, .serialization?, .deadlock?, .rowHeld?: true
        default: false
        }
    }

    /// The names of the entities the save writes (inserts, updates, deletes): what
    /// `SaveContention` remembers and is asked about.
    private func entityNames() -> Set<String> {
        var names: Set<String> = []
        for set in [context.insertedSet, context.changedSet, context.deletedSet] {
            for object in set where !names.contains(object.entity.name) { names.insert(object.entity.name) }
        }
        return names
    }

    // MARK: - Commit

    /// Writes the change record (which queues the notification) and commits in one round
    /// trip, then updates the objects and tells observers. When the connection breaks at
    /// the `COMMIT`, the Store finds out whether it committed: if it did, this returns
    /// and the save finishes as any other.
    private func commitSave(on connection: Connection, outcome: WriteOutcome, reservedKeys: [ObjectIdentifier: Int64]) throws {
        let ahead = outcome.recordAhead
        if ahead != nil { context.coordinator.recordsMadeAhead.add(1, ordering: .relaxed) }
        let changes = ahead?.changes ?? savedChanges(outcome: outcome, reservedKeys: reservedKeys)
        try context.coordinator.recordChangesAndCommit(changes, encoded: ahead?.encoded, on: connection)
        context.transaction.close(ifItIs: connection)
        context.coordinator.metrics.saved(changes, context: context.concurrencyType == .main ? "main" : "private")
        finishSave(outcome: outcome, reservedKeys: reservedKeys, changes: changes)
    }

    /// Above how many objects `savedChanges` reserves room in its sets at once.
    static let reservingCount = 8

    /// What a save changes, with the permanent IDs its inserted objects will have; with
    /// `alsoUpdated`, as if those objects had been updated too, changing `keys`
    /// (`RecordAhead`).
    func savedChanges(
        outcome: WriteOutcome, reservedKeys: [ObjectIdentifier: Int64],
        alsoUpdated: (objects: [ManagedObject], keys: Set<String>)? = nil
    ) -> ContextChanges {
        var changes = ContextChanges()
        // Room reserved only for a batch: reserving room for none in an empty set copies
        // its shared empty storage, and `reserveCapacity` is not specialized for the
        // element type (over a thousand instructions a call, for a one-object save more
        // than its first `insert`, which makes the room it needs).
        let updates = outcome.updated.count + outcome.merged.count + (alsoUpdated?.objects.count ?? 0)
        if outcome.inserted.count > Self.reservingCount { changes.inserted.reserveCapacity(outcome.inserted.count) }
        if updates > Self.reservingCount {
            changes.updated.reserveCapacity(updates)
            changes.changedKeys.reserveCapacity(updates)
        }
        for (object, key) in outcome.inserted {
            let id = ObjectID(entityName: object.entity.rootEntityName, primaryKey: key)
            changes.inserted.insert(id)
            if object.entity.superentityName != nil { changes.entityNames[id] = object.entity.name }
        }
        for (object, keys, _) in outcome.updated {
            changes.updated.insert(object.objectID)
            changes.changedKeys[object.objectID] = keys
            if object.entity.superentityName != nil { changes.entityNames[object.objectID] = object.entity.name }
        }
        if let (objects, keys) = alsoUpdated {
            for object in objects {
                changes.updated.insert(object.objectID)
                changes.changedKeys[object.objectID] = keys
                if object.entity.superentityName != nil { changes.entityNames[object.objectID] = object.entity.name }
            }
        }
        for merged in outcome.merged {
            guard let keys = merged.changedKeys else { continue }
            let id = ObjectID(entityName: merged.object.entity.rootEntityName, primaryKey: merged.primaryKey)
            changes.updated.insert(id)
            changes.changedKeys[id] = keys
            if merged.object.entity.superentityName != nil { changes.entityNames[id] = merged.object.entity.name }
        }
        for object in outcome.deleted {
            changes.deleted.insert(object.objectID)
            if object.entity.superentityName != nil { changes.entityNames[object.objectID] = object.entity.name }
        }
        return changes
    }

    /// One read-committed redo of a save: locks the rows of updated and deleted objects,
    /// compares versions, applies the merge policy, writes, commits. Keyed inserts that
    /// meet a row committed after the redo looked them up (while it waited for its locks)
    /// and held by another transaction throw `KeyedInsertsMetUnlockedRows`: the state
    /// machine starts over, up to three times.
    private func resolveConflictsAndCommit(
        on connection: Connection, reservedKeys: inout [ObjectIdentifier: Int64], overwrite: inout Set<ObjectIdentifier>
    ) throws {
        do {
            let (conflicts, locked) = try lockAndFindConflicts(on: connection)
            if !conflicts.isEmpty || !(locked.keyedRows ?? [:]).isEmpty {
                // Rows moved since they were read, or keys were committed since the import
                // looked: a first attempt in the own transaction would have failed.
                context.coordinator.saveContention.noteContention(on: entityNames())
            }
            if !conflicts.isEmpty {
                if context.mergePolicy == .error {
                    throw MergeConflictError(conflicts: conflicts.map(\.report))
                }
                resolve(conflicts, overwrite: &overwrite)
            }
            let settled = conflicts.map(\.report)
            let outcome = try writeChanges(on: connection, reservedKeys: &reservedKeys, overwrite: overwrite, locked: locked)
            guard outcome.conflicts.isEmpty else {
                // The rows are locked, so this means they changed in a way we cannot see.
                throw MergeConflictError(conflicts: outcome.conflicts.map {
                    MergeConflict(
                        objectID: $0.objectID, snapshotVersion: $0.storage.version, storeVersion: nil,
                        snapshotValues: [:], objectValues: [:], storeValues: nil)
                })
            }
            try commitSave(on: connection, outcome: outcome, reservedKeys: reservedKeys)
            context.resolvedConflicts = settled
        } catch {
            context.abortWriteTransaction(connection)
            throw error
        }
    }

    // MARK: - Conflicts

    /// An updated or deleted object whose row moved on since it was read (or is gone),
    /// found by a read-committed redo (`lockAndFindConflicts`).
    struct Conflict {
        /// The object of this context.
        let object: ManagedObject
        /// The row's version now; `nil` when the row is gone (and so the next three).
        let storeVersion: Int64?
        /// The row's attribute values now, by attribute index.
        let storeValues: [StoredValue]?
        /// The row's to-one foreign keys now, by relationship index.
        let storeKeys: [Int64?]?
        /// What `MergeConflictError` and `resolvedConflicts` report.
        let report: MergeConflict
    }

    /// Locks the rows the save writes in the global order (`lockRowsInOrder`, with the
    /// rows keyed inserts will meet), reads the updated and deleted ones (one query per
    /// entity, after the locks: what they read stays so until the commit), and returns
    /// those whose version moved or whose row is gone, with what it locked (the keyed
    /// inserts whose rows it found, where the rows to write are).
    private func lockAndFindConflicts(on connection: Connection) throws -> (conflicts: [Conflict], locked: LockedRows) {
        let locked = try lockRowsInOrder(on: connection, keyedRows: true, beforeReading: true)
        let candidates = Set(context.changedSet.lazy.filter { !context.insertedSet.contains($0) && $0.objectID.primaryKey != nil })
            .union(context.deletedSet)
        var conflicts: [Conflict] = []
        for entity in context.coordinator.model.insertOrder {
            let objects = candidates.filter { $0.entity.name == entity.name }
            guard !objects.isEmpty else { continue }
            var rows: [Int64: Row] = [:]
            let keys = objects.compactMap(\.objectID.primaryKey)
            for row in try context.coordinator.selectObjects(of: entity, .keys(keys, of: entity), on: connection) {
                rows[try row.decode(Int64.self, at: 0)] = row
            }
            for object in objects {
                guard let key = object.objectID.primaryKey else { continue }
                let snapshotValues = Dictionary(
                    uniqueKeysWithValues: entity.attributes.map { ($0.name, object.storage.snapshot?[$0.index].anyValue) })
                let objectValues = Dictionary(
                    uniqueKeysWithValues: object.changedAttributeIndexes.map {
                        (entity.attributes[$0].name, object.storage.value(at: $0).anyValue)
                    })
                guard let row = rows[key] else {
                    let report = MergeConflict(
                        objectID: object.objectID, snapshotVersion: object.storage.version, storeVersion: nil,
                        snapshotValues: snapshotValues, objectValues: objectValues, storeValues: nil)
                    conflicts.append(Conflict(object: object, storeVersion: nil, storeValues: nil, storeKeys: nil, report: report))
                    continue
                }
                let storeVersion = try row.decode(Int64.self, at: 1)
                guard storeVersion != object.storage.version else { continue }
                var storeValues: [StoredValue] = []
                var column = 2
                for attribute in entity.attributes {
                    do {
                        storeValues.append(try row.withCell(at: column) { try attribute.decode($0) })
                    } catch let error as PostgresValueError {
                        // (An array with a `NULL` element, a `numeric` too long for a
                        // `Decimal`: named as a fetch names it.)
                        throw ManagedObjectError.invalidStoredValue(
                            entity: entity.name, key: attribute.name, primaryKey: key, reason: "\(error)")
                    }
                    column += 1
                }
                // (The merge policy may put them into the object: checked as a fetch does.)
                try entity.checkStoredValues(storeValues, primaryKey: key)
                var storeKeys: [Int64?] = Array(repeating: nil, count: entity.relationships.count)
                for relationship in entity.toOneRelationships {
                    storeKeys[relationship.index] = try row.decode(Int64?.self, at: column)
                    column += 1
                }
                let report = MergeConflict(
                    objectID: object.objectID, snapshotVersion: object.storage.version, storeVersion: storeVersion,
                    snapshotValues: snapshotValues, objectValues: objectValues,
                    storeValues: Dictionary(uniqueKeysWithValues: entity.attributes.map { ($0.name, storeValues[$0.index].anyValue) }))
                conflicts.append(
                    Conflict(object: object, storeVersion: storeVersion, storeValues: storeValues, storeKeys: storeKeys, report: report))
            }
        }
        return (conflicts, locked)
    }

    /// Applies the merge policy to conflicting objects in memory.
    private func resolve(_ conflicts: [Conflict], overwrite: inout Set<ObjectIdentifier>) {
        for conflict in conflicts {
            let object = conflict.object
            guard let storeVersion = conflict.storeVersion, let storeValues = conflict.storeValues,
                let storeKeys = conflict.storeKeys
            else {
                // The row is gone: nothing left to update or delete.
                context.forgetDeletedObject(object)
                continue
            }
            let entity = object.entity
            let changedAttributes = Set(object.changedAttributeIndexes)
            let changedToOne = Set(object.changedToOneIndexes)
            let isDelete = context.deletedSet.contains(object)
            if case .error = context.mergePolicy { continue }
            // (One block for the stored row: after a rollback, values and snapshot share it.)
            let storeRun = AttributeValues(storeValues)
            switch context.mergePolicy {
            case .error:
                continue
            case .mergeByPropertyStoreTrump:
                for attribute in entity.attributes {
                    let index = attribute.index
                    let storeChanged = storeValues[index] != (object.storage.snapshot?[index] ?? .null)
                    if !changedAttributes.contains(index) || storeChanged { object.storage.initialize(storeValues[index], at: index) }
                }
                for index in entity.toOneRelationships.map(\.index) {
                    let committed = object.storage.snapshotKeys.count > index ? object.storage.snapshotKeys[index] : nil
                    if !changedToOne.contains(index) || storeKeys[index] != committed {
                        object.setReference(storeKeys[index].map { .key($0) } ?? .none, at: index)
                    }
                }
            case .mergeByPropertyObjectTrump:
                for index in entity.attributes.indices where !changedAttributes.contains(index) {
                    object.storage.initialize(storeValues[index], at: index)
                }
                for index in entity.toOneRelationships.map(\.index) where !changedToOne.contains(index) {
                    object.setReference(storeKeys[index].map { .key($0) } ?? .none, at: index)
                }
            case .overwrite:
                overwrite.insert(ObjectIdentifier(object))
            case .rollback:
                object.storage.replaceValues(storeRun)
                for index in entity.toOneRelationships.map(\.index) {
                    object.setReference(storeKeys[index].map { .key($0) } ?? .none, at: index)
                }
                if isDelete {
                    context.bookkeeping.pending.remove(object, from: .deleted)
                    object.setDeleted(false)
                }
            }
            // The object now stands on the store's row.
            object.storage.replaceSnapshot(storeRun, keys: storeKeys)
            object.storage.setVersion(storeVersion)
            object.storage.forgetLoaded()
        }
    }

    // MARK: - After the commit

    /// Updates the objects after a commit and tells did-save observers (the context
    /// manager among them).
    func finishSave(outcome: WriteOutcome, reservedKeys: [ObjectIdentifier: Int64], changes: ContextChanges) {
        context.bookkeeping.reserveRegistry(adding: outcome.inserted.count)
        // Child contexts may hold the temporary IDs: the new IDs are noted for their saves.
        let notesIDs = context.liveChildren.load(ordering: .relaxed) > 0
        if !notesIDs { context.bookkeeping.forgetSavedIDs() }
        // When the save's inserts are every object the context holds by a temporary ID
        // (always, unless an earlier save failed half-way), their temporary entries go at
        // once after the loop instead of one by one.
        let movesEveryTemporary = outcome.merged.isEmpty && context.bookkeeping.temporaryCount == outcome.inserted.count
        for (object, key) in outcome.inserted {
            let temporary = object.objectID
            let permanent = ObjectID(entityName: object.entity.rootEntityName, primaryKey: key)
            if notesIDs { context.bookkeeping.noteSavedID(permanent, forTemporary: temporary) }
            object.objectID = permanent
            context.bookkeeping.rekey(object, from: temporary, to: permanent, keepingTemporary: movesEveryTemporary)
            object.commitSaved(version: 1)
        }
        if movesEveryTemporary && !outcome.inserted.isEmpty { context.bookkeeping.dropTemporaries() }
        for merged in outcome.merged {
            if notesIDs {
                context.bookkeeping.noteSavedID(
                    ObjectID(entityName: merged.object.entity.rootEntityName, primaryKey: merged.primaryKey), forTemporary: merged.object.objectID)
            }
            finishMergedInsert(merged)
        }
        // The values the updates replaced are released while the next statement runs
        // (a private root context's, as `reset()`'s objects are).
        if context.concurrencyType == .private && context.parent == nil && outcome.updated.count > Self.reservingCount {
            var replaced: [AttributeValues] = []
            replaced.reserveCapacity(outcome.updated.count)
            for (object, _, version) in outcome.updated { object.commitSaved(version: version, replaced: &replaced) }
            context.bookkeeping.retireValues(replaced)
        } else {
            for (object, _, version) in outcome.updated { object.commitSaved(version: version) }
        }
        // The rows are gone: touching these objects is `objectDeleted`, as for rows
        // deleted elsewhere.
        for object in outcome.deleted { context.forgetDeletedObject(object) }
        context.commitJoinChanges()
        context.bookkeeping.clearKeyedInsertKeysChanged()
        // The objects just updated carry no changes now; only the others are looked at.
        if outcome.updated.count == context.bookkeeping.pending.count(of: .changed) {
            // Every changed object was updated (they all come from it): nothing is left.
            context.bookkeeping.pending.removeAll(keepingCapacity: false)
        } else {
            context.bookkeeping.pending.removeAll(.inserted)
            context.bookkeeping.pending.removeAll(.deleted)
            for (object, _, _) in outcome.updated { context.bookkeeping.pending.remove(object, from: .changed) }
            context.bookkeeping.pending.removeAll(.changed) { object in
                guard object.managedObjectContext === context else { return true }
                if object.hasPersistentChangedValues { return false }
                object.storage.markClean()  // (its values are its snapshot's: it leaves the set)
                return true
            }
        }
        context.undoManager?.removeAllActions()
        context.observers.postDidSave(changes)
    }
}
