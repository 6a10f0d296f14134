/// A save's writes: `SavePlan` decides them, the functions here send them on the
/// save's connection and collect what the server answered.
extension SavePipeline {
    /// What a save's statements did, for the commit and the objects' bookkeeping.
    struct WriteOutcome {
        /// The objects inserted, with their primary keys (reserved, or assigned by their
        /// upsert).
        var inserted: [(object: ManagedObject, primaryKey: Int64)] = []
        /// The objects updated, with the keys written and the rows' new versions.
        var updated: [(object: ManagedObject, keys: Set<String>, version: Int64)] = []
        var deleted: [ManagedObject] = []
        var conflicts: [ManagedObject] = []
        /// Keyed inserts that met an existing row (see `upsertKeyedInserts`).
        var merged: [MergedInsert] = []
        /// Whether a write after the updates added keys to an update already here (a
        /// changed many-to-many set's name, `writeJoinTableChanges`).
        var updatedKeysWidened = false
        /// The change record made while the last `UPDATE` ran, when it is this outcome's
        /// (`RecordAhead`).
        var recordAhead: RecordAhead?
    }

    /// The primary keys a save's statements use for new objects: reserved ones, and the
    /// ones upserts assigned.
    struct SaveKeys {
        /// Reserved keys, and upserted ones once one was looked up.
        var keys: [ObjectIdentifier: Int64]
        /// The keys upserts gave their objects: folded into `keys` only when one is looked
        /// up (a later entity's foreign key, an update); an import's save usually never is.
        var upserted: [(object: ManagedObject, primaryKey: Int64)] = []

        /// A new object's key, if it has one yet.
        @inline(__always)
        mutating func knownKey(of object: ManagedObject) -> Int64? {
            if let key = keys[ObjectIdentifier(object)] { return key }
            guard !upserted.isEmpty else { return nil }
            keys.reserveCapacity(keys.count + upserted.count)
            for (object, key) in upserted { keys[ObjectIdentifier(object)] = key }
            upserted.removeAll()
            return keys[ObjectIdentifier(object)]
        }

        /// The object's primary key: its permanent ID's, or its new key.
        @inline(__always)
        mutating func key(of object: ManagedObject) -> Int64 {
            object.objectID.primaryKey ?? knownKey(of: object) ?? 0
        }

        /// The foreign key a to-one relationship of the object writes.
        @inline(__always)
        mutating func foreignKey(_ object: ManagedObject, _ index: Int) -> Int64? {
            switch object.storage.toOne[index] {
            case .none: return nil
            case .key(let key): return key
            case .object(let target):
                if target.deletedFlag && target.objectID.isTemporaryID { return nil }
                return target.objectID.primaryKey ?? knownKey(of: target)
            }
        }

        /// The rows of objects of one entity, with the attributes and to-one
        /// relationships given by index.
        mutating func rows(
            _ objects: [ManagedObject], _ entity: EntityDescription, attributes: [Int], toOne: [Int], withKeys: Bool = true
        ) -> RowBatch {
            RowBatch(
                keys: withKeys ? objects.map { key(of: $0) } : [], versions: objects.map(\.storage.version),
                attributes: attributes.map { entity.attributes[$0] }, values: objects.map { $0.storage.sharedValues() },
                foreignKeys: toOne.compactMap { index in
                    entity.relationships[index].columnName.map { ($0, objects.map { foreignKey($0, index) }) }
                })
        }
    }

