/// Which rows a save locks before it writes, so that every save takes its row locks in
/// the one global order described at `StoreCoordinator.lockRows(of:_:on:)`.
extension SavePipeline {
    /// Locks, entity by entity in insert order and each entity's rows in ascending
    /// primary-key order, every existing row the save will write or reference: deleted
    /// rows and rows whose key column changes `FOR UPDATE`, other updated rows `FOR NO
    /// KEY UPDATE`, rows that new or changed foreign keys point at `FOR KEY SHARE`.
    ///
    /// - Parameter keyedRows: also look up (one statement per entity and unique
    ///   attribute) the rows that keyed inserts will meet, and lock them `FOR NO KEY
    ///   UPDATE`: in a read-committed redo, where rows committed since the import looked
    ///   are visible and the upsert would otherwise lock them out of order.
    ///
    /// - Parameter beforeReading: the rows are read next and must stay as read (conflict
    ///   resolution). Otherwise a save that updates one row and does nothing else that
    ///   locks (no inserts, deletes, join rows or references) sends no lock statement:
    ///   holding no other lock while it waits for that row, it cannot be part of a cycle,
    ///   and its `UPDATE` locks the row.
    ///
    /// - Parameter updates: the save plan's update groups, when the save has a plan: each
    ///   object's changes as the plan found them (otherwise they are found again here).
    ///
    /// Rows an import's fetch read in this same transaction are found by location rather
    /// than by key (see `RowLocation`), except before reading (conflict resolution runs
    /// in a read-committed transaction of its own).
    ///
    /// - Returns: with `keyedRows`, the keyed inserts whose rows were found and locked,
    ///   with those rows' primary keys (see `upsertKeyedInserts`); `nil` without. And
    ///   where the rows locked to be written are, by entity.
    @discardableResult
    func lockRowsInOrder(
        on connection: Connection, keyedRows: Bool, beforeReading: Bool = false,
        updates: [(shape: SavePlan.UpdateShape, objects: [ManagedObject])]? = nil
    ) throws -> LockedRows {
        var locks = rowLocks(locating: !beforeReading && connection === context.transaction.connection, updates: updates)
        if !beforeReading, context.insertedSet.isEmpty, context.deletedSet.isEmpty, locks.count == 1,
            let only = locks.first?.value.onlyRow, only.mode != .keyShare,
            !context.changedSet.contains(where: \.hasJoinChanges)
        {
            return LockedRows(keyedRows: keyedRows ? [:] : nil)
        }
        var locked = LockedRows(keyedRows: keyedRows ? try addKeyedInsertRows(to: &locks, on: connection) : nil)
        for entity in context.coordinator.model.insertOrder {
            guard let set = locks[entity.name], !set.isEmpty else { continue }
            locked.locations[entity.name] = try context.coordinator.lockRows(of: entity, set, on: connection)
        }
        return locked
    }

    /// What `lockRowsInOrder` locked beyond the rows the save writes.
    struct LockedRows {
        /// The keyed inserts whose rows were found and locked, with those rows' primary
        /// keys, when the save looked them up (`keyedRows`); `nil` when it did not.
        var keyedRows: [ObjectIdentifier: Int64]?
        /// Where the rows locked to be written are, by entity name: the save's updates and
        /// deletes find them there.
        var locations: [String: LockedLocations] = [:]
    }

    /// The rows to lock, by entity name; with `locating`, the rows' locations where this
    /// transaction's import read them. `updates`: the save plan's update groups, when
    /// there is a plan (the changed objects that write anything, with what they change);
    /// without, the changes are found here.
    private func rowLocks(locating: Bool, updates: [(shape: SavePlan.UpdateShape, objects: [ManagedObject])]?) -> [String: RowLockSet] {
        var collector = RowLockCollector(locationSerial: locating ? context.transaction.locationSerial : 0)
        for object in context.deletedSet {
            guard let key = object.objectID.primaryKey else { continue }
            collector.add(key, .update, entity: object.entity.rootEntityName, of: object)
        }
        for object in context.insertedSet {
            for relationship in object.entity.toOneRelationships where relationship.columnName != nil {
                collector.referenced(object.storage.toOne[relationship.index], of: relationship)
            }
        }
        if let updates {
            for (shape, objects) in updates { collector.updated(objects, shape: shape) }
        } else {
            for object in context.changedSet where !context.insertedSet.contains(object) && !context.deletedSet.contains(object) {
                collector.updated(object)
            }
        }
        return collector.locks
    }

