/// What a save writes and in what order, decided from the context's changed objects
/// without a connection: `SavePipeline.writeChanges` sends it.
///
/// The order is the one a save's statements go in: primary keys reserved for the
/// inserts that need them, inserts entity by entity in foreign-key order (plain ones,
/// then keyed ones as upserts), updates grouped by the columns they write, deletes
/// entity by entity in reverse foreign-key order (version-checked ones first, then the
/// ones the merge policy `.overwrite` forces).
struct SavePlan {
    /// An entity's inserted objects, in `Model.insertOrder`.
    struct Inserts {
        let entity: EntityDescription
        /// Objects written with a plain multi-row `INSERT`.
        let plain: [ManagedObject]
        /// Objects written as upserts on their unique key (`upsertKeyedInserts`).
        let keyed: [ManagedObject]
        /// Objects whose primary keys are reserved before any write (plain ones and
        /// keyed ones of a self-referencing entity, minus those reserved already).
        let needingKeys: [ManagedObject]
    }

    /// An entity's deleted objects, in reverse `Model.insertOrder`.
    struct Deletes {
        let entity: EntityDescription
        /// All of the entity's deleted objects.
        let objects: Set<ManagedObject>
        /// One `DELETE` each: the version-checked objects, then the forced ones
        /// (`checksVersion` false); empty batches are left out.
        let batches: [(checksVersion: Bool, objects: Set<ManagedObject>)]
    }

    /// Inserts by entity, parents before children.
    var inserts: [Inserts] = []
    /// Updated objects grouped by the columns they write, in shape order.
    var updates: [(shape: UpdateShape, objects: [ManagedObject])] = []
    /// Deletes by entity, children before parents.
    var deletes: [Deletes] = []

    /// Plans a save.
    ///
    /// - Parameters:
    ///   - model: the model whose `insertOrder` orders the statements.
    ///   - inserted, changed, deleted: the context's inserted, changed and deleted
    ///     objects (an object in `changed` that is also inserted or deleted is not
    ///     updated).
    ///   - overwrite: objects the merge policy `.overwrite` writes whole, unchecked.
    ///   - reservedKeys: primary keys reserved by an earlier attempt of the save.
    ///   - keyedInsertKeysChanged: whether an imported object's key was changed since
    ///     the import (see `SavePipeline.partitionKeyedInserts`).
    init(
        model: Model, inserted: some ObjectMembership, changed: some ObjectMembership, deleted: some ObjectMembership,
        overwrite: Set<ObjectIdentifier>, reservedKeys: [ObjectIdentifier: Int64], keyedInsertKeysChanged: Bool
    ) {
        let insertedByEntity = Self.objectsByEntity(inserted)
        for entity in model.insertOrder {
            guard let objects = insertedByEntity[entity.name], !objects.isEmpty else { continue }
            let parts = SavePipeline.partitionKeyedInserts(objects, of: entity, keysChanged: keyedInsertKeysChanged)
            let needing = (parts.plain + parts.keyedNeedingKeys).filter { reservedKeys[ObjectIdentifier($0)] == nil }
            inserts.append(Inserts(entity: entity, plain: parts.plain, keyed: parts.keyed, needingKeys: needing))
        }
        updates = Self.updateGroups(changed: changed, inserted: inserted, deleted: deleted, overwrite: overwrite)
        guard !deleted.isEmpty else { return }
        for entity in model.insertOrder.reversed() {
            let objects = Set(deleted.lazy.filter { $0.entity.name == entity.name })
            guard !objects.isEmpty else { continue }
            var batches: [(checksVersion: Bool, objects: Set<ManagedObject>)] = []
            for forced in [false, true] {
                let batch = objects.filter { overwrite.contains(ObjectIdentifier($0)) == forced }
                if !batch.isEmpty { batches.append((!forced, batch)) }
            }
            deletes.append(Deletes(entity: entity, objects: objects, batches: batches))
        }
    }

