import Foundation

/// A stored attribute value as a dictionary key, for matching objects by a unique
/// attribute: strings and integers without boxing them in `AnyHashable` (imports match
/// thousands of keys per batch), every other scalar through it.
enum UniqueValue: Hashable {
    /// Text keys are told apart byte for byte, as PostgreSQL tells them apart.
    case string(ExactText)
    case integer(Int64)
    case other(AnyHashable)

    /// The key of a stored value; `nil` for `NULL`.
    @inline(__always)
    init?(_ stored: StoredValue) {
        switch stored {
        case .null: return nil
        case .string(let string): self = .string(ExactText(string))
        case .int(let integer): self = .integer(Int64(integer))
        case .int64(let integer): self = .integer(integer)
        case .int32(let integer): self = .integer(Int64(integer))
        case .int16(let integer): self = .integer(Int64(integer))
        default:
            guard let value = stored.anyValue else { return nil }
            self = .other(Self.hashable(value))
        }
    }

    /// Case by case, each operand bound in place: the synthesized `==` matches a tuple of
    /// copies of both (a retain and release of each text per comparison, and a
    /// dictionary lookup compares several keys).
    static func == (lhs: UniqueValue, rhs: UniqueValue) -> Bool {
        switch lhs {
        case .string(let left):
            guard case .string(let right) = rhs else { return false }
            return left == right
        case .integer(let left):
            guard case .integer(let right) = rhs else { return false }
            return left == right
        case .other(let left):
            guard case .other(let right) = rhs else { return false }
            return left == right
        }
    }

    /// Case by case, as `==` (the synthesized hash copied the value first: a retain and
    /// release of its text per hash).
    func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let text):
            hasher.combine(0 as UInt8)
            hasher.combine(text)
        case .integer(let integer):
            hasher.combine(1 as UInt8)
            hasher.combine(integer)
        case .other(let value):
            hasher.combine(2 as UInt8)
            hasher.combine(value)
        }
    }

    /// A scalar as `AnyHashable` when its type is hashable (every scalar type of the
    /// library's is), its description otherwise.
    private static func hashable<T: AttributeScalar>(_ value: T) -> AnyHashable {
        if let hashable = value as? AnyHashable { return hashable }
        return AnyHashable(String(describing: value))
    }
}

/// Keyed inserts: objects an import inserted for a unique key it did not find
/// (`upsertAttributeIndex` is set). A save writes them as `INSERT … ON CONFLICT (key) DO
/// UPDATE`, so when another process inserted the same key since the import looked, that
/// row is updated instead of duplicated, and the object takes its primary key.
extension SavePipeline {
    /// A keyed insert that met an existing row.
    struct MergedInsert {
        let object: ManagedObject
        /// The existing row's primary key, the object's from now on.
        let primaryKey: Int64
        /// A detached object holding the row as stored after the statement (values,
        /// foreign keys, version): the object's committed state after the commit.
        let row: ManagedObject
        /// The keys written into the row; `nil` when it already held the values.
        let changedKeys: Set<String>?
    }

    /// Splits an entity's inserted objects into plain inserts and keyed ones: one keyed
    /// object per unique value; another object with the same value stays a plain insert,
    /// and the save is refused as a unique violation
    /// (`refuseKeyedInsertsMeetingPlainOnes`).
    /// Imports create one object per key, so values are compared only after an imported
    /// object's key was changed (`keysChanged`: the context's `keyedInsertKeysChanged`).
    ///
    /// - Returns: also the keyed objects that need reserved primary keys: those of an
    ///   entity with a to-one relationship to itself, which objects of the same statement
    ///   may reference (the others get theirs from the upsert).
    static func partitionKeyedInserts(_ objects: [ManagedObject], of entity: EntityDescription, keysChanged: Bool) -> (
        plain: [ManagedObject], keyed: [ManagedObject], keyedNeedingKeys: [ManagedObject]
    ) {
        var plain: [ManagedObject] = []
        var keyed: [ManagedObject] = []
        keyed.reserveCapacity(objects.count)
        var seen: [Int: Set<UniqueValue>] = [:]
        for object in objects {
            guard let index = object.storage.upsertAttributeIndex else {
                plain.append(object)
                continue
            }
            guard keysChanged else {
                keyed.append(object)
                continue
            }
            guard let value = UniqueValue(object.storage.value(at: index)) else {
                plain.append(object)
                continue
            }
            if seen[index, default: Set(minimumCapacity: objects.count)].insert(value).inserted {
                keyed.append(object)
            } else {
                plain.append(object)
            }
        }
        return (plain, keyed, Self.keyedInsertsSendKeys(entity) ? keyed : [])
    }

