import Foundation

/// A compiled import of one entity: how records are matched to objects (a unique
/// attribute and where its value is in a record), which to-one relationships are linked
/// by remote keys, and what is applied to each object. `insertOrUpdate`, the object
/// mapper and the import operations all run through it.
///
/// Per batch it sends one fetch (one array parameter) for the keys not already in the
/// context, plus one key lookup per linked relationship for the related keys it does not
/// know yet (cache, context) — never one query per record.
struct RecordImport {
    /// A to-one relationship filled from a remote key of the related entity.
    struct Link {
        let relationship: RelationshipDescription
        let destination: EntityDescription
        let destinationKey: AttributeDescription
        let paths: [RemoteKeyPath]
        let remoteName: String
        let whenMissing: MissingRelatedObject
        let ignoresNull: Bool
    }

    /// What a link points at for one remote key.
    private enum Target {
        case object(ManagedObject)
        case key(Int64)
        case none
    }

    /// A link's value in one record.
    private enum LinkValue {
        case absent
        case null
        case key(UniqueValue)
    }

    let entity: EntityDescription
    /// The entity's class, as the caller knows it (`entity.objectClass`): new objects are
    /// made as it without the cast `EntityDescription.makeObject()` checks.
    let objectClass: ManagedObject.Type
    /// The unique attribute records are matched on; `nil` inserts one object per record.
    let key: AttributeDescription?
    /// Where the key is in a record (the first path present wins).
    let keyPaths: [RemoteKeyPath]
    /// The key's remote name, for messages.
    let keyName: String
    let links: [Link]
    /// Skip the fetch: the caller knows every key is new (existing rows are still
    /// updated, not duplicated, by the save's upsert).
    var guaranteedInsert = false
    /// Whether records update the objects of keys that exist (Vokoder's
    /// `overwriteObjectsWithServerChanges`); when not, those objects are left untouched
    /// (rows, and objects the context held before the call, unsaved inserts too), and a
    /// key another process inserts before the save is left as that process wrote it.
    /// The caller notes the context's inserts first (`ImportUndo.noteInsertedBefore`).
    var updatesExisting = true
    /// Applies a record to its object, after the links were set (record, object, record
    /// index).
    let apply: (JSONValue, ManagedObject, Int, DateFormatters) throws -> Void

    /// Objects created to stand for related keys that did not exist, per batch: the
    /// import caches their primary keys once they are saved.
    struct Stub {
        let entity: String
        let attribute: String
        let value: UniqueValue
        let object: ManagedObject
    }