    /// Plans what a save writes (`SavePlan`) and has the Store send it on a connection
    /// inside a transaction: keys, row locks in the global order (`lockRowsInOrder`,
    /// unless the caller took them: `locked` is then what it found of the keyed inserts'
    /// rows), inserts in foreign-key order, updates grouped by shape (by row location
    /// where the locks found the rows so), join rows, deletes children first.
    func writeChanges(
        on connection: Connection, reservedKeys: inout [ObjectIdentifier: Int64],
        overwrite: Set<ObjectIdentifier>, locked: LockedRows?
    ) throws -> WriteOutcome {
        let plan = SavePlan(
            model: context.coordinator.model, inserted: context.insertedSet, changed: context.changedSet, deleted: context.deletedSet,
            overwrite: overwrite, reservedKeys: reservedKeys, keyedInsertKeysChanged: context.bookkeeping.keyedInsertKeysChanged)
        // Keyed inserts (imports) get their primary keys from their upsert.
        for inserts in plan.inserts where !inserts.needingKeys.isEmpty {
            let keys = try context.coordinator.reserveKeys(for: inserts.entity, count: inserts.needingKeys.count, on: connection)
            for (object, key) in zip(inserts.needingKeys, keys) { reservedKeys[ObjectIdentifier(object)] = key }
        }
        var keys = SaveKeys(keys: reservedKeys)
        var locked = locked
        var updatesAhead: UpdatesAhead?
        if locked == nil {
            updatesAhead = bindUpdatesAhead(plan, keys: keys, on: connection)
            defer { if updatesAhead != nil { connection.doWhileWaiting(nil) } }
            // The main context's imports looked for their keys in earlier transactions:
            // rows committed since then, which its keyed inserts would meet (and lock) out
            // of order, are looked up and locked in order first. A private context looked
            // in this same transaction, so its keyed inserts rarely meet a row: one
            // committed since fails its claim at once under repeatable read (`40001`);
            // under read committed it is locked without waiting, and when another
            // transaction holds it (`KeyedInsertsMetUnlockedRows`) the save is redone
            // read-committed, looking such rows up first (`SaveStateMachine`).
            locked = try lockRowsInOrder(
                on: connection, keyedRows: context.concurrencyType == .main, updates: plan.updates)
        }
        let lockedKeyedRows = locked?.keyedRows
        var locations = locked?.locations ?? [:]
        // (Rows whose keys were cleared moved: they are written by key.)
        for cleared in try releaseOneToOneKeys(on: connection) { locations[cleared] = nil }
        var outcome = WriteOutcome()
        for inserts in plan.inserts {
            try writeInserts(inserts, keys: &keys, outcome: &outcome, lockedKeyedRows: lockedKeyedRows, on: connection)
        }
        let ahead = try writeUpdates(
            plan.updates, keys: &keys, locations: locations, outcome: &outcome, bound: updatesAhead,
            recordAhead: makesRecordAhead(plan) ? reservedKeys : nil, on: connection)
        try context.writeJoinTableChanges(on: connection, reservedKeys: keys.keys, outcome: &outcome)
        try writeDeletes(plan.deletes, keys: &keys, locations: locations, outcome: &outcome, on: connection)
        if let ahead, ahead.fits(outcome) { outcome.recordAhead = ahead }
        return outcome
    }

    /// Inserts an entity's new objects: the plain ones in key order with one `INSERT`,
    /// the keyed ones as upserts.
    private func writeInserts(
        _ inserts: SavePlan.Inserts, keys: inout SaveKeys, outcome: inout WriteOutcome,
        lockedKeyedRows: [ObjectIdentifier: Int64]?, on connection: Connection
    ) throws {
        let entity = inserts.entity
        let plain = inserts.plain.sorted { keys.key(of: $0) < keys.key(of: $1) }
        if !plain.isEmpty {
            var batch = keys.rows(
                plain, entity, attributes: Array(entity.attributes.indices), toOne: entity.toOneRelationships.map(\.index))
            batch.versions = Array(repeating: 1, count: plain.count)
            try context.coordinator.insertRows(into: entity, batch, on: connection)
            outcome.inserted += plain.map { ($0, keys.key(of: $0)) }
        }
        guard !inserts.keyed.isEmpty else { return }
        let sendsKeys = Self.keyedInsertsSendKeys(entity)
        let upserted = try upsertKeyedInserts(inserts.keyed, of: entity, lockedRows: lockedKeyedRows, on: connection) { objects, attributes, toOne in
            keys.rows(objects, entity, attributes: attributes, toOne: toOne, withKeys: sendsKeys)
        }
        if !upserted.merged.isEmpty {
            try refuseKeyedInsertsMeetingPlainOnes(upserted.merged, plain: plain, of: entity) { keys.key(of: $0) }
        }
        if outcome.inserted.isEmpty { outcome.inserted = upserted.inserted } else { outcome.inserted += upserted.inserted }
        outcome.merged += upserted.merged
        if keys.upserted.isEmpty { keys.upserted = upserted.inserted } else { keys.upserted += upserted.inserted }
        keys.upserted += upserted.merged.map { ($0.object, $0.primaryKey) }
    }