    /// Refuses a save in which a keyed insert met a row that another object of this
    /// context stands for: a row a plain insert of the same save wrote (two new objects
    /// with one unique value, an imported one and one given its key), or a row already
    /// registered here (an imported object whose key was changed to a saved object's).
    /// One object per row, as Core Data's uniquing keeps it: otherwise both would stand
    /// for one row. Thrown as the unique violation the database raises for two plain
    /// inserts (the save rolls back; the context keeps its changes). The value is not
    /// named (bound values stay out of errors). A row no object here stands for (another
    /// process inserted the key since the import looked) is merged, as keyed inserts are
    /// for.
    ///
    /// - Throws: `PostgresError` with `sqlState` `.uniqueViolation`.
    func refuseKeyedInsertsMeetingPlainOnes(
        _ merged: [MergedInsert], plain: [ManagedObject], of entity: EntityDescription, key: (ManagedObject) -> Int64
    ) throws {
        let written = Set(plain.map(key))
        let clash = merged.first { merge in
            if written.contains(merge.primaryKey) { return true }
            let id = ObjectID(entityName: entity.rootEntityName, primaryKey: merge.primaryKey)
            guard let holder = context.bookkeeping.object(for: id) else { return false }
            return holder !== merge.object
        }
        guard let clash else { return }
        let attribute = clash.object.storage.upsertAttributeIndex.map { entity.attributes[$0] }
        var error = PostgresError(
            kind: .server, sqlState: .uniqueViolation,
            message: "two new \(entity.name) objects have the same \(attribute?.name ?? "unique key") in one save",
            hint: "give each new object its own key, or delete one of them before saving")
        error.table = entity.tableName
        error.column = attribute?.columnName
        throw error
    }

    /// Whether keyed inserts of an entity are sent with reserved primary keys (when the
    /// entity can point at itself) rather than taking them from the sequence in the
    /// upsert.
    static func keyedInsertsSendKeys(_ entity: EntityDescription) -> Bool {
        entity.toOneRelationships.contains { $0.destinationRootName == entity.rootEntityName }
    }

    /// The columns a group of keyed inserts writes: its unique attribute, and the
    /// attributes and to-one relationships that an existing row takes on a conflict.
    struct KeyedInsertShape: Hashable {
        let unique: Int
        let attributes: [Int]
        let toOne: [Int]

        /// A fixed order for the statements (unique attribute, then columns).
        static func precedes(_ a: KeyedInsertShape, _ b: KeyedInsertShape) -> Bool {
            if a.unique != b.unique { return a.unique < b.unique }
            if a.attributes != b.attributes { return a.attributes.lexicographicallyPrecedes(b.attributes) }
            return a.toOne.lexicographicallyPrecedes(b.toOne)
        }
    }

    /// Keyed inserts grouped by shape, in order of first appearance: the attributes
    /// that differ from a new object's defaults and the to-one relationships that are
    /// set (none for an object that keeps an existing row). Neighbours usually share a
    /// shape, so the last group is tried before the dictionary.
    static func keyedInsertGroups(
        _ objects: [ManagedObject], of entity: EntityDescription
    ) -> [(shape: KeyedInsertShape, members: [ManagedObject])] {
        entity.attributes.count <= 64 && entity.relationships.count <= 64
            ? keyedInsertGroupsByMask(objects, of: entity) : keyedInsertGroupsByIndexes(objects, of: entity)
    }

