/// The saves written in one round trip: one changed object's attributes and foreign keys
/// (`StoreCoordinator.updateOneRowAndCommit`), one new object
/// (`StoreCoordinator.insertOneRowAndCommit`) or one deleted object
/// (`StoreCoordinator.deleteOneRowAndCommit`), and nothing else.
extension SavePipeline {
    /// The one row a save writes, when that is all it does (`oneRowSave()`).
    enum OneRowSave {
        /// One changed object with a permanent ID: the attributes and to-one relationships
        /// changed, by index.
        case update(ManagedObject, attributes: [Int], toOne: [Int])
        /// One new object: the change record's text with `ChangeLog.keyPlaceholder` for
        /// its key.
        case insert(ManagedObject, record: String)
        /// One deleted object with a permanent ID.
        case delete(ManagedObject)
    }

    /// The save's one row, when it writes one row and nothing else: the update of one
    /// changed object's attributes and foreign keys, the insert of one new object, or the
    /// delete of one object. Such a save needs no lock statement (see `lockRowsInOrder`)
    /// and is written with `saveOneRow`.
    func oneRowSave() -> OneRowSave? {
        if let update = oneRowUpdate() { return .update(update.object, attributes: update.attributes, toOne: update.toOne) }
        return oneRowInsert() ?? oneRowDelete()
    }

    /// The one object a save updates, when that is all it does: one changed object with
    /// a permanent ID, attribute changes and to-one relationships set to saved objects (or
    /// none) by this row's foreign keys, not one-to-one ones (their unique keys may have
    /// to be released from another row first); no join-row changes, no inserts or deletes.
    private func oneRowUpdate() -> (object: ManagedObject, attributes: [Int], toOne: [Int])? {
        guard context.insertedSet.isEmpty, context.deletedSet.isEmpty, context.changedSet.count == 1,
            let object = context.changedSet.first, object.objectID.primaryKey != nil, !object.hasJoinChanges
        else { return nil }
        let toOne = object.changedToOneIndexes
        for index in toOne {
            let relationship = object.entity.relationships[index]
            guard relationship.hasForeignKey, !relationship.isOneToOne else { return nil }
            if case .object(let target) = object.storage.toOne[index], target.objectID.primaryKey == nil { return nil }
        }
        let attributes = object.changedAttributeIndexes
        return attributes.isEmpty && toOne.isEmpty ? nil : (object, attributes, toOne)
    }

    /// The one object a save inserts, when that is all it does: one new object, not an
    /// import's keyed insert (those are upserts), no join rows, its to-one relationships
    /// to saved objects only (their keys are known), nothing else changed or deleted;
    /// with its change record, the key a placeholder. `nil` also when the placeholder
    /// would not be found exactly where the key goes (an entity named like it).
    private func oneRowInsert() -> OneRowSave? {
        guard context.insertedSet.count == 1, context.deletedSet.isEmpty, let object = context.insertedSet.first,
            context.changedSet.allSatisfy({ $0 === object }), object.objectID.primaryKey == nil,
            object.storage.upsertAttributeIndex == nil, !object.hasJoinChanges
        else { return nil }
        let entity = object.entity
        for relationship in entity.toOneRelationships where relationship.index < object.storage.toOne.count {
            if case .object(let target) = object.storage.toOne[relationship.index], target.objectID.primaryKey == nil,
                !target.deletedFlag
            {
                return nil
            }
        }
        var outcome = WriteOutcome()
        outcome.inserted = [(object, ChangeLog.keyPlaceholder)]
        let changes = savedChanges(outcome: outcome, reservedKeys: [:])
        guard let record = try? ChangeLog.encode(changes),
            ChangeLog.placeholderCount(in: record) == (changes.entityNames.isEmpty ? 1 : 2)
        else { return nil }
        return .insert(object, record: record)
    }

    /// The one object a save deletes, when that is all it does: one deleted object with a
    /// permanent ID, of an entity without many-to-many relationships (no join rows to
    /// remove), nothing inserted, nothing else changed (what the delete rules did to other
    /// objects makes them changed or deleted too: such a save takes the general path).
    private func oneRowDelete() -> OneRowSave? {
        guard context.deletedSet.count == 1, context.insertedSet.isEmpty, let object = context.deletedSet.first,
            context.changedSet.allSatisfy({ $0 === object }), object.objectID.primaryKey != nil, !object.hasJoinChanges,
            !object.entity.relationships.contains(where: \.isManyToMany)
        else { return nil }
        return .delete(object)
    }

    /// Saves the one row in one round trip.
    ///
    /// - Returns: `true` when saved; `false` when an updated or deleted row was not at the
    ///   version read: the caller redoes the save resolving conflicts.
    func saveOneRow(_ only: OneRowSave, on connection: Connection) throws -> Bool {
        switch only {
        case .update(let object, let attributes, let toOne):
            try saveOneRowUpdate(object, attributes: attributes, toOne: toOne, on: connection)
        case .insert(let object, let record): try saveOneRowInsert(object, record: record, on: connection)
        case .delete(let object): try saveOneRowDelete(object, on: connection)
        }
    }

