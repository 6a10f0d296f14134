import Foundation

extension ManagedObjectContext {
    /// Writes the context's changes in one transaction and commits: inserts (in
    /// foreign-key order), updates, deletes, all or nothing.
    ///
    /// Statements are bounded by entities and kinds of change, not by rows: one
    /// statement reserves the new primary keys of an entity, one multi-row `INSERT`
    /// inserts its objects, one `UPDATE … FROM unnest(…)` per set of changed columns
    /// updates them, one `DELETE … USING unnest(…)` deletes them.
    ///
    /// Updates and deletes check the version column. A row changed or deleted elsewhere
    /// since this context read it is a conflict, resolved by `mergePolicy`; with the
    /// default `.error` the save throws `MergeConflictError` and writes nothing. When a
    /// private context's own transaction cannot write a conflicting row (repeatable read
    /// refuses to), the save is rolled back and redone in a fresh read-committed
    /// transaction that locks the rows, resolves the conflicts and commits.
    ///
    /// On any failure the database is untouched and the context keeps its changes for a
    /// retry or `rollback()`. After a save a private context's transaction is over: its
    /// next read sees a new snapshot.
    ///
    /// - Throws: `MergeConflictError`, `ManagedObjectError.deleteDenied`, or
    ///   `PostgresError` (for example `.uniqueViolation`, or `.connectionLost`).
    public func save() throws {
        assertOnQueue()
        guard hasChanges else {
            endTransaction(commit: true)
            return
        }
        try validateDeleteRules()
        var reservedKeys: [ObjectIdentifier: Int64] = [:]
        var overwrite: Set<ObjectIdentifier> = []

        // First attempt: in the context's own transaction.
        let first = try beginWriteTransaction()
        let outcome: WriteOutcome
        do {
            outcome = try writeChanges(on: first, reservedKeys: &reservedKeys, overwrite: overwrite)
        } catch let error as PostgresError where error.isTransient {
            logger.debug("save hit \(error.sqlState?.rawValue ?? "?"); resolving conflicts in a new transaction")
            abortWriteTransaction(first)
            try saveResolvingConflicts(reservedKeys: &reservedKeys, overwrite: &overwrite)
            return
        } catch {
            abortWriteTransaction(first)
            throw error
        }
        if !outcome.conflicts.isEmpty {
            abortWriteTransaction(first)
            try saveResolvingConflicts(reservedKeys: &reservedKeys, overwrite: &overwrite)
            return
        }
        do {
            try commitSave(on: first, outcome: outcome, reservedKeys: reservedKeys)
        } catch {
            abortWriteTransaction(first)
            throw error
        }
    }

    // MARK: - Transactions of a save

    /// The transaction writes go into: a private context's own, or a read-committed one
    /// on a borrowed connection for the main context.
    func beginWriteTransaction() throws -> Connection {
        switch concurrencyType {
        case .private:
            return try transactionConnection()
        case .main:
            let connection = try coordinator.pool.acquire()
            do {
                try coordinator.execute("BEGIN ISOLATION LEVEL READ COMMITTED", on: connection)
            } catch {
                coordinator.pool.release(connection)
                throw error
            }
            return connection
        }
    }

    /// Rolls a write transaction back and gives its connection back.
    func abortWriteTransaction(_ connection: Connection) {
        if connection === transaction {
            endTransaction(commit: false)
            return
        }
        if connection.transactionStatus != .idle {
            do {
                try coordinator.execute("ROLLBACK", on: connection)
            } catch {
                logger.debug("rollback failed: \(error)")
            }
        }
        coordinator.pool.release(connection)
    }

    /// Commits a write transaction and gives its connection back (a private context's
    /// transaction ends). On failure the caller aborts it.
    func commitWriteTransaction(_ connection: Connection) throws {
        try coordinator.commit(on: connection)
        if connection === transaction {
            transaction = nil
        }
        coordinator.pool.release(connection)
    }

    /// Writes the change record (which queues the notification), commits, then updates
    /// the objects and tells observers.
    private func commitSave(on connection: Connection, outcome: WriteOutcome, reservedKeys: [ObjectIdentifier: Int64]) throws {
        let changes = savedChanges(outcome: outcome, reservedKeys: reservedKeys)
        try recordChanges(changes, on: connection)
        try commitWriteTransaction(connection)
        finishSave(outcome: outcome, reservedKeys: reservedKeys, changes: changes)
    }