    /// `keyedInsertGroups` for any entity: an object's shape as arrays of indexes.
    static func keyedInsertGroupsByIndexes(
        _ objects: [ManagedObject], of entity: EntityDescription
    ) -> [(shape: KeyedInsertShape, members: [ManagedObject])] {
        var groups: [(shape: KeyedInsertShape, members: [ManagedObject])] = []
        var groupIndexes: [KeyedInsertShape: Int] = [:]
        let attributeDescriptions = entity.attributes
        let defaults = entity.defaultValues
        let toOneIndexes = entity.toOneIndexes
        // An object's shape is written into these (no arrays per object); a new group
        // takes a copy.
        var attributes: [Int] = []
        var toOne: [Int] = []
        attributes.reserveCapacity(attributeDescriptions.count)
        toOne.reserveCapacity(toOneIndexes.count)
        for object in objects {
            guard let unique = object.storage.upsertAttributeIndex else { continue }
            attributes.removeAll(keepingCapacity: true)
            // Unsafe: both buffers are read only inside the closures, and the guard checks
            // that each holds one value per attribute before any `index` is read.
            object.storage.withUnsafeValues { valueBuffer in
                defaults.withUnsafeBufferPointer { defaultBuffer in
                    guard valueBuffer.count == attributeDescriptions.count, defaultBuffer.count == attributeDescriptions.count,
                        let values = valueBuffer.baseAddress, let defaults = defaultBuffer.baseAddress
                    else { return }
                    for index in attributeDescriptions.indices where index != unique {
                        if values[index] != defaults[index] { attributes.append(index) }
                    }
                }
            }
            toOne.removeAll(keepingCapacity: true)
            for index in toOneIndexes {
                if case .none = object.storage.toOne[index] { continue }
                toOne.append(index)
            }
            if object.storage.upsertKeepsExisting {
                // Nothing to update on a conflict: `DO NOTHING`, and the row read back.
                attributes.removeAll(keepingCapacity: true)
                toOne.removeAll(keepingCapacity: true)
            }
            if let last = groups.indices.last, groups[last].shape.unique == unique, groups[last].shape.attributes == attributes,
                groups[last].shape.toOne == toOne
            {
                groups[last].members.append(object)
                continue
            }
            let shape = KeyedInsertShape(unique: unique, attributes: attributes, toOne: toOne)
            if let index = groupIndexes[shape] {
                groups[index].members.append(object)
            } else {
                groupIndexes[shape] = groups.count
                groups.append((shape, [object]))
            }
        }
        return groups
    }

