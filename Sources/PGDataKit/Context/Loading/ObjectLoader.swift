import Foundation

/// One load of stored rows into a context's objects: a fetch's rows made into new
/// objects or put under the registered ones (`fetchObjects`, `register(row:…)`,
/// `apply(row:…)`), registered objects re-read (`refreshObjects`, `refresh`), and the
/// members of to-many and many-to-many relationships read
/// (`ObjectLoader+Relationships.swift`). The context makes one for each load, in its
/// forwards of the same names (`ManagedObjectContext+Fetch.swift`,
/// `+ManyToMany.swift`); it lives for that load.
///
/// It reads and writes the context's registry (`bookkeeping`), reads rows through the
/// context's connection (`withDatabase`, `coordinator`), and in a child context asks the
/// parent through the context (`register(_:)`, `refreshFromParent`, `loadRelationship`).
/// It holds the one reference and nothing else: a method call copies it, and a fetch's
/// rows are loaded inside one call.
struct ObjectLoader {
    /// The context the rows are loaded into (held for the one load).
    let context: ManagedObjectContext

    /// Fetches rows of an entity and registers them (one query).
    ///
    /// - Parameter mayBeRegistered: `false` when the context is known to hold no object
    ///   of the rows (see `register(row:entity:mayBeRegistered:)`).
    func fetchObjects(
        entity: EntityDescription, _ query: StoreQuery = .all, mayBeRegistered: Bool = true
    ) throws -> [ManagedObject] {
        try fetchObjects(entity: entity, query, as: ManagedObject.self, mayBeRegistered: mayBeRegistered)
    }

    /// `fetchObjects(entity:_:mayBeRegistered:)` into an array of the entity's class
    /// (`T` must be `entity.objectClass` or a superclass of it): a fetch hands back the
    /// array it built, with no second array to convert it into and release.
    ///
    /// An entity with sub-entities is fetched in two steps (`hierarchyRows`), so each
    /// object is made of its own entity's class with its own entity's columns.
    func fetchObjects<T: ManagedObject>(
        entity: EntityDescription, _ query: StoreQuery, as type: T.Type, mayBeRegistered: Bool
    ) throws -> [T] {
        if entity.hasSubentities {
            let rows = try context.withDatabase { try hierarchyRows(of: entity, query, on: $0) }
            return ManagedObject.cast(try register(rows), to: T.self)
        }
        let result = try context.withDatabase { try context.coordinator.selectObjects(of: entity, query, on: $0) }
        // New objects are made as `T` directly when it is the entity's class (a typed fetch;
        // a fetch by entity name asks for `ManagedObject`, a superclass of it).
        let making: ManagedObject.Type? = ObjectIdentifier(T.self) == ObjectIdentifier(entity.objectClass) ? T.self : nil
        guard !mayBeRegistered else {
            return try registerRows(result, entity: entity, as: T.self, making: making)
        }
        // None of the rows can be registered already: the objects are made first, then
        // registered in a pass of their own. (Inserting each into the registry as it is
        // made, a table of ~10 MB for 100,000 objects written at random places between
        // the objects' own writes, measured slower on the clock for fewer instructions.)
        // The second pass reads only `made`: each object's key, and the reference the
        // registry is to hold. (Reading the ID from the object, or retaining it then, would
        // bring every object back into the processor's cache: most of that pass's time.)
        // Unsafe: each entry owns one +1 reference, taken while the object was at hand, and
        // given up exactly once: moved into the registry by `takeRetainedValue()` below, or
        // released by the `catch` when a row fails.
        var made: [(key: Int64, object: Unmanaged<ManagedObject>)] = []
        let objects = try result.withFieldReader { reader in
            // Unsafe: `count` is raised right after each element is initialized, so
            // exactly the first `count` are initialized, also when a row throws.
            try [T](unsafeUninitializedCapacity: result.count) { buffer, count in
                // (Locals of the closure, `made` written once at the end: a variable captured
                // from outside is read from its box at every use.)
                var filler = ValueBlockFiller(runLength: entity.attributeDecodings.count, expectedRuns: result.count)
                // Unsafe: the references `made` is to own (see there), released here if a row fails.
                var references: [(key: Int64, object: Unmanaged<ManagedObject>)] = []
                references.reserveCapacity(result.count)
                do {
                    for index in 0..<min(result.count, buffer.count) {
                        reader.load(row: index)
                        let key = try ManagedObjectContext.decodeInteger(result, reader, column: 0)
                        let object = try makeObject(
                            result, reader, entity: entity, objectID: ObjectID(entityName: entity.rootEntityName, primaryKey: key),
                            key: key, making: making, filling: &filler)
                        // Unsafe: the +1 reference that `made` owns (see there).
                        references.append((key, Unmanaged.passRetained(object)))
                        // Unsafe: `makeObject` made it as `entity.objectClass` (as `making` when
                        // that is `T`); `T` is that class or a superclass.
                        buffer.initializeElement(at: count, to: unsafeDowncast(object, to: T.self))
                        count += 1
                    }
                } catch {
                    for entry in references { entry.object.release() }  // (the references meant for the registry)
                    throw error
                }
                made = references
            }
        }
        context.bookkeeping.withRegistry { registry in
            registry.reserveCapacity(registry.count + made.count)
            for entry in made {
                // The retained reference moves into the registry.
                registry[ObjectID(entityName: entity.rootEntityName, primaryKey: entry.key)] = entry.object.takeRetainedValue()
            }
        }
        return objects
    }

