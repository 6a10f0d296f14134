import Foundation

/// The context's side of loading: the fetches by entity and by ID, and forwards to
/// `ObjectLoader` (which turns rows into objects) for the callers outside `Loading/`.
extension ManagedObjectContext {
    /// Every object of an entity: the stored rows plus unsaved inserted objects, minus
    /// unsaved deletions. Objects already registered keep their identity and their
    /// unsaved changes. A child context starts from its parent's objects (the parent's
    /// unsaved changes included) instead of the stored rows.
    ///
    /// For example:
    ///
    /// ```swift
    /// let users = try context.fetchAll(User.self)
    /// ```
    ///
    /// - Throws: `ManagedObjectError.unknownEntity`, or `PostgresError`.
    public func fetchAll<T: ManagedObject>(_ type: T.Type) throws -> [T] {
        assertOnQueue()
        let entity = try entityDescription(for: type)
        let stored: [ManagedObject]
        if let parent {
            stored = register(try parent.performAndWait { parent.statesForChild(try parent.fetchAll(type)) })
        } else {
            // (Rows of one result have distinct keys: in an empty context none can be registered.)
            stored = try fetchObjects(
                entity: entity, StoreQuery(orderBy: entity.qualifiedPrimaryKey), mayBeRegistered: hasRegisteredObjects)
        }
        let pending = insertedSet.filter { coordinator.model.isEntity($0.entity, kindOf: entity.name) }
        return (stored.filter { !$0.deletedFlag } + pending.sorted { $0.objectID.description < $1.objectID.description })
            .compactMap { ManagedObject.cast($0, to: T.self) }
    }

    /// The object with an ID: the registered instance, or the row fetched now. A child
    /// context asks its parent instead, which also knows the temporary IDs of its unsaved
    /// inserts.
    ///
    /// - Throws: `ManagedObjectError.objectNotFound` when no row exists (deleted, or a
    ///   temporary ID of another context), `.objectDeleted` when it was deleted here (or
    ///   in a child's parent) and not saved yet, or `PostgresError`.
    public func object(with objectID: ObjectID) throws -> ManagedObject {
        assertOnQueue()
        if let object = bookkeeping.object(for: objectID) {
            if object.deletedFlag { throw ManagedObjectError.objectDeleted(objectID) }
            return object
        }
        if let parent { return try objectFromParent(objectID, parent: parent) }
        guard let key = objectID.primaryKey else { throw ManagedObjectError.objectNotFound(objectID) }
        guard let entity = coordinator.model.entity(named: objectID.entityName) else {
            throw ManagedObjectError.unknownEntity(objectID.entityName)
        }
        let found = try fetchObjects(entity: entity, .keys([key], of: entity))
        guard let object = found.first else { throw ManagedObjectError.objectNotFound(objectID) }
        return object
    }

    /// The object with an ID, checking that its row still exists (Core Data's
    /// `existingObject(with:)`; RHManagedObject's `objectInCurrentThreadContext`).
    ///
    /// - Throws: `ManagedObjectError.objectNotFound` or `.objectDeleted`.
    public func existingObject(with objectID: ObjectID) throws -> ManagedObject {
        try object(with: objectID)
    }

    /// The model's entity for a class.
    ///
    /// - Throws: `ManagedObjectError.unknownEntity` when the model has none for it.
    func entityDescription(for type: ManagedObject.Type) throws -> EntityDescription {
        guard let entity = coordinator.model.entity(for: type) else {
            throw ManagedObjectError.unknownEntity(type.entityName)
        }
        return entity
    }

    /// Fetches rows of an entity and registers them (one query;
    /// `ObjectLoader.fetchObjects(entity:_:mayBeRegistered:)`).
    func fetchObjects(
        entity: EntityDescription, _ query: StoreQuery = .all, mayBeRegistered: Bool = true
    ) throws -> [ManagedObject] {
        try ObjectLoader(context: self).fetchObjects(entity: entity, query, mayBeRegistered: mayBeRegistered)
    }

    /// A fetch's objects in an array of the entity's class
    /// (`ObjectLoader.fetchObjects(entity:_:as:mayBeRegistered:)`).
    func fetchObjects<T: ManagedObject>(
        entity: EntityDescription, _ query: StoreQuery, as type: T.Type, mayBeRegistered: Bool
    ) throws -> [T] {
        try ObjectLoader(context: self).fetchObjects(entity: entity, query, as: type, mayBeRegistered: mayBeRegistered)
    }