    /// Imports one batch of records into the context: returns one object per distinct
    /// key (in order of first appearance), or one per record without a key.
    ///
    /// The batch is planned first (`BatchKeys`: which records share a key, in what
    /// order), before anything changes; then the links are resolved, the objects found
    /// (in the context, then with one fetch) or inserted, and the records applied.
    ///
    /// - Throws: `ImportError` naming the record (the context is then left with the
    ///   batch's partial changes, which `undo` reverts), `PostgresError`.
    func importBatch(
        _ records: [JSONValue], firstIndex: Int, in context: ManagedObjectContext, cache: ImportKeyCache?,
        undo: ImportUndo, formatters: DateFormatters, stubs: inout [Stub]
    ) throws -> [ManagedObject] {
        // Keys first: a missing or mistyped key fails the batch before anything changes.
        let batch = try key.map { key in
            try BatchKeys(
                records, firstIndex: firstIndex, key: key, at: keyPaths, keyName: keyName, entityName: entity.name,
                formatters: formatters)
        }
        let linkTargets = try resolveLinks(
            records, firstIndex: firstIndex, in: context, cache: cache, undo: undo, formatters: formatters, stubs: &stubs)

        guard let key, let batch else {
            return try records.indices.map { offset in
                let object = objectClass.init()
                context.insert(object)
                undo.noteInserted(object)
                try applyRecord(records[offset], to: object, index: firstIndex + offset, links: linkTargets, offset: offset, context: context, formatters: formatters)
                return object
            }
        }
        let (found, fresh) = try existingObjects(for: batch, key: key, count: records.count, firstIndex: firstIndex, in: context)

        var objects: [ManagedObject] = []
        objects.reserveCapacity(batch.order.count)
        let existingCount = batch.order.reduce(0) { $0 + (found[$1] == nil ? 0 : 1) }
        context.reserveCapacity(inserting: batch.order.count - existingCount, changing: existingCount)
        undo.reserveInserted(batch.order.count - existingCount)
        for first in batch.order {
            let object: ManagedObject
            if let existing = found[first] {
                if !updatesExisting && !undo.isInsertedByCall(existing, in: context) {
                    objects.append(existing)  // a stored row or an object from before the call: left untouched
                    continue
                }
                if !fresh.isEmpty && fresh[first] {
                    undo.noteFetched(existing)
                } else {
                    undo.remember(existing, in: context)
                }
                object = existing
            } else {
                object = objectClass.init()
                context.insertNew(object, entity: entity)
                undo.noteInserted(object)
                object.initializeValue(batch.storedKeys[first], at: key.index)
                object.storage.markKeyedInsert(attribute: key.index, keepsExisting: !updatesExisting)
            }
            var offset = first
            while offset >= 0 {
                try applyRecord(
                    records[offset], to: object, index: firstIndex + offset, links: linkTargets, offset: offset,
                    context: context, formatters: formatters)
                offset = batch.nextOffset[offset]
            }
            objects.append(object)
        }
        return objects
    }

    /// The objects of a batch's keys that exist, by the offset of their key's first
    /// record: unsaved ones in the context by their current key, the rest from the
    /// database with one statement. `fresh` marks those fetched into a context that held
    /// no objects yet (they need no copy of their state for undoing); it is empty
    /// otherwise.
    ///
    /// - Throws: `ImportError.deletedInContext`, `PostgresError`.
    private func existingObjects(
        for batch: BatchKeys, key: AttributeDescription, count: Int, firstIndex: Int, in context: ManagedObjectContext
    ) throws -> (found: [ManagedObject?], fresh: [Bool]) {
        var found = [ManagedObject?](repeating: nil, count: count)
        let pendingObjects = context.insertedSet.union(context.changedSet).union(context.deletedSet)
        for object in pendingObjects where object.entity.name == entity.name && object.storage.valueCount > key.index {
            guard let hash = UniqueValue(object.storage.value(at: key.index)), let first = batch.firstOffset(of: hash) else { continue }
            if object.deletedFlag {
                throw ImportError.deletedInContext(recordIndex: firstIndex + first, key: keyName, entity: entity.name)
            }
            found[first] = object
        }
        let missing = batch.order.filter { found[$0] == nil }
        var fresh: [Bool] = []
        guard !guaranteedInsert && !missing.isEmpty else { return (found, fresh) }
        if !context.hasRegisteredObjects { fresh = [Bool](repeating: false, count: count) }
        let keys = missing.map { batch.storedKeys[$0] }
        let fetched = try context.fetchObjects(entity: entity, whereUnique: key, isIn: keys)
        // Rows come in the index's order or the table's, often the keys' order (records
        // sorted by key, a table filled in key order), those not found left out: each
        // row's key is looked for a few positions past the last one matched, compared as
        // the dictionary compares keys, before it is hashed.
        var next = 0
        for object in fetched {
            guard let value = UniqueValue(object.storage.value(at: key.index)) else { continue }
            let first: Int
            if let position = Self.position(of: value, in: keys, from: next) {
                first = missing[position]
                next = position + 1
            } else if let offset = batch.firstOffset(of: value) {
                first = offset
            } else {
                continue
            }
            guard found[first] == nil else { continue }
            if object.deletedFlag {
                throw ImportError.deletedInContext(recordIndex: firstIndex + first, key: keyName, entity: entity.name)
            }
            found[first] = object
            if !fresh.isEmpty { fresh[first] = true }
        }
        return (found, fresh)
    }