    /// `fetchObjects(entity:_:as:mayBeRegistered:)`'s rows, some of which may be objects
    /// the context holds already: each looked up, applied or made, and registered.
    private func registerRows<T: ManagedObject>(
        _ result: QueryResult, entity: EntityDescription, as type: T.Type, making: ManagedObject.Type?
    ) throws -> [T] {
        return try context.bookkeeping.withRegistry { registry in
            registry.reserveCapacity(registry.count + result.count)
            // Filled in place: `append` on an array of the unspecialized `T` is a call
            // into the runtime's generic code per object.
            return try result.withFieldReader { reader in
                // Unsafe: `count` is raised right after each element is initialized, so
                // exactly the first `count` are initialized, also when a row throws.
                try [T](unsafeUninitializedCapacity: result.count) { buffer, count in
                    // (A local of the closure: one captured from outside is read from its box.)
                    var filler = ValueBlockFiller(runLength: entity.attributeDecodings.count, expectedRuns: result.count)
                    // (By index: a `Row` holds a reference to the result, one retain per row.)
                    for index in 0..<min(result.count, buffer.count) {
                        reader.load(row: index)
                        let object = try register(
                            result, reader, entity: entity, making: making, in: &registry, filling: &filler)
                        // Unsafe: an object registered under `entity.name` is an
                        // `entity.objectClass` (fetched, or inserted with the model's entity
                        // for its class); `T` is that class or a superclass.
                        buffer.initializeElement(at: count, to: unsafeDowncast(object, to: T.self))
                        count += 1
                    }
                }
            }
        }
    }

    /// The rows a query of an entity with sub-entities describes, each with its own
    /// entity's columns: the rows' keys and concrete entities first, in the query's order
    /// (one statement), then each concrete entity's rows by key (one statement each), on
    /// one connection.
    ///
    /// - Throws: `ManagedObjectError.invalidStoredValue` when a row's discriminator names
    ///   no entity of the hierarchy, or `PostgresError`.
    func hierarchyRows(of entity: EntityDescription, _ query: StoreQuery, on connection: Connection) throws -> HierarchyRows {
        let model = context.coordinator.model
        let kinds = try context.coordinator.selectKinds(of: entity, query, on: connection)
        var keysByEntity: [String: [Int64]] = [:]
        for (key, name) in kinds { keysByEntity[name, default: []].append(key) }
        var results: [(entity: EntityDescription, rows: QueryResult)] = []
        for (name, keys) in keysByEntity.sorted(by: { $0.key < $1.key }) {
            guard let concrete = model.entity(named: name), model.isEntity(concrete, kindOf: entity.name), !concrete.isAbstract
            else {
                throw ManagedObjectError.invalidStoredValue(
                    entity: entity.name, key: entity.discriminatorColumn ?? "", primaryKey: keys[0],
                    reason: "the discriminator names \(name), not a concrete entity of this hierarchy")
            }
            results.append((concrete, try context.coordinator.selectObjects(of: concrete, .keys(keys, of: concrete), on: connection)))
        }
        return HierarchyRows(order: kinds.map(\.key), results: results)
    }