    /// Which columns an update writes: updated objects of one entity that write the
    /// same columns go out as one statement. `overwrite` rows (merge policy
    /// `.overwrite`) write every column and skip the version check.
    struct UpdateShape: Hashable, Comparable {
        let entityName: String
        let overwrite: Bool
        let attributeIndexes: [Int]
        let toOneIndexes: [Int]

        static func < (a: UpdateShape, b: UpdateShape) -> Bool {
            if a.entityName != b.entityName { return a.entityName < b.entityName }
            if a.overwrite != b.overwrite { return !a.overwrite }
            if a.attributeIndexes != b.attributeIndexes {
                return a.attributeIndexes.lexicographicallyPrecedes(b.attributeIndexes)
            }
            return a.toOneIndexes.lexicographicallyPrecedes(b.toOneIndexes)
        }
    }

    /// The updated objects grouped by the columns they write, in shape order; each
    /// object's changes are computed once, as a bit mask where the entity allows.
    /// Neighbours usually share a shape, so the last one is tried before the dictionary.
    static func updateGroups(
        changed: some ObjectMembership, inserted: some ObjectMembership, deleted: some ObjectMembership,
        overwrite: Set<ObjectIdentifier>
    ) -> [(shape: UpdateShape, objects: [ManagedObject])] {
        var groups: [(shape: UpdateShape, objects: [ManagedObject])] = []
        var groupIndexes: [UpdateShape: Int] = [:]
        // The group the last object went to when it was found by mask.
        var last: (group: Int, mask: UInt64, entity: ObjectIdentifier, toOne: [Int])?
        for object in changed where !inserted.contains(object) && !deleted.contains(object) {
            let entity = object.entity
            let all = !overwrite.isEmpty && overwrite.contains(ObjectIdentifier(object))
            let mask = all ? nil : object.changedAttributeMask
            let toOne = all ? entity.toOneIndexes : object.changedToOneIndexes
            if let mask {
                if mask == 0 && toOne.isEmpty { continue }
                if let last, last.mask == mask, last.entity == ObjectIdentifier(entity), last.toOne == toOne {
                    groups[last.group].objects.append(object)
                    continue
                }
            }
            let attributes =
                all
                ? Array(entity.attributes.indices)
                : mask.map { mask in entity.attributes.indices.filter { mask & (1 << UInt64($0)) != 0 } }
                    ?? object.changedAttributeIndexes
            if !all && attributes.isEmpty && toOne.isEmpty { continue }
            let shape = UpdateShape(entityName: entity.name, overwrite: all, attributeIndexes: attributes, toOneIndexes: toOne)
            let group: Int
            if let index = groupIndexes[shape] {
                group = index
                groups[index].objects.append(object)
            } else {
                group = groups.count
                groupIndexes[shape] = group
                groups.append((shape, [object]))
            }
            last = mask.map { (group, $0, ObjectIdentifier(entity), toOne) }
        }
        return groups.sorted { $0.shape < $1.shape }
    }

    /// Objects grouped by entity name, in one pass (a save's objects mostly come in runs
    /// of one entity, so the name is hashed once per run, not once per object).
    static func objectsByEntity(_ objects: some ObjectMembership) -> [String: [ManagedObject]] {
        var groups: [String: [ManagedObject]] = [:]
        var run: [ManagedObject] = []
        var runName: String?
        /// Files the run under its entity (an entity's first run as it is, not copied).
        func endRun() {
            guard let runName else { return }
            if var group = groups.removeValue(forKey: runName) {
                group += run
                groups[runName] = group
            } else {
                groups[runName] = run
            }
        }
        for object in objects {
            let name = object.entity.name
            if name != runName {
                endRun()
                run = []
                if runName == nil { run.reserveCapacity(objects.count) }  // (usually the only run)
                runName = name
            }
            run.append(object)
        }
        endRun()
        return groups
    }
}