    /// `keyedInsertGroups` for an entity of at most 64 attributes and relationships: an
    /// object's shape as two bit masks (attribute and relationship indexes), compared as
    /// two integers; a group's index arrays are made once, when it is found.
    static func keyedInsertGroupsByMask(
        _ objects: [ManagedObject], of entity: EntityDescription
    ) -> [(shape: KeyedInsertShape, members: [ManagedObject])] {
        struct MaskShape: Hashable {
            let unique: Int
            let attributes: UInt64
            let toOne: UInt64
        }
        var groups: [(shape: KeyedInsertShape, members: [ManagedObject])] = []
        var masks: [MaskShape] = []
        var groupIndexes: [MaskShape: Int] = [:]
        var lastUsed = -1
        let count = entity.attributes.count
        let defaults = entity.defaultValues
        let toOneIndexes = entity.toOneIndexes
        func indexes(_ mask: UInt64) -> [Int] { (0..<64).filter { mask & (1 << UInt64($0)) != 0 } }
        for object in objects {
            guard let unique = object.storage.upsertAttributeIndex else { continue }
            var attributes: UInt64 = 0
            var toOne: UInt64 = 0
            if !object.storage.upsertKeepsExisting {
                // Unsafe: both buffers are read only inside the closures, and the guard
                // checks that each holds one value per attribute before any is read.
                object.storage.withUnsafeValues { valueBuffer in
                    defaults.withUnsafeBufferPointer { defaultBuffer in
                        guard valueBuffer.count == count, defaultBuffer.count == count,
                            let values = valueBuffer.baseAddress, let defaults = defaultBuffer.baseAddress
                        else { return }
                        for index in 0..<count where index != unique && values[index] != defaults[index] {
                            attributes |= 1 << UInt64(index)
                        }
                    }
                }
                for index in toOneIndexes {
                    if case .none = object.storage.toOne[index] { continue }
                    toOne |= 1 << UInt64(index)
                }
            }
            // (Nothing to update on a conflict for an object that keeps an existing row:
            // `DO NOTHING`, and the row read back.)
            let shape = MaskShape(unique: unique, attributes: attributes, toOne: toOne)
            // Neighbours usually share a shape: the group used last is tried first.
            if lastUsed >= 0, masks[lastUsed] == shape {
                groups[lastUsed].members.append(object)
                continue
            }
            if let index = groupIndexes[shape] {
                groups[index].members.append(object)
                lastUsed = index
            } else {
                lastUsed = groups.count
                groupIndexes[shape] = groups.count
                masks.append(shape)
                groups.append((KeyedInsertShape(unique: unique, attributes: indexes(attributes), toOne: indexes(toOne)), [object]))
            }
        }
        return groups
    }

    /// Writes keyed inserts of one entity: one statement per unique attribute that
    /// claims the new keys (`claimKeyedInsertKeys`), and, only when some keys existed,
    /// one statement that locks those rows (unless the save did), one upsert per set of
    /// written properties (usually one) and one that reads the rows back.
    ///
    /// On a conflict the existing row takes the attributes that differ from a new
    /// object's defaults and the to-one relationships that are set: what the import's
    /// records set, so an object that only carries its key (a stub) leaves the row as it
    /// is. The rows are updated only where they differ.
    ///
    /// - Parameters:
    ///   - lockedRows: when the save looked up the rows with its keys and locked them in
    ///     the global order before (`lockRowsInOrder(keyedRows: true)`), the objects
    ///     whose rows it found; `nil` when it did not look.
    ///   - rows: builds the batch of all columns for objects (with the attribute and
    ///     to-one indexes to write).
    /// - Returns: the objects inserted (with their primary keys) and the ones that met
    ///   existing rows.
    /// - Throws: `KeyedInsertsMetUnlockedRows` when a key existed, and its row is held
    ///   by another transaction; `PostgresError`.
    func upsertKeyedInserts(
        _ objects: [ManagedObject], of entity: EntityDescription, lockedRows: [ObjectIdentifier: Int64]?,
        on connection: Connection,
        rows: ([ManagedObject], [Int], [Int]) -> RowBatch
    ) throws -> (inserted: [(object: ManagedObject, primaryKey: Int64)], merged: [MergedInsert]) {
        let groups = Self.keyedInsertGroups(objects, of: entity)
        var inserted: [(object: ManagedObject, primaryKey: Int64)] = []
        var existing: [(object: ManagedObject, key: Int64, changedKeys: Set<String>?)] = []
        let allAttributes = Array(entity.attributes.indices)
        let allToOne = entity.toOneRelationships.map(\.index)
        inserted.reserveCapacity(objects.count)
        let claimed = try claimKeyedInsertKeys(groups, of: entity, lockedRows: lockedRows ?? [:], on: connection) {
            rows($0, allAttributes, allToOne)
        }
        for (shape, all) in groups.sorted(by: { KeyedInsertShape.precedes($0.shape, $1.shape) }) {
            var members: [ManagedObject] = []
            for object in all {
                if let key = claimed[ObjectKey(object)] {
                    inserted.append((object, key))
                } else {
                    members.append(object)
                }
            }
            if members.isEmpty { continue }
            var batch = rows(members, allAttributes, allToOne)
            batch.versions = []  // (the upsert writes 1)
            if !Self.keyedInsertsSendKeys(entity) { batch.keys = [] }  // the sequence assigns them
            let updating =
                shape.attributes.map { entity.attributes[$0].columnName }
                + shape.toOne.compactMap { entity.relationships[$0].columnName }
            let results = try context.coordinator.upsertRows(
                into: entity, batch, uniqueAttribute: entity.attributes[shape.unique], updating: updating, on: connection)
            let writtenKeys = Set(
                shape.attributes.map { entity.attributes[$0].name } + shape.toOne.map { entity.relationships[$0].name })
            for (object, result) in zip(members, results) {
                switch result.outcome {
                case .inserted: inserted.append((object, result.primaryKey))
                case .updated: existing.append((object, result.primaryKey, writtenKeys))
                case .unchanged: existing.append((object, result.primaryKey, nil))
                }
            }
        }
        guard !existing.isEmpty else { return (inserted, []) }
        return (inserted, try readMergedRows(existing, of: entity, on: connection))
    }