    /// The position of `value` among the next few `keys` from `start` (at most four
    /// compared), or `nil`. Text and integer keys are compared in place, as `UniqueValue`
    /// compares them (making a `UniqueValue` per candidate costs more than the hash);
    /// other keys are left to the hash.
    private static func position(of value: UniqueValue, in keys: [StoredValue], from start: Int) -> Int? {
        let end = Swift.min(keys.count, start + 4)
        guard start < end else { return nil }
        // (The value's case first, then each candidate's in place: a switch over a tuple
        // of both copied them, a retain and release of each text per candidate.)
        switch value {
        case .string(let text):
            for position in start..<end {
                if case .string(let candidate) = keys[position], ExactText(candidate) == text { return position }
            }
        case .integer(let integer):
            for position in start..<end {
                switch keys[position] {
                case .int(let candidate) where Int64(candidate) == integer: return position
                case .int64(let candidate) where candidate == integer: return position
                case .int32(let candidate) where Int64(candidate) == integer: return position
                case .int16(let candidate) where Int64(candidate) == integer: return position
                default: continue
                }
            }
        case .other:
            return nil
        }
        return nil
    }

    /// Sets the links of one record, applies the record, then validates the object (its
    /// attributes' rules and `validateForInsert()` or `validateForUpdate()`).
    private func applyRecord(
        _ record: JSONValue, to object: ManagedObject, index: Int, links linkTargets: [([LinkValue], [UniqueValue: Target])],
        offset: Int, context: ManagedObjectContext, formatters: DateFormatters
    ) throws {
        for (link, (values, targets)) in zip(links, linkTargets) {
            switch values[offset] {
            case .absent:
                continue
            case .null:
                object.prepareStorage()
                if case .none = object.storage.toOne[link.relationship.index] { continue }
                if link.ignoresNull { continue }
                object.setRelatedObjects([], at: link.relationship.index)
            case .key(let hash):
                set(object, link: link, to: targets[hash] ?? .none, context: context)
            }
        }
        do {
            try apply(record, object, index, formatters)
        } catch let error as ImportError {
            throw error
        } catch {
            throw ImportError.recordFailed(recordIndex: index, underlying: error)
        }
        if let failures = object.validationFailures(for: context.insertedSet.contains(object) ? .insert : .update) {
            throw ImportError.invalidRecord(recordIndex: index, entity: entity.name, validation: ObjectValidationError(failures))
        }
    }

    /// Points a to-one relationship at a target, leaving it untouched when it already
    /// points there (so an unchanged record stays unchanged).
    private func set(_ object: ManagedObject, link: Link, to target: Target, context: ManagedObjectContext) {
        let index = link.relationship.index
        object.prepareStorage()
        switch target {
        case .none:
            if case .none = object.storage.toOne[index] { return }
            object.setRelatedObjects([], at: index)
        case .object(let related):
            object.setRelatedObjects([related], at: index)
        case .key(let primaryKey):
            let id = ObjectID(entityName: link.destination.rootEntityName, primaryKey: primaryKey)
            if let registered = context.registeredObject(for: id), !registered.deletedFlag {
                if case .object(let current) = object.storage.toOne[index], current === registered { return }
                object.setRelatedObjects([registered], at: index)
                return
            }
            switch object.storage.toOne[index] {
            case .key(let current) where current == primaryKey: return
            case .object(let current) where current.objectID.primaryKey == primaryKey: return
            default:
                object.willChangeForUndo()
                object.setReference(.key(primaryKey), at: index)
                context.objectDidChange(object)
            }
        }
    }