    /// Registers the rows `hierarchyRows` read; returns their objects in the query's
    /// order (a row gone between the two steps is left out).
    func register(_ rows: HierarchyRows) throws -> [ManagedObject] {
        var byKey: [Int64: ManagedObject] = [:]
        try context.bookkeeping.withRegistry { registry in
            for (entity, result) in rows.results {
                try result.withFieldReader { reader in
                    var filler = ValueBlockFiller(runLength: entity.attributeDecodings.count, expectedRuns: result.count)
                    for index in 0..<result.count {
                        reader.load(row: index)
                        let object = try register(result, reader, entity: entity, in: &registry, filling: &filler)
                        if let key = object.objectID.primaryKey { byKey[key] = object }
                    }
                }
            }
        }
        return rows.order.compactMap { byKey[$0] }
    }

    /// Fetches the rows of an entity whose unique `attribute` is one of `values` (one
    /// query, read from the attribute's unique index) and registers them; a value given
    /// twice is one row and one object. A child context asks its parent, which
    /// answers with its unsaved objects of those values first, then the stored rows.
    ///
    /// - Throws: `ChildContextError.objectGoneFromParent` in a child context when the
    ///   parent deleted an object of one of the values (as an import in the parent would
    ///   refuse it), or `PostgresError`.
    func fetchObjects(
        entity: EntityDescription, whereUnique attribute: AttributeDescription, isIn values: [StoredValue]
    ) throws -> [ManagedObject] {
        if let parent = context.parent {
            let (answer, deleted) = try parent.performAndWait { () throws -> (ParentObjects, ObjectID?) in
                let objects = try parent.uniqueObjectsForChild(of: entity, whereUnique: attribute, isIn: values)
                return (parent.statesForChild(objects.filter { !$0.deletedFlag }), objects.first(where: \.deletedFlag)?.objectID)
            }
            if let deleted { throw ChildContextError.objectGoneFromParent(deleted, call: "insertOrUpdate / importRecords") }
            return context.register(answer)
        }
        // In a transaction that reads at one snapshot (it has a location serial, once
        // begun), the rows' locations come along: the save that follows in the same
        // transaction finds them by location.
        var locating = false
        let result = try context.withDatabase { connection in
            locating = context.transaction.locationSerial != 0
            return try context.coordinator.selectObjects(of: entity, whereUnique: attribute, isIn: values, locating: locating, on: connection)
        }
        var objects: [ManagedObject] = []
        objects.reserveCapacity(result.count)
        let serial = context.transaction.locationSerial
        let locationColumn = entity.selectColumns.count
        try context.bookkeeping.withRegistry { registry in
            registry.reserveCapacity(registry.count + result.count)
            try result.withFieldReader { reader in
                // (A local of the closure: one captured from outside is read from its box.)
                var filler = ValueBlockFiller(runLength: entity.attributeDecodings.count, expectedRuns: result.count)
                for index in 0..<result.count {
                    reader.load(row: index)
                    let object = try register(result, reader, entity: entity, in: &registry, filling: &filler)
                    if locating {
                        let bytes = reader.bytes(locationColumn)
                        object.storage.setRowLocation(bytes.flatMap { RowLocation(tid: $0, serial: serial)?.packed } ?? 0)
                    }
                    objects.append(object)
                }
            }
        }
        return objects
    }