    /// Claims the new keys of keyed inserts, one statement per unique attribute with all
    /// its keys in key order (`StoreCoordinator.claimRows`): their rows are inserted, and
    /// rows that exist are neither written nor waited for. The global lock order puts
    /// existing rows before new keys; a save that wrote (and so locked) a row it did not
    /// know of while holding new keys could wait for a transaction that waits for one of
    /// those keys — the deadlock of two imports, or of an import and an edit, that meet
    /// a row committed since one of them looked.
    ///
    /// Keys whose rows the save found and locked in order already (`lockedRows`, from
    /// `lockRowsInOrder(keyedRows: true)`) are neither claimed nor locked again. The
    /// other keys that existed are left to the upserts that follow, once this has locked
    /// their rows without waiting (`NOWAIT`): a lock taken out of order but without
    /// waiting cannot close a cycle, and the writes after it wait only for new keys. A
    /// row another transaction holds fails the statement (`55P03`), thrown as
    /// `KeyedInsertsMetUnlockedRows`: the save is redone in a transaction that looks the
    /// rows up and waits for them in order, before it claims new keys.
    ///
    /// - Returns: the primary keys of the rows inserted, by object.
    private func claimKeyedInsertKeys(
        _ groups: [(shape: KeyedInsertShape, members: [ManagedObject])], of entity: EntityDescription,
        lockedRows: [ObjectIdentifier: Int64], on connection: Connection, rows: ([ManagedObject]) -> RowBatch
    ) throws -> [ObjectKey: Int64] {
        var claimed: [ObjectKey: Int64] = [:]
        for unique in Set(groups.map(\.shape.unique)).sorted() {
            // (Rows the save locked already are met, not claimed. Most saves locked none:
            // an empty dictionary still hashes every key looked up in it.)
            let sharing = groups.filter { $0.shape.unique == unique }.map { group in
                let members = group.members
                return (shape: group.shape, members: lockedRows.isEmpty ? members : members.filter { lockedRows[ObjectIdentifier($0)] == nil })
            }
            let members = sharing.flatMap(\.members)
            guard !members.isEmpty else { continue }
            var batch = rows(members)
            batch.versions = []
            if !Self.keyedInsertsSendKeys(entity) { batch.keys = [] }
            let attribute = entity.attributes[unique]
            let keys = try context.coordinator.claimRows(into: entity, batch, uniqueAttribute: attribute, on: connection)
            claimed.reserveCapacity(claimed.count + members.count)  // (grown one doubling at a time, a batch rehashed 10 times)
            var met: (updating: [StoredValue], keeping: [StoredValue]) = ([], [])
            var position = 0  // in `members`, and so in `keys`
            for group in sharing {
                let updates = !group.shape.attributes.isEmpty || !group.shape.toOne.isEmpty
                for object in group.members {
                    defer { position += 1 }
                    if let key = keys[position] {
                        claimed[ObjectKey(object)] = key
                    } else if updates {
                        met.updating.append(object.storage.value(at: unique))
                    } else {
                        met.keeping.append(object.storage.value(at: unique))
                    }
                }
            }
            for (values, mode) in [(met.updating, RowLockMode.noKeyUpdate), (met.keeping, .keyShare)] where !values.isEmpty {
                do {
                    try context.coordinator.lockRowsWithoutWaiting(
                        of: entity, whereUnique: attribute, isIn: values, mode: mode, on: connection)
                } catch let error as PostgresError where error.sqlState == .lockNotAvailable {
                    throw KeyedInsertsMetUnlockedRows(entity: entity.name, lockError: error)
                }
            }
        }
        return claimed
    }