    /// Writes the change record of a write transaction: other processes' listeners read
    /// it after the commit.
    func recordChanges(_ changes: ContextChanges, on connection: Connection) throws {
        guard !changes.isEmpty else { return }
        try ChangeLog.write(changes, origin: coordinator.origin, on: connection) { sql, parameters, connection in
            try coordinator.execute(sql, parameters, on: connection)
        }
    }

    /// What a save changes, with the permanent IDs its inserted objects will have.
    private func savedChanges(outcome: WriteOutcome, reservedKeys: [ObjectIdentifier: Int64]) -> ContextChanges {
        var changes = ContextChanges()
        for object in outcome.inserted {
            guard let key = reservedKeys[ObjectIdentifier(object)] else { continue }
            changes.inserted.insert(ObjectID(entityName: object.entity.name, primaryKey: key))
        }
        for (object, keys) in outcome.updated {
            changes.updated.insert(object.objectID)
            changes.changedKeys[object.objectID] = keys
        }
        for object in outcome.deleted { changes.deleted.insert(object.objectID) }
        return changes
    }

    /// Redoes the save in a read-committed transaction: locks the rows of updated and
    /// deleted objects, compares versions, applies the merge policy, writes, commits.
    private func saveResolvingConflicts(
        reservedKeys: inout [ObjectIdentifier: Int64], overwrite: inout Set<ObjectIdentifier>
    ) throws {
        let connection = try coordinator.pool.acquire()
        do {
            try coordinator.execute("BEGIN ISOLATION LEVEL READ COMMITTED", on: connection)
            let conflicts = try lockAndFindConflicts(on: connection)
            if !conflicts.isEmpty {
                if mergePolicy == .error {
                    throw MergeConflictError(conflicts: conflicts.map(\.report))
                }
                resolve(conflicts, overwrite: &overwrite)
            }
            let outcome = try writeChanges(on: connection, reservedKeys: &reservedKeys, overwrite: overwrite)
            guard outcome.conflicts.isEmpty else {
                // The rows are locked, so this means they changed in a way we cannot see.
                throw MergeConflictError(conflicts: outcome.conflicts.map {
                    MergeConflict(
                        objectID: $0.objectID, snapshotVersion: $0.version, storeVersion: nil,
                        snapshotValues: [:], objectValues: [:], storeValues: nil)
                })
            }
            try commitSave(on: connection, outcome: outcome, reservedKeys: reservedKeys)
        } catch {
            abortWriteTransaction(connection)
            throw error
        }
    }

    // MARK: - Writing

    struct WriteOutcome {
        var inserted: [ManagedObject] = []
        var updated: [(object: ManagedObject, keys: Set<String>)] = []
        var deleted: [ManagedObject] = []
        var newVersions: [ObjectIdentifier: Int64] = [:]
        var conflicts: [ManagedObject] = []
    }