    /// Fetches the rows of an entity with sub-entities on `connection` and registers them,
    /// each object of its own entity (`ObjectLoader.hierarchyRows(of:_:on:)`), in the
    /// query's order.
    func fetchHierarchy(of entity: EntityDescription, _ query: StoreQuery, on connection: Connection) throws -> [ManagedObject] {
        let loader = ObjectLoader(context: self)
        return try loader.register(try loader.hierarchyRows(of: entity, query, on: connection))
    }

    /// Fetches the rows of an entity whose unique `attribute` is one of `values` and
    /// registers them (`ObjectLoader.fetchObjects(entity:whereUnique:isIn:)`).
    ///
    /// - Throws: `ChildContextError.objectGoneFromParent` in a child context, or
    ///   `PostgresError`.
    func fetchObjects(
        entity: EntityDescription, whereUnique attribute: AttributeDescription, isIn values: [StoredValue]
    ) throws -> [ManagedObject] {
        try ObjectLoader(context: self).fetchObjects(entity: entity, whereUnique: attribute, isIn: values)
    }

    /// Decodes a row into the registered object for its key, creating it if needed
    /// (`ObjectLoader.register(row:entity:mayBeRegistered:making:)`; inlined, as callers
    /// call it per row).
    @inline(__always)
    func register(
        row: Row, entity: EntityDescription, mayBeRegistered: Bool = true, making objectClass: ManagedObject.Type? = nil
    ) throws -> ManagedObject {
        try ObjectLoader(context: self).register(row: row, entity: entity, mayBeRegistered: mayBeRegistered, making: objectClass)
    }

    /// Copies a row's values into an object and makes them its committed values
    /// (`ObjectLoader.apply(row:to:entity:key:)`; inlined, as callers call it per row).
    @inline(__always)
    func apply(row: Row, to object: ManagedObject, entity: EntityDescription, key: Int64) throws {
        try ObjectLoader(context: self).apply(row: row, to: object, entity: entity, key: key)
    }

    /// A `bigint` key or version column, read straight from the result text.
    @inline(__always)
    static func decodeInteger(_ row: Row, column: Int) throws -> Int64 {
        try decodeInteger(row.result, row: row.index, column: column)
    }

    /// `decodeInteger(_:column:)` for the row of `result` that `fields` has loaded.
    @inline(__always)
    static func decodeInteger(_ result: QueryResult, _ fields: FieldReader, column: Int) throws -> Int64 {
        if let bytes = fields.bytes(column), let value = AttributeDecoding.integer(bytes) {
            return Int64(value)
        }
        return try result[fields.row].decode(Int64.self, at: column)  // the error names the column
    }

    /// `decodeInteger(_:column:)` for row `index` of `result`.
    @inline(__always)
    static func decodeInteger(_ result: QueryResult, row index: Int, column: Int) throws -> Int64 {
        if let bytes = result.fieldBytes(row: index, column: column), let value = AttributeDecoding.integer(bytes) {
            return Int64(value)
        }
        return try result[index].decode(Int64.self, at: column)  // the error names the column
    }

    /// The object for a primary key: registered, or fetched now (one query); `nil`
    /// when the row is gone.
    func resolve(key: Int64, entityName: String) -> ManagedObject? {
        let objectID = ObjectID(entityName: entityName, primaryKey: key)
        if let object = bookkeeping.object(for: objectID) { return object }
        do {
            return try object(with: objectID)
        } catch {
            logger.debug("could not load \(objectID): \(error)")
            return nil
        }
    }

    /// The members of a to-many relationship
    /// (`ObjectLoader.members(of:relationship:)`).
    func members(of object: ManagedObject, relationship: RelationshipDescription) -> [ManagedObject] {
        ObjectLoader(context: self).members(of: object, relationship: relationship)
    }

    /// What a refresh does with an object's unsaved changes.
    enum LocalEdits {
        /// Keep them on top of the stored values.
        case keep
        /// Drop them.
        case discard
        /// Keep them, except for the keys another save changed (store trumps).
        case keepUnlessChanged([ObjectID: Set<String>])
    }

    /// Re-reads the rows of registered objects of one entity
    /// (`ObjectLoader.refreshObjects(_:entity:localEdits:)`).
    func refreshObjects(
        _ objects: [Int64: ManagedObject], entity: EntityDescription, localEdits: LocalEdits
    ) throws {
        try ObjectLoader(context: self).refreshObjects(objects, entity: entity, localEdits: localEdits)
    }

    /// Puts fresh committed values under an object, keeping its unsaved changes as
    /// `localEdits` says (`ObjectLoader.refresh(_:localEdits:applying:)`).
    func refresh(_ object: ManagedObject, localEdits: LocalEdits, applying fresh: () throws -> Void) rethrows {
        try ObjectLoader(context: self).refresh(object, localEdits: localEdits, applying: fresh)
    }
}