    /// Reads the rows keyed inserts met (values, foreign keys and versions), which the
    /// objects stand for after the commit.
    ///
    /// - Throws: `UpsertVanishedRowError` when a row is gone, `PostgresError`.
    private func readMergedRows(
        _ existing: [(object: ManagedObject, key: Int64, changedKeys: Set<String>?)], of entity: EntityDescription,
        on connection: Connection
    ) throws -> [MergedInsert] {
        let result = try context.coordinator.selectObjects(of: entity, .keys(existing.map(\.key), of: entity), on: connection)
        var stored: [Int64: ManagedObject] = [:]
        for row in result {
            let key = try ManagedObjectContext.decodeInteger(row, column: 0)
            let scratch = entity.makeObject()
            scratch.entityStorage = entity
            try context.apply(row: row, to: scratch, entity: entity, key: key)
            stored[key] = scratch
        }
        var merged: [MergedInsert] = []
        for (object, key, changedKeys) in existing {
            guard let row = stored[key] else {
                throw UpsertVanishedRowError(entity: entity.name, attribute: "primary key \(key)")
            }
            merged.append(MergedInsert(object: object, primaryKey: key, row: row, changedKeys: changedKeys))
        }
        return merged
    }

    /// After the commit: a keyed insert that met an existing row becomes that row's
    /// object (its ID, committed values and version).
    func finishMergedInsert(_ merged: MergedInsert) {
        let object = merged.object
        context.bookkeeping.unregister(object.objectID)
        object.objectID = ObjectID(entityName: object.entity.rootEntityName, primaryKey: merged.primaryKey)
        if let other = context.bookkeeping.object(for: object.objectID), other !== object {
            // The context held the row already under another object (its key was changed
            // in memory): that object now stands for a row that is this one.
            context.logger.warning("\(object.objectID) was registered twice after an upsert; keeping the imported object")
        }
        context.bookkeeping.register(object, as: object.objectID)
        object.adoptStoredRow(of: merged.row)
    }
}

/// Keyed inserts of a save met rows that exist, that the save did not lock in the global
/// order (rows committed since the import, or the save's redo, looked for its keys, or
/// an import that did not look), and that another transaction holds: the transaction is
/// rolled back, and the save redone in a read-committed transaction that looks those
/// rows up and locks them first (`lockRowsInOrder(keyedRows: true)`). Handled inside
/// `save()`, which throws `lockError` after three redos; it never reaches the caller.
struct KeyedInsertsMetUnlockedRows: Error, CustomStringConvertible {
    let entity: String
    /// The `55P03` of the statement that tried to lock the rows without waiting.
    let lockError: PostgresError

    var description: String {
        "keyed inserts of \(entity) met rows the save had not locked; the save is redone locking them first"
    }
}