    /// Sends the statements of a save on a connection inside a transaction.
    private func writeChanges(
        on connection: Connection, reservedKeys: inout [ObjectIdentifier: Int64],
        overwrite: Set<ObjectIdentifier>
    ) throws -> WriteOutcome {
        var outcome = WriteOutcome()
        let model = coordinator.model
        let inserted = insertedSet
        let updated = changedSet.filter {
            !insertedSet.contains($0) && !deletedSet.contains($0)
                && ($0.hasPersistentChangedValues || overwrite.contains(ObjectIdentifier($0)))
        }
        let deleted = deletedSet

        // Reserve primary keys for new objects: one statement per entity.
        for entity in model.insertOrder {
            let needing = inserted.filter { $0.entity.name == entity.name && reservedKeys[ObjectIdentifier($0)] == nil }
            guard !needing.isEmpty else { continue }
            let keys = try coordinator.execute(
                "SELECT nextval(pg_get_serial_sequence($1, $2)) FROM generate_series(1, $3)",
                [entity.quotedTable, entity.primaryKeyColumn, needing.count], on: connection
            ).map { try $0.decode(Int64.self, at: 0) }
            for (object, key) in zip(needing, keys) { reservedKeys[ObjectIdentifier(object)] = key }
        }
        func key(of object: ManagedObject) -> Int64? {
            object.objectID.primaryKey ?? reservedKeys[ObjectIdentifier(object)]
        }
        func foreignKey(_ object: ManagedObject, _ index: Int) -> Int64? {
            switch object.toOne[index] {
            case .none: return nil
            case .key(let key): return key
            case .object(let target): return target.deletedFlag && target.objectID.isTemporaryID ? nil : key(of: target)
            }
        }

        // Inserts, in foreign-key order: one multi-row statement per entity.
        for entity in model.insertOrder {
            let objects = inserted.filter { $0.entity.name == entity.name }
                .sorted { (key(of: $0) ?? 0) < (key(of: $1) ?? 0) }
            guard !objects.isEmpty else { continue }
            let toOne = entity.toOneRelationships
            var columns = [entity.primaryKeyColumn, entity.versionColumn]
            var types = ["bigint", "bigint"]
            var arrays: [(any PostgresEncodable)?] = [
                objects.map { key(of: $0) }, Array(repeating: Int64(1), count: objects.count),
            ]
            for attribute in entity.attributes {
                columns.append(attribute.columnName)
                types.append(attribute.type.sqlType)
                arrays.append(try attribute.encodeArray(objects.map { $0.values[attribute.index] }))
            }
            for relationship in toOne {
                guard let column = relationship.columnName else { continue }
                columns.append(column)
                types.append("bigint")
                arrays.append(objects.map { foreignKey($0, relationship.index) })
            }
            let unnest = types.enumerated().map { "$\($0.offset + 1)::\($0.element)[]" }.joined(separator: ", ")
            try coordinator.execute(
                "INSERT INTO \(entity.quotedTable) (\(columns.map(Connection.quoteIdentifier).joined(separator: ", "))) "
                    + "SELECT * FROM unnest(\(unnest))",
                arrays, on: connection)
            outcome.inserted += objects
        }

        // Updates: one statement per entity and set of changed columns.
        var groups: [String: (entity: EntityDescription, attributes: [Int], toOne: [Int], objects: [ManagedObject])] = [:]
        for object in updated {
            let entity = object.entity
            let all = overwrite.contains(ObjectIdentifier(object))
            let attributes = all ? Array(entity.attributes.indices) : object.changedAttributeIndexes
            let toOne = all ? entity.toOneRelationships.map(\.index) : object.changedToOneIndexes
            let signature = "\(entity.name)|\(all)|\(attributes)|\(toOne)"
            groups[signature, default: (entity, attributes, toOne, [])].objects.append(object)
        }
        for (signature, group) in groups.sorted(by: { $0.key < $1.key }) {
            let entity = group.entity
            let checksVersion = !signature.contains("|true|")
            var types = ["bigint", "bigint"]
            var arrays: [(any PostgresEncodable)?] = [
                group.objects.map { key(of: $0) }, group.objects.map { $0.version },
            ]
            var assignments: [String] = []
            for index in group.attributes {
                let attribute = entity.attributes[index]
                types.append(attribute.type.sqlType)
                arrays.append(try attribute.encodeArray(group.objects.map { $0.values[index] }))
                assignments.append("\(Connection.quoteIdentifier(attribute.columnName)) = v.c\(types.count - 1)")
            }
            for index in group.toOne {
                guard let column = entity.relationships[index].columnName else { continue }
                types.append("bigint")
                arrays.append(group.objects.map { foreignKey($0, index) })
                assignments.append("\(Connection.quoteIdentifier(column)) = v.c\(types.count - 1)")
            }
            let version = Connection.quoteIdentifier(entity.versionColumn)
            let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
            assignments.append("\(version) = t.\(version) + 1")
            let unnest = types.enumerated().map { "$\($0.offset + 1)::\($0.element)[]" }.joined(separator: ", ")
            let aliases = types.indices.map { "c\($0)" }.joined(separator: ", ")
            let result = try coordinator.execute(
                "UPDATE \(entity.quotedTable) AS t SET \(assignments.joined(separator: ", ")) "
                    + "FROM unnest(\(unnest)) AS v(\(aliases)) WHERE t.\(primaryKey) = v.c0"
                    + (checksVersion ? " AND t.\(version) = v.c1" : "")
                    + " RETURNING t.\(primaryKey), t.\(version)",
                arrays, on: connection)
            var written: [Int64: Int64] = [:]
            for row in result { written[try row.decode(Int64.self, at: 0)] = try row.decode(Int64.self, at: 1) }
            for object in group.objects {
                guard let objectKey = key(of: object), let newVersion = written[objectKey] else {
                    outcome.conflicts.append(object)
                    continue
                }
                outcome.newVersions[ObjectIdentifier(object)] = newVersion
                var keys = Set(group.attributes.map { entity.attributes[$0].name })
                keys.formUnion(group.toOne.map { entity.relationships[$0].name })
                outcome.updated.append((object, keys))
            }
        }

        // Deletes, children first: one statement per entity.
        for entity in model.insertOrder.reversed() {
            let objects = deleted.filter { $0.entity.name == entity.name }
            guard !objects.isEmpty else { continue }
            let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
            let version = Connection.quoteIdentifier(entity.versionColumn)
            let forced = objects.filter { overwrite.contains(ObjectIdentifier($0)) }
            let checked = objects.filter { !overwrite.contains(ObjectIdentifier($0)) }
            var removed: Set<Int64> = []
            for (batch, checksVersion) in [(checked, true), (forced, false)] where !batch.isEmpty {
                let result = try coordinator.execute(
                    "DELETE FROM \(entity.quotedTable) AS t USING unnest($1::bigint[], $2::bigint[]) AS v(c0, c1) "
                        + "WHERE t.\(primaryKey) = v.c0" + (checksVersion ? " AND t.\(version) = v.c1" : "")
                        + " RETURNING t.\(primaryKey)",
                    [batch.map { key(of: $0) }, batch.map { $0.version }], on: connection)
                for row in result { removed.insert(try row.decode(Int64.self, at: 0)) }
            }
            for object in objects {
                if let objectKey = key(of: object), removed.contains(objectKey) {
                    outcome.deleted.append(object)
                } else {
                    outcome.conflicts.append(object)
                }
            }
        }
        return outcome
    }