    /// Reads each link's remote keys from the records and finds their objects: in the
    /// context, in the cache, then with one key lookup per link for the rest; creates
    /// stubs for the missing ones when the link says so.
    private func resolveLinks(
        _ records: [JSONValue], firstIndex: Int, in context: ManagedObjectContext, cache: ImportKeyCache?,
        undo: ImportUndo, formatters: DateFormatters, stubs: inout [Stub]
    ) throws -> [([LinkValue], [UniqueValue: Target])] {
        guard !links.isEmpty else { return [] }
        var resolved: [([LinkValue], [UniqueValue: Target])] = []
        for link in links {
            let keys = try linkKeys(of: link, in: records, firstIndex: firstIndex, formatters: formatters)
            let targets = try targets(
                of: link, for: keys, firstIndex: firstIndex, in: context, cache: cache, undo: undo, stubs: &stubs)
            resolved.append((keys.values, targets))
        }
        return resolved
    }

    /// A link's remote keys in a batch: each record's value, and the distinct keys (as
    /// stored) with the index of the first record that names each.
    private struct LinkKeys {
        var values: [LinkValue] = []
        var wanted: [UniqueValue: StoredValue] = [:]
        var firstUse: [UniqueValue: Int] = [:]
    }

    /// Reads a link's remote keys from the records.
    ///
    /// - Throws: `ImportError.typeMismatch`.
    private func linkKeys(
        of link: Link, in records: [JSONValue], firstIndex: Int, formatters: DateFormatters
    ) throws -> LinkKeys {
        var keys = LinkKeys()
        keys.values.reserveCapacity(records.count)
        for (offset, record) in records.enumerated() {
            guard let raw = Self.value(in: record, at: link.paths) else {
                keys.values.append(.absent)
                continue
            }
            if raw.isNull {
                keys.values.append(.null)
                continue
            }
            let stored: StoredValue
            do {
                stored = try ValueConversion.key.storedValue(raw, for: link.destinationKey, formatters: formatters)
            } catch {
                throw ImportError.typeMismatch(
                    recordIndex: firstIndex + offset, key: link.remoteName, entity: link.destination.name,
                    attribute: link.destinationKey.name, expected: error.expected, actual: error.actual,
                    value: raw.importErrorText)
            }
            guard let hash = UniqueValue(stored) else {
                keys.values.append(.null)
                continue
            }
            keys.values.append(.key(hash))
            if keys.wanted[hash] == nil {
                keys.wanted[hash] = stored
                keys.firstUse[hash] = firstIndex + offset
            }
        }
        return keys
    }

    /// Finds what a link's keys point at: objects in the context, keys in the cache,
    /// then one key lookup for the rest; what is still missing becomes a stub, `nil` or
    /// an error, as the link says.
    ///
    /// - Throws: `ImportError.unresolvedRelationship`, `PostgresError`.
    private func targets(
        of link: Link, for keys: LinkKeys, firstIndex: Int, in context: ManagedObjectContext, cache: ImportKeyCache?,
        undo: ImportUndo, stubs: inout [Stub]
    ) throws -> [UniqueValue: Target] {
        let wanted = keys.wanted
        var targets: [UniqueValue: Target] = [:]
        let keyIndex = link.destinationKey.index
        for object in context.insertedSet.union(context.changedSet)
        where context.coordinator.model.isEntity(object.entity, kindOf: link.destination.name) && !object.deletedFlag && object.storage.valueCount > keyIndex {
            if let hash = UniqueValue(object.storage.value(at: keyIndex)), wanted[hash] != nil { targets[hash] = .object(object) }
        }
        var remaining: [UniqueValue] = []
        for hash in wanted.keys where targets[hash] == nil {
            if let primaryKey = cache?.primaryKey(
                entity: link.destination.name, attribute: link.destinationKey.name, value: hash)
            {
                targets[hash] = .key(primaryKey)
            } else {
                remaining.append(hash)
            }
        }
        if !remaining.isEmpty {
            // (In a child context, as its parent sees them: its unsaved objects too.)
            let pairs = try context.uniqueObjectIDs(
                of: link.destination, where: link.destinationKey, isIn: remaining.map { wanted[$0] ?? .null })
            for (id, value) in pairs {
                guard let hash = UniqueValue(value), wanted[hash] != nil else { continue }
                guard let primaryKey = id.primaryKey else {
                    targets[hash] = .object(try context.object(with: id))
                    continue
                }
                targets[hash] = .key(primaryKey)
                cache?.store(primaryKey, entity: link.destination.name, attribute: link.destinationKey.name, value: hash)
            }
        }
        for hash in remaining where targets[hash] == nil {
            switch link.whenMissing {
            case .createStub:
                let stub = link.destination.makeObject()
                context.insert(stub)
                undo.noteInserted(stub)
                stub.setStoredValue(wanted[hash] ?? .null, at: keyIndex)
                stub.storage.markKeyedInsert(attribute: keyIndex, keepsExisting: false)
                stubs.append(Stub(entity: link.destination.name, attribute: link.destinationKey.name, value: hash, object: stub))
                targets[hash] = .object(stub)
            case .leaveNil:
                targets[hash] = Target.none
            case .fail:
                throw ImportError.unresolvedRelationship(
                    recordIndex: keys.firstUse[hash] ?? firstIndex, key: link.remoteName, entity: entity.name,
                    relationship: link.relationship.name)
            }
        }
        return targets
    }