    /// Decodes a row selected by `StoreCoordinator.selectObjects` into the registered object for
    /// its key, creating it if needed. Objects with unsaved changes are left as they are.
    ///
    /// - Parameters:
    ///   - mayBeRegistered: `false` when the context is known to hold no object of the
    ///     row (a fresh context), which skips the lookup.
    ///   - objectClass: the entity's class, when the caller knows it as a
    ///     `ManagedObject` subclass (a typed fetch): a new object is made without the
    ///     cast `EntityDescription.makeObject()` checks.
    func register(
        row: Row, entity: EntityDescription, mayBeRegistered: Bool = true, making objectClass: ManagedObject.Type? = nil
    ) throws -> ManagedObject {
        try context.bookkeeping.withRegistry { registry in
            var filler = ValueBlockFiller(runLength: entity.attributeDecodings.count, expectedRuns: 1)
            return try row.result.withFieldReader { reader in
                reader.load(row: row.index)
                return try register(
                    row.result, reader, entity: entity, mayBeRegistered: mayBeRegistered, making: objectClass,
                    in: &registry, filling: &filler)
            }
        }
    }

    /// `register(row:entity:mayBeRegistered:making:)` for the row of `result` that `fields`
    /// has loaded, in the registry `withRegistry(_:)` hands out, the values decoded into
    /// `filler`'s blocks.
    private func register(
        _ result: QueryResult, _ fields: FieldReader, entity: EntityDescription, mayBeRegistered: Bool = true,
        making objectClass: ManagedObject.Type? = nil, in registry: inout [ObjectID: ManagedObject],
        filling filler: inout ValueBlockFiller
    ) throws -> ManagedObject {
        let key = try ManagedObjectContext.decodeInteger(result, fields, column: 0)
        let objectID = ObjectID(entityName: entity.rootEntityName, primaryKey: key)
        if mayBeRegistered, let existing = registry[objectID] {
            if existing.entity !== entity, entity.discriminatorColumn != nil {
                // (A row whose kind changed under a registered object: its values do not fit it.)
                throw ManagedObjectError.invalidStoredValue(
                    entity: existing.entity.name, key: entity.discriminatorColumn ?? "", primaryKey: key,
                    reason: "the row is now a \(entity.name), the registered object a \(existing.entity.name)")
            }
            if !context.changedSet.contains(existing) && !existing.deletedFlag {
                try apply(result, fields, to: existing, entity: entity, key: key, filling: &filler)
            }
            return existing
        }
        let object = try makeObject(
            result, fields, entity: entity, objectID: objectID, key: key, making: objectClass, filling: &filler)
        registry[objectID] = object
        return object
    }

    /// A new object of this context for a row, not registered yet (see
    /// `register(row:entity:mayBeRegistered:making:)`).
    private func makeObject(
        _ result: QueryResult, _ fields: FieldReader, entity: EntityDescription, objectID: consuming ObjectID, key: Int64,
        making objectClass: ManagedObject.Type?, filling filler: inout ValueBlockFiller
    ) throws -> ManagedObject {
        let object = objectClass?.init() ?? entity.makeObject()
        object.entityStorage = entity
        object.objectIDStorage = consume objectID  // (moved in: no retain of the entity name)
        object.contextReference = context.reference  // (not via `managedObjectContext`: no retain of the context)
        try apply(result, fields, to: object, entity: entity, key: key, filling: &filler)
        return object
    }

    /// Copies a row's values into an object and makes them its committed values.
    func apply(row: Row, to object: ManagedObject, entity: EntityDescription, key: Int64) throws {
        var filler = ValueBlockFiller(runLength: entity.attributeDecodings.count, expectedRuns: 1)
        try row.result.withFieldReader { reader in
            reader.load(row: row.index)
            try apply(row.result, reader, to: object, entity: entity, key: key, filling: &filler)
        }
    }