    // MARK: - Conflicts

    struct Conflict {
        let object: ManagedObject
        let storeVersion: Int64?
        let storeValues: [StoredValue]?
        let storeKeys: [Int64?]?
        let report: MergeConflict
    }

    /// Locks the rows of updated and deleted objects (`FOR UPDATE`, one query per
    /// entity) and returns those whose version moved or whose row is gone.
    private func lockAndFindConflicts(on connection: Connection) throws -> [Conflict] {
        let candidates = changedSet.filter { !insertedSet.contains($0) && $0.objectID.primaryKey != nil }
            .union(deletedSet)
        var conflicts: [Conflict] = []
        for entity in coordinator.model.entities {
            let objects = candidates.filter { $0.entity.name == entity.name }
            guard !objects.isEmpty else { continue }
            let keys = objects.compactMap(\.objectID.primaryKey)
            let result = try coordinator.execute(
                "SELECT \(entity.selectList(alias: "t")) FROM \(entity.quotedTable) AS t "
                    + "WHERE t.\(Connection.quoteIdentifier(entity.primaryKeyColumn)) = ANY($1) FOR UPDATE",
                [keys], on: connection)
            var rows: [Int64: Row] = [:]
            for row in result { rows[try row.decode(Int64.self, at: 0)] = row }
            for object in objects {
                guard let key = object.objectID.primaryKey else { continue }
                let snapshotValues = Dictionary(
                    uniqueKeysWithValues: entity.attributes.map { ($0.name, object.snapshot?[$0.index] ?? nil) })
                let objectValues = Dictionary(
                    uniqueKeysWithValues: object.changedAttributeIndexes.map {
                        (entity.attributes[$0].name, object.values[$0])
                    })
                guard let row = rows[key] else {
                    let report = MergeConflict(
                        objectID: object.objectID, snapshotVersion: object.version, storeVersion: nil,
                        snapshotValues: snapshotValues, objectValues: objectValues, storeValues: nil)
                    conflicts.append(Conflict(object: object, storeVersion: nil, storeValues: nil, storeKeys: nil, report: report))
                    continue
                }
                let storeVersion = try row.decode(Int64.self, at: 1)
                guard storeVersion != object.version else { continue }
                var storeValues: [StoredValue] = []
                var column = 2
                for attribute in entity.attributes {
                    storeValues.append(try row.withCell(at: column) { try attribute.decode($0) })
                    column += 1
                }
                var storeKeys: [Int64?] = Array(repeating: nil, count: entity.relationships.count)
                for relationship in entity.relationships where !relationship.isToMany {
                    storeKeys[relationship.index] = try row.decode(Int64?.self, at: column)
                    column += 1
                }
                let report = MergeConflict(
                    objectID: object.objectID, snapshotVersion: object.version, storeVersion: storeVersion,
                    snapshotValues: snapshotValues, objectValues: objectValues,
                    storeValues: Dictionary(uniqueKeysWithValues: entity.attributes.map { ($0.name, storeValues[$0.index]) }))
                conflicts.append(
                    Conflict(object: object, storeVersion: storeVersion, storeValues: storeValues, storeKeys: storeKeys, report: report))
            }
        }
        return conflicts
    }