    /// Adds the existing rows with the unique values of keyed inserts (one lookup per
    /// entity and unique attribute).
    ///
    /// - Returns: the keyed inserts whose rows exist, with the rows' primary keys.
    private func addKeyedInsertRows(
        to locks: inout [String: RowLockSet], on connection: Connection
    ) throws -> [ObjectIdentifier: Int64] {
        var objects: [String: [Int: [UniqueValue: [ManagedObject]]]] = [:]
        for object in context.insertedSet {
            guard let index = object.storage.upsertAttributeIndex, let value = UniqueValue(object.storage.value(at: index)) else { continue }
            objects[object.entity.name, default: [:]][index, default: [:]][value, default: []].append(object)
        }
        var found: [ObjectIdentifier: Int64] = [:]
        for entity in context.coordinator.model.insertOrder {
            guard let byAttribute = objects[entity.name] else { continue }
            for (index, byValue) in byAttribute.sorted(by: { $0.key < $1.key }) {
                let rows = try context.coordinator.selectKeys(
                    of: entity, where: entity.attributes[index], isIn: byValue.values.compactMap { $0.first?.storage.value(at: index) },
                    on: connection)
                for (key, value) in rows {
                    locks[entity.rootEntityName, default: RowLockSet()].add(key, .noKeyUpdate)
                    for object in UniqueValue(value).flatMap({ byValue[$0] }) ?? [] { found[ObjectIdentifier(object)] = key }
                }
            }
        }
        return found
    }
}

/// The rows a save locks, collected by entity (`SavePipeline.rowLocks`).
private struct RowLockCollector {
    /// The location serial of the transaction whose import's row locations the rows
    /// carry; `0` for none.
    let locationSerial: UInt16
    /// A save has objects of a few entities: a scan of their names (the same strings,
    /// compared by their bits first) instead of hashing a name once per object.
    private var sets: [(name: String, rows: RowLockSet)] = []

    init(locationSerial: UInt16) {
        self.locationSerial = locationSerial
    }

    /// The rows by entity name.
    var locks: [String: RowLockSet] { Dictionary(uniqueKeysWithValues: sets) }

    /// A row of `name`'s table, in `mode` (with its location when it has one).
    mutating func add(_ key: Int64, _ mode: RowLockMode, entity name: String, of object: ManagedObject? = nil) {
        let location = object.flatMap { ManagedObjectContext.rowLocation(of: $0, serial: locationSerial) }
        if let index = sets.lastIndex(where: { $0.name == name }) {
            sets[index].rows.add(key, mode, location: location)
        } else {
            var rows = RowLockSet()
            rows.add(key, mode, location: location)
            sets.append((name, rows))
        }
    }

    /// A row that a foreign key of the save points at (not one the save inserts).
    mutating func referenced(_ value: RelatedReference, of relationship: RelationshipDescription) {
        let key: Int64
        switch value {
        case .none: return
        case .key(let stored): key = stored
        case .object(let target):
            guard let stored = target.objectID.primaryKey, !target.deletedFlag else { return }
            key = stored
        }
        add(key, .keyShare, entity: relationship.destinationRootName)
    }

    /// An updated row, its changes found here: its lock (`FOR UPDATE` when a key column
    /// changes, none when nothing does) and the rows its changed foreign keys point at.
    mutating func updated(_ object: ManagedObject) {
        guard let key = object.objectID.primaryKey else { return }
        let entity = object.entity
        let toOne = object.changedToOneIndexes
        let changesKey: Bool
        if let mask = object.changedAttributeMask {
            // (No array of indexes per object: the mask says both what a save needs.)
            guard mask != 0 || !toOne.isEmpty else { return }
            changesKey = mask & entity.keyAttributeMask != 0 || toOne.contains { entity.relationships[$0].isOneToOne }
        } else {
            let attributes = object.changedAttributeIndexes
            guard !attributes.isEmpty || !toOne.isEmpty else { return }
            changesKey = Self.changesKey(of: entity, attributes: attributes, toOne: toOne)
        }
        add(key, changesKey ? .update : .noKeyUpdate, entity: entity.rootEntityName, of: object)
        for index in toOne where entity.relationships[index].columnName != nil {
            referenced(object.storage.toOne[index], of: entity.relationships[index])
        }
    }

    /// Whether changing these attributes and to-one relationships changes a key column of
    /// the row (a unique attribute, or the foreign key of a one-to-one), which PostgreSQL
    /// locks `FOR UPDATE`.
    private static func changesKey(of entity: EntityDescription, attributes: [Int], toOne: [Int]) -> Bool {
        attributes.contains { entity.keyAttributeIndexes.contains($0) } || toOne.contains { entity.relationships[$0].isOneToOne }
    }

    /// The updated rows of a save plan's group: the plan found each object's changes
    /// once, and the group's shape is what its objects change, so the lock mode and the
    /// references are found once for them all (except for an overwrite, which writes
    /// every column whatever changed: its objects' own changes decide).
    mutating func updated(_ objects: [ManagedObject], shape: SavePlan.UpdateShape) {
        guard !shape.overwrite, let entity = objects.first?.entity else {
            for object in objects { updated(object) }
            return
        }
        let changesKey = Self.changesKey(of: entity, attributes: shape.attributeIndexes, toOne: shape.toOneIndexes)
        let references = shape.toOneIndexes.filter { entity.relationships[$0].columnName != nil }
        for object in objects {
            guard let key = object.objectID.primaryKey else { continue }
            add(key, changesKey ? .update : .noKeyUpdate, entity: entity.rootEntityName, of: object)
            for index in references { referenced(object.storage.toOne[index], of: entity.relationships[index]) }
        }
    }
}