    /// `apply(row:to:entity:key:)` for the row of `result` that `fields` has loaded (no
    /// `Row` to make and retain the result for), the values decoded into `filler`'s blocks.
    private func apply(
        _ result: QueryResult, _ fields: FieldReader, to object: ManagedObject, entity: EntityDescription, key: Int64,
        filling filler: inout ValueBlockFiller
    ) throws {
        let rowIndex = fields.row
        let version = try ManagedObjectContext.decodeInteger(result, fields, column: 1)
        let values = try filler.run { index in try decode(result, fields, attribute: index, entity: entity, key: key) }
        // Values the column holds but the property's type does not (an enum's unknown
        // raw value, JSON that does not decode) fail the row before any is applied.
        if !entity.checkedAttributeIndexes.isEmpty { try entity.checkStoredValues(values, primaryKey: key) }
        object.storage.applyFetched(version: version, values: consume values)
        guard !entity.relationships.isEmpty else { return }
        if object.storage.toOne.count != entity.relationships.count {
            object.replaceReferences(Array(repeating: .none, count: entity.relationships.count))
        }
        var keys: [Int64?] = Array(repeating: nil, count: entity.relationships.count)
        var column = 2 + entity.attributeDecodings.count
        for relationship in entity.toOneRelationships {
            let foreignKey: Int64? =
                if let bytes = fields.bytes(column) {
                    try Row.decimal(bytes) ?? result[rowIndex].decode(Int64.self, at: column)  // (the error names the column)
                } else {
                    nil
                }
            column += 1
            keys[relationship.index] = foreignKey
            if case .object(let current) = object.storage.toOne[relationship.index],
                current.objectID.primaryKey == foreignKey
            {
                continue
            }
            object.setReference(foreignKey.map { .key($0) } ?? .none, at: relationship.index)
        }
        object.storage.replaceCommittedKeys(keys)
    }

    /// The value of attribute `index` in the loaded row (its column is `index + 2`, after
    /// the key and the version).
    ///
    /// - Throws: `ManagedObjectError.invalidStoredValue` for `NULL` in a non-optional
    ///   attribute, or a value the attribute's type cannot hold.
    @inline(__always)
    private func decode(
        _ result: QueryResult, _ fields: FieldReader, attribute index: Int, entity: EntityDescription, key: Int64
    ) throws -> StoredValue {
        let column = index + 2
        guard let bytes = fields.bytes(column) else {
            guard entity.attributeOptionality[index] else {
                throw ManagedObjectError.invalidStoredValue(
                    entity: entity.name, key: entity.attributes[index].name, primaryKey: key,
                    reason: "NULL in a non-optional attribute")
            }
            return .null
        }
        // The common types are made as themselves (no optional of the boxed value to
        // unwrap and copy); the rest go through the fast path's value or the attribute's
        // closure.
        switch entity.attributeDecodings[index] {
        case .string:
            return .string(AttributeDecoding.text(bytes))
        case .int:
            if let value = AttributeDecoding.integer(bytes) { return .int(value) }
        case let decoding:
            if let value = decoding.decode(bytes) { return value }
        }
        return try decodeThroughClosure(row: result[fields.row], column: column, entity.attributes[index], entity: entity, key: key)
    }

    /// An attribute's value decoded through its closure; on failure decoded again with the
    /// column's name and type, so the error names them.
    ///
    /// - Throws: `ManagedObjectError.invalidStoredValue` naming the entity, the attribute
    ///   and the row's primary key when the stored value does not fit the attribute's
    ///   type (a `numeric` of 50 digits written by another program for a `Decimal`).
    private func decodeThroughClosure(
        row: Row, column: Int, _ attribute: AttributeDescription, entity: EntityDescription, key: Int64
    ) throws -> StoredValue {
        do {
            return try attribute.decode(row.result.bareCell(row: row.index, column: column))
        } catch {
            do {
                return try row.withCell(at: column) { try attribute.decode($0) }
            } catch let error as PostgresValueError {
                throw ManagedObjectError.invalidStoredValue(
                    entity: entity.name, key: attribute.name, primaryKey: key, reason: "\(error)")
            }
        }
    }