    /// Updates changed objects, one statement per shape; a row not at the version read
    /// is a conflict. Rows whose locations the locks found (`locations`) are found there.
    /// Groups `bound` ahead (`UpdatesAhead`) are sent as bound. With `recordAhead` (the
    /// save's reserved keys), the last statement makes the save's change record while it
    /// runs (`RecordAhead`), returned.
    private func writeUpdates(
        _ groups: [(shape: SavePlan.UpdateShape, objects: [ManagedObject])], keys: inout SaveKeys,
        locations: [String: LockedLocations], outcome: inout WriteOutcome, bound: UpdatesAhead?,
        recordAhead: [ObjectIdentifier: Int64]?, on connection: Connection
    ) throws -> RecordAhead? {
        var ahead: RecordAhead?
        for (position, (shape, objects)) in groups.enumerated() {
            guard let entity = objects.first?.entity else { continue }
            let early = bound?.group(position)
            if early != nil { context.coordinator.updatesBoundAhead.add(1, ordering: .relaxed) }
            var rows = early?.rows ?? keys.rows(objects, entity, attributes: shape.attributeIndexes, toOne: shape.toOneIndexes)
            if let located = locations[entity.rootEntityName], located.suits(objects.count) { rows.locations = located.parameter }
            var changedKeys = Set(shape.attributeIndexes.map { entity.attributes[$0].name })
            changedKeys.formUnion(shape.toOneIndexes.map { entity.relationships[$0].name })
            if let reservedKeys = recordAhead, position == groups.count - 1 {
                ahead = makeRecordAhead(
                    after: outcome, updating: objects, changedKeys: changedKeys, reservedKeys: reservedKeys, on: connection)
            }
            defer { if ahead != nil { connection.doWhileWaiting(nil) } }
            let written = try context.coordinator.updateRows(
                of: entity, rows, bound: early.map { ($0.arrays, $0.types) }, checksVersion: !shape.overwrite, on: connection)
            for object in objects {
                guard let newVersion = written[RowKey(keys.key(of: object))] else {
                    outcome.conflicts.append(object)
                    continue
                }
                outcome.updated.append((object, changedKeys, newVersion))
            }
        }
        return ahead
    }

    /// Deletes objects entity by entity; a row not deleted is a conflict. Rows whose
    /// locations the locks found (`locations`) are found there.
    private func writeDeletes(
        _ deletes: [SavePlan.Deletes], keys: inout SaveKeys, locations: [String: LockedLocations],
        outcome: inout WriteOutcome, on connection: Connection
    ) throws {
        for delete in deletes {
            var removed: Set<Int64> = []
            for (checksVersion, batch) in delete.batches {
                let located = locations[delete.entity.rootEntityName].flatMap { $0.suits(batch.count) ? $0.parameter : nil }
                removed.formUnion(
                    try context.coordinator.deleteRows(
                        of: delete.entity, keys: batch.map { keys.key(of: $0) }, versions: batch.map(\.storage.version),
                        checksVersion: checksVersion, locations: located, on: connection))
            }
            for object in delete.objects {
                if removed.contains(keys.key(of: object)) {
                    outcome.deleted.append(object)
                } else {
                    outcome.conflicts.append(object)
                }
            }
        }
    }
}