    /// Applies the merge policy to conflicting objects in memory.
    private func resolve(_ conflicts: [Conflict], overwrite: inout Set<ObjectIdentifier>) {
        for conflict in conflicts {
            let object = conflict.object
            guard let storeVersion = conflict.storeVersion, let storeValues = conflict.storeValues,
                let storeKeys = conflict.storeKeys
            else {
                // The row is gone: nothing left to update or delete.
                forgetDeletedObject(object)
                continue
            }
            let entity = object.entity
            let changedAttributes = Set(object.changedAttributeIndexes)
            let changedToOne = Set(object.changedToOneIndexes)
            let isDelete = deletedSet.contains(object)
            switch mergePolicy {
            case .error:
                continue
            case .mergeByPropertyStoreTrump:
                for attribute in entity.attributes {
                    let index = attribute.index
                    let storeChanged = !attribute.isEqual(storeValues[index], object.snapshot?[index] ?? nil)
                        || (storeValues[index] == nil) != ((object.snapshot?[index] ?? nil) == nil)
                    if !changedAttributes.contains(index) || storeChanged { object.values[index] = storeValues[index] }
                }
                for index in entity.toOneRelationships.map(\.index) {
                    let committed = object.snapshotKeys.count > index ? object.snapshotKeys[index] : nil
                    if !changedToOne.contains(index) || storeKeys[index] != committed {
                        object.toOne[index] = storeKeys[index].map { .key($0) } ?? .none
                    }
                }
            case .mergeByPropertyObjectTrump:
                for index in entity.attributes.indices where !changedAttributes.contains(index) {
                    object.values[index] = storeValues[index]
                }
                for index in entity.toOneRelationships.map(\.index) where !changedToOne.contains(index) {
                    object.toOne[index] = storeKeys[index].map { .key($0) } ?? .none
                }
            case .overwrite:
                overwrite.insert(ObjectIdentifier(object))
            case .rollback:
                object.values = storeValues
                for index in entity.toOneRelationships.map(\.index) {
                    object.toOne[index] = storeKeys[index].map { .key($0) } ?? .none
                }
                if isDelete {
                    deletedSet.remove(object)
                    object.deletedFlag = false
                }
            }
            // The object now stands on the store's row.
            object.snapshot = storeValues
            object.snapshotKeys = storeKeys
            object.version = storeVersion
            object.loadedToMany.removeAll()
        }
    }

    // MARK: - Validation and bookkeeping

    private func validateDeleteRules() throws {
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

    /// Updates the objects after a commit and tells observers and the manager.
    private func finishSave(outcome: WriteOutcome, reservedKeys: [ObjectIdentifier: Int64], changes: ContextChanges) {
        for object in outcome.inserted {
            guard let key = reservedKeys[ObjectIdentifier(object)] else { continue }
            registered.removeValue(forKey: object.objectID)
            object.objectID = ObjectID(entityName: object.entity.name, primaryKey: key)
            registered[object.objectID] = object
            object.version = 1
            object.commitSnapshot()
        }
        for (object, _) in outcome.updated {
            if let version = outcome.newVersions[ObjectIdentifier(object)] { object.version = version }
            object.commitSnapshot()
        }
        for object in outcome.deleted {
            forgetDeletedObject(object)
            object.isMissingFromStore = false
        }
        insertedSet.removeAll()
        deletedSet.removeAll()
        changedSet = changedSet.filter { $0.managedObjectContext === self && $0.hasPersistentChangedValues }
        observers.postDidSave(changes)
        if shouldMergeOnSave, let manager, manager.mainContext !== self {
            manager.mergeIntoMainContext(changes)
        }
    }
}