    // MARK: - Refreshing

    /// Re-reads the rows of registered objects of one entity (one query; in a child
    /// context, the parent's objects). Objects whose row is gone are marked deleted and
    /// leave the context.
    func refreshObjects(
        _ objects: [Int64: ManagedObject], entity: EntityDescription, localEdits: ManagedObjectContext.LocalEdits
    ) throws {
        guard !objects.isEmpty else { return }
        if context.parent != nil {
            try context.refreshFromParent(Array(objects.values), localEdits: localEdits)
            return
        }
        if entity.hasSubentities {
            // Each object's row is read with its own entity's columns.
            for group in Dictionary(grouping: objects, by: { ObjectIdentifier($0.value.entity) }).values {
                guard let concrete = group.first?.value.entity else { continue }
                try refreshRows(Dictionary(uniqueKeysWithValues: group.map { ($0.key, $0.value) }), entity: concrete, localEdits: localEdits)
            }
        } else {
            try refreshRows(objects, entity: entity, localEdits: localEdits)
        }
    }

    /// `refreshObjects` of objects all of `entity` itself (one query).
    private func refreshRows(
        _ objects: [Int64: ManagedObject], entity: EntityDescription, localEdits: ManagedObjectContext.LocalEdits
    ) throws {
        let result = try context.withDatabase {
            try context.coordinator.selectObjects(of: entity, .keys(Array(objects.keys), of: entity), on: $0)
        }
        var seen: Set<Int64> = []
        for row in result {
            let key = try row.decode(Int64.self, at: 0)
            guard let object = objects[key] else { continue }
            seen.insert(key)
            try refresh(object, localEdits: localEdits) { try apply(row: row, to: object, entity: entity, key: key) }
        }
        for (key, object) in objects where !seen.contains(key) {
            context.forgetDeletedObject(object)
        }
    }

    /// Puts fresh committed values under an object (`fresh` applies them), keeping its
    /// unsaved changes as `localEdits` says.
    func refresh(_ object: ManagedObject, localEdits: ManagedObjectContext.LocalEdits, applying fresh: () throws -> Void) rethrows {
        let entity = object.entity
        let localValues = object.storage.sharedValues()
        let localToOne = object.storage.toOne
        var changedAttributes: [Int] = []
        var changedToOne: [Int] = []
        switch localEdits {
        case .discard: break
        case .keep:
            changedAttributes = object.changedAttributeIndexes
            changedToOne = object.changedToOneIndexes
        case .keepUnlessChanged(let remoteKeys):
            let changedElsewhere = remoteKeys[object.objectID] ?? []
            changedAttributes = object.changedAttributeIndexes.filter {
                !changedElsewhere.contains(entity.attributes[$0].name)
            }
            changedToOne = object.changedToOneIndexes.filter {
                !changedElsewhere.contains(entity.relationships[$0].name)
            }
        }
        try fresh()
        for index in changedAttributes { object.storage.initialize(localValues[index], at: index) }
        for index in changedToOne { object.setReference(localToOne[index], at: index) }
        if case .discard = localEdits { object.discardJoinChanges() }
        if changedAttributes.isEmpty && changedToOne.isEmpty && !object.hasJoinChanges { context.bookkeeping.pending.remove(object, from: .changed) }
        object.storage.forgetLoaded()
    }
}

/// The rows of a fetch of an entity with sub-entities (`ObjectLoader.hierarchyRows`):
/// the keys in the query's order, and each concrete entity's rows.
struct HierarchyRows {
    /// The rows' primary keys, in the query's order.
    let order: [Int64]
    /// Each concrete entity with its rows (its `selectColumns`).
    let results: [(entity: EntityDescription, rows: QueryResult)]
}