    /// Saves a one-row update in one round trip (`StoreCoordinator.updateOneRowAndCommit`).
    ///
    /// - Returns: `true` when saved; `false` when the row was not at the version read
    ///   (or a transient failure such as a serialization failure ended the
    ///   transaction): the caller redoes the save resolving conflicts.
    private func saveOneRowUpdate(
        _ object: ManagedObject, attributes: [Int], toOne: [Int], on connection: Connection
    ) throws -> Bool {
        let entity = object.entity
        var keys = Set(attributes.map { entity.attributes[$0].name })
        keys.formUnion(toOne.map { entity.relationships[$0].name })
        var outcome = WriteOutcome()
        outcome.updated = [(object, keys, object.storage.version)]
        let changes = savedChanges(outcome: outcome, reservedKeys: [:])
        let rows: RowBatch
        if toOne.isEmpty {
            rows = RowBatch(
                keys: [object.objectID.primaryKey ?? 0], versions: [object.storage.version],
                attributes: attributes.map { entity.attributes[$0] }, values: [object.storage.sharedValues()])
        } else {
            var saveKeys = SaveKeys(keys: [:])
            rows = saveKeys.rows([object], entity, attributes: attributes, toOne: toOne)
        }
        let result = try committing(on: connection) {
            try context.coordinator.updateOneRowAndCommit(of: entity, rows, changes: changes, on: connection)
        }
        switch result {
        case .conflict:
            return false
        case .committed(let version):
            outcome.updated[0].version = version
            finished(outcome: outcome, reservedKeys: [:], changes: changes)
            return true
        }
    }

    /// Saves a one-object insert in one round trip (`StoreCoordinator.insertOneRowAndCommit`):
    /// the key is drawn by the statement, the object gets its permanent ID once it
    /// committed, as after any save.
    ///
    /// - Returns: `true` (saved).
    /// - Throws: as `insertOneRowAndCommit`, or `ManagedObjectError.invalidStoredValue`
    ///   should its committed answer not hold the key (which it always does).
    private func saveOneRowInsert(_ object: ManagedObject, record: String, on connection: Connection) throws -> Bool {
        let entity = object.entity
        var keys = SaveKeys(keys: [:])
        var rows = keys.rows(
            [object], entity, attributes: Array(entity.attributes.indices), toOne: entity.toOneRelationships.map(\.index),
            withKeys: false)
        rows.versions = []
        let inserted = try committing(on: connection) {
            try context.coordinator.insertOneRowAndCommit(into: entity, rows, record: record, on: connection)
        }
        guard let key = inserted else {
            // (Committed, but its answer did not say the key: the object cannot be given
            // its permanent ID. The statement answers with it whenever it inserts.)
            throw ManagedObjectError.invalidStoredValue(
                entity: entity.name, key: entity.primaryKeyColumn, primaryKey: 0,
                reason: "the one-object insert committed, but its answer did not hold the new key")
        }
        var outcome = WriteOutcome()
        outcome.inserted = [(object, key)]
        let reservedKeys = [ObjectIdentifier(object): key]
        finished(outcome: outcome, reservedKeys: reservedKeys, changes: savedChanges(outcome: outcome, reservedKeys: reservedKeys))
        return true
    }

    /// Saves a one-object delete in one round trip (`StoreCoordinator.deleteOneRowAndCommit`).
    ///
    /// - Returns: `true` when saved; `false` when the row was gone or not at the version
    ///   read: the caller redoes the save resolving conflicts (the merge policy decides).
    private func saveOneRowDelete(_ object: ManagedObject, on connection: Connection) throws -> Bool {
        var outcome = WriteOutcome()
        outcome.deleted = [object]
        let changes = savedChanges(outcome: outcome, reservedKeys: [:])
        let deleted = try committing(on: connection) {
            try context.coordinator.deleteOneRowAndCommit(
                of: object.entity, key: object.objectID.primaryKey ?? 0, version: object.storage.version, changes: changes,
                on: connection)
        }
        guard deleted else { return false }
        finished(outcome: outcome, reservedKeys: [:], changes: changes)
        return true
    }

    /// Runs a one-row save's statement and commit: the write transaction is closed when
    /// it returns, aborted (rolled back, the connection given back) when it throws.
    private func committing<T>(on connection: Connection, _ body: () throws -> T) throws -> T {
        let result: T
        do {
            result = try body()
        } catch {
            context.abortWriteTransaction(connection)
            throw error
        }
        context.transaction.close(ifItIs: connection)
        return result
    }

    /// What follows a one-row save's commit: the metrics, the objects' bookkeeping, the
    /// observers (`finishSave`).
    private func finished(outcome: WriteOutcome, reservedKeys: [ObjectIdentifier: Int64], changes: ContextChanges) {
        context.coordinator.metrics.saved(changes, context: context.concurrencyType == .main ? "main" : "private")
        finishSave(outcome: outcome, reservedKeys: reservedKeys, changes: changes)
        context.resolvedConflicts = []
    }
}