    /// The value at the first of the paths present in the record.
    static func value(in record: JSONValue, at paths: [RemoteKeyPath]) -> JSONValue? {
        for path in paths {
            if let value = path.value(in: record) { return value }
        }
        return nil
    }
}

extension RecordImport {
    /// Whether an attribute is a unique key of its entity on its own.
    static func isUnique(_ attribute: AttributeDescription, of entity: EntityDescription) -> Bool {
        attribute.isUnique || entity.uniqueKeys.contains([attribute.name])
    }

    /// The unique attribute of an entity named `name`.
    ///
    /// - Throws: `ImportError.unknownKey` or `.notUniqueKey`.
    static func uniqueAttribute(_ name: String, of entity: EntityDescription) throws -> AttributeDescription {
        guard let attribute = entity.attribute(named: name) else {
            throw ImportError.unknownKey(entity: entity.name, key: name)
        }
        guard isUnique(attribute, of: entity) else { throw ImportError.notUniqueKey(entity: entity.name, attribute: name) }
        return attribute
    }

    /// Compiles relationship maps into links.
    ///
    /// - Throws: `ImportError.unknownKey`, `.invalidMap` (not a to-one relationship, or
    ///   an unknown destination key), `.notUniqueKey` (stubs need a unique key).
    static func links<Object>(
        _ maps: [ObjectMap<Object>], of entity: EntityDescription, model: Model, ignoresNull: Bool
    ) throws -> [Link] {
        // (A closure, not the key path `\.isRelationship`: a generic key path is built
        // anew on each call, and imports call this per batch.)
        try maps.filter { $0.isRelationship }.map { map in
            guard let relationship = entity.relationship(named: map.modelKey) else {
                throw ImportError.unknownKey(entity: entity.name, key: map.modelKey)
            }
            guard !relationship.isToMany, relationship.columnName != nil,
                let destination = model.entity(named: relationship.destinationEntityName)
            else {
                throw ImportError.invalidMap(
                    entity: entity.name, key: map.modelKey,
                    reason: "only to-one relationships are linked by remote keys; import the other side instead")
            }
            let keyName = map.destinationKey ?? ""
            guard let destinationKey = destination.attribute(named: keyName) else {
                throw ImportError.unknownKey(entity: destination.name, key: keyName)
            }
            if map.whenMissing == .createStub && !isUnique(destinationKey, of: destination) {
                throw ImportError.notUniqueKey(entity: destination.name, attribute: keyName)
            }
            return Link(
                relationship: relationship, destination: destination, destinationKey: destinationKey,
                paths: [RemoteKeyPath(map.remoteKeyPath)], remoteName: map.remoteKeyPath, whenMissing: map.whenMissing,
                ignoresNull: map.ignoresNullValueOverwrites ?? ignoresNull)
        }
    }
}
