import Foundation

extension ManagedObjectContext {
    /// Fetches the objects a request describes.
    ///
    /// Objects already registered keep their identity and unsaved changes. With
    /// `includesPendingChanges` (the default) unsaved inserts, changes and deletes of the
    /// entity count: the predicate and the order are then applied in memory to those
    /// objects, with the same answers as in SQL.
    ///
    /// A child context fetches from its parent instead of the store: the parent runs the
    /// request with its own unsaved changes included (its predicate and order applied to
    /// the parent's current values), and the child builds its instances from the objects'
    /// values; the child's unsaved changes then apply on top. The parent's unsaved
    /// changes count whatever `includesPendingChanges` says: they are the child's store.
    ///
    /// - Throws: `FetchPredicateError` (unknown key, wrong value type),
    ///   `FetchRequestError` (negative limit or offset), or `PostgresError`.
    public func fetch<T: ManagedObject>(_ request: FetchRequest<T>) throws -> [T] {
        assertOnQueue()
        let entity = try entityDescription(for: T.self)
        let pending = request.includesPendingChanges ? pendingObjects(of: entity) : []
        var results: [ManagedObject]
        if pending.isEmpty, parent == nil {
            // The common case: the store's rows, straight into an array of `T`.
            var query = try storeQuery(request, entity: entity)
            query.limit = request.fetchLimit
            query.offset = request.fetchOffset
            // Rows of one result have distinct keys: in an empty context none can be registered.
            let objects = try fetchObjects(entity: entity, query, as: T.self, mayBeRegistered: hasRegisteredObjects)
            if !request.relationshipKeyPathsForPrefetching.isEmpty {
                try prefetch(request.relationshipKeyPathsForPrefetching, for: objects.map { $0 }, entity: entity)
            }
            return objects
        } else if pending.isEmpty {
            results = try fetchFromStore(request, entity: entity, limit: request.fetchLimit, offset: request.fetchOffset)
        } else {
            let limit = request.storeLimit(pendingCount: pending.count)
            let stored = try fetchFromStore(request, entity: entity, limit: limit, offset: 0)
            var seen = Set(stored.map(ObjectIdentifier.init))
            var candidates = stored
            for object in pending where !seen.contains(ObjectIdentifier(object)) {
                candidates.append(object)
                seen.insert(ObjectIdentifier(object))
            }
            let evaluator = PredicateEvaluator(model: coordinator.model)
            results = try candidates.filter { object in
                if object.deletedFlag { return false }
                guard let predicate = request.predicate, changedSet.contains(object) || insertedSet.contains(object) else {
                    return true
                }
                return try evaluator.evaluate(predicate, on: object)
            }
            results = try sortInMemory(results, by: request.sortDescriptors, entity: entity)
            results = Array(results.dropFirst(request.fetchOffset))
            if let limit = request.fetchLimit { results = Array(results.prefix(limit)) }
        }
        try prefetch(request.relationshipKeyPathsForPrefetching, for: results, entity: entity)
        // (Checked: an object of a class outside the model that names itself after the
        // entity can be inserted and is pending under its name, yet is no `T`; it is left
        // out. `cast` skips the runtime's cast for the entity's own class.)
        return results.compactMap { ManagedObject.cast($0, to: T.self) }
    }

    /// Counts the objects a request describes (`SELECT count(*)` unless pending changes
    /// of the entity must be counted). A child context without pending changes of the
    /// entity asks its parent for the count (the parent's unsaved changes counted).
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public func count<T: ManagedObject>(for request: FetchRequest<T>) throws -> Int {
        assertOnQueue()
        let entity = try entityDescription(for: T.self)
        if request.includesPendingChanges && !pendingObjects(of: entity).isEmpty {
            return try fetch(request).count
        }
        if let parent { return try parent.performAndWait { try parent.count(for: request.fromChild) } }
        let query = try storeQuery(request, entity: entity, ordered: false)
        return try withDatabase { try coordinator.count(of: entity, query, on: $0) }
    }

    /// The IDs of the objects a request describes (only the keys are read unless pending
    /// changes must be counted). A child context without pending changes of the entity
    /// asks its parent (the parent's unsaved changes counted, its inserts' temporary IDs
    /// included).
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public func fetchObjectIDs<T: ManagedObject>(_ request: FetchRequest<T>) throws -> [ObjectID] {
        assertOnQueue()
        let entity = try entityDescription(for: T.self)
        if request.includesPendingChanges && !pendingObjects(of: entity).isEmpty {
            return try fetch(request).map(\.objectID)
        }
        if let parent { return try parent.performAndWait { try parent.fetchObjectIDs(request.fromChild) } }
        let query = try storeQuery(request, entity: entity)
        return try withDatabase { try coordinator.selectKeys(of: entity, query, on: $0) }.map {
            ObjectID(entityName: entity.name, primaryKey: $0)
        }
    }

    /// The rows a request describes as dictionaries of `propertiesToFetch` (all
    /// attributes by default), straight from the store; `returnsDistinctResults` drops
    /// duplicates. A child context reads them through its root context's connection (a
    /// private root's transaction): unsaved changes are not included there either. Values are the attributes' Swift values, `nil` for `NULL`; a to-one
    /// relationship's value is the related row's primary key.
    ///
    /// For example:
    ///
    /// ```swift
    /// var request = FetchRequest<Post>()
    /// request.propertiesToFetch = ["user.name"]
    /// request.returnsDistinctResults = true
    /// let authors = try context.fetchDictionaries(request).compactMap { $0["user.name"] as? String }
    /// ```
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public func fetchDictionaries<T: ManagedObject>(_ request: FetchRequest<T>) throws -> [[String: (any Sendable)?]] {
        assertOnQueue()
        let entity = try entityDescription(for: T.self)
        try request.validatePaging()
        let keys = request.propertiesToFetch ?? entity.attributes.map(\.name)
        var compiler = PredicateSQLCompiler(model: coordinator.model)
        var columns: [String] = []
        var decoders: [(PostgresCell) throws -> StoredValue] = []
        for key in keys {
            let resolved = try coordinator.model.resolve(FetchPredicate.KeyPath.dotted(key), from: entity)
            guard resolved.toManyIndex == nil else {
                throw FetchPredicateError(message: "\(key) crosses a to-many relationship; fetch it from the other entity")
            }
            let (sql, attribute) = try compiler.valueSQL(resolved, alias: "t")
            columns.append(sql)
            if let attribute {
                decoders.append(attribute.decode)
            } else {
                decoders.append { cell in StoredValue(try Int64?.decode(from: cell)) }
            }
        }
        var query = StoreQuery(limit: request.fetchLimit, offset: request.fetchOffset)
        if let predicate = request.predicate { query.condition = try compiler.compile(predicate, entity: entity, alias: "t") }
        if request.returnsDistinctResults {
            // DISTINCT needs the ORDER BY terms in the select list: sort by the columns.
            query.orderBy = columns.map { $0 + " ASC NULLS FIRST" }.joined(separator: ", ")
        } else {
            query.orderBy = try compiler.orderBy(request.sortDescriptors, entity: entity, alias: "t")
        }
        query.parameters = compiler.parameters
        let result = try withDatabase {
            try coordinator.selectValues(columns, distinct: request.returnsDistinctResults, of: entity, query, on: $0)
        }
        return try result.map { row in
            var dictionary: [String: (any Sendable)?] = [:]
            for (index, key) in keys.enumerated() {
                dictionary[key] = .some(try row.withCell(at: index) { try decoders[index]($0) }.anyValue)
            }
            return dictionary
        }
    }

    /// Streams the objects a request describes in pages of `fetchBatchSize` through a
    /// server-side cursor, so a fetch of millions of rows keeps memory flat: after each
    /// page is handed to `body`, its unchanged objects leave the context. Pending changes
    /// are not included; `fetchLimit` and `fetchOffset` apply.
    ///
    /// For example:
    ///
    /// ```swift
    /// var request = FetchRequest<User>()
    /// request.fetchBatchSize = 5_000
    /// try context.fetch(request) { batch in
    ///     for user in batch { total += user.age ?? 0 }
    /// }
    /// ```
    ///
    /// Not in a child context: a cursor reads stored rows, which would bypass the parent's
    /// unsaved changes; fetch with `fetchLimit` and `fetchOffset` there instead.
    ///
    /// - Throws: `ChildContextError.unsupported` in a child context, `FetchPredicateError`,
    ///   `PostgresError`, or what `body` throws.
    public func fetch<T: ManagedObject>(_ request: FetchRequest<T>, inBatches body: ([T]) throws -> Void) throws {
        assertOnQueue()
        try refuseInChild(
            "fetch(_:inBatches:)",
            advice: "its cursor reads stored rows and would miss the parent's unsaved changes; "
                + "page with fetchLimit and fetchOffset instead")
        let entity = try entityDescription(for: T.self)
        let batchSize = request.fetchBatchSize > 0 ? request.fetchBatchSize : 1000
        let query = try storeQuery(request, entity: entity)
        func run(_ connection: Connection) throws {
            try coordinator.forEachPage(of: entity, query, pageSize: batchSize, on: connection) { page in
                var batch: [ManagedObject] = []
                batch.reserveCapacity(page.count)
                for row in page { batch.append(try register(row: row, entity: entity)) }
                try prefetch(request.relationshipKeyPathsForPrefetching, for: batch, entity: entity)
                try body(batch.compactMap { ManagedObject.cast($0, to: T.self) })
                for object in batch where !changedSet.contains(object) && !deletedSet.contains(object) {
                    unregister(object)
                }
            }
        }
        switch concurrencyType {
        case .private: try withDatabase(run)
        case .main: try coordinator.withReadOnlyTransaction(run)
        }
    }

    // MARK: - Helpers

    /// Inserted, changed and deleted objects of an entity.
    func pendingObjects(of entity: EntityDescription) -> [ManagedObject] {
        // (By identity: an object of a class outside the model that names itself after the
        // entity is pending under that name, yet is none of the entity's.)
        (Array(insertedSet) + Array(changedSet) + Array(deletedSet)).filter { $0.entity === entity }
    }

    /// A request's predicate, order and window compiled for the Store.
    func storeQuery<T: ManagedObject>(
        _ request: FetchRequest<T>, entity: EntityDescription, ordered: Bool = true
    ) throws -> StoreQuery {
        try request.validatePaging()
        var compiler = PredicateSQLCompiler(model: coordinator.model)
        var query = StoreQuery(limit: request.fetchLimit, offset: request.fetchOffset)
        if let predicate = request.predicate { query.condition = try compiler.compile(predicate, entity: entity, alias: "t") }
        if ordered { query.orderBy = try compiler.orderBy(request.sortDescriptors, entity: entity, alias: "t") }
        query.parameters = compiler.parameters
        return query
    }

    private func fetchFromStore<T: ManagedObject>(
        _ request: FetchRequest<T>, entity: EntityDescription, limit: Int?, offset: Int
    ) throws -> [ManagedObject] {
        if let parent {
            // The parent's objects as it sees them, unsaved changes included.
            var forwarded = request.fromChild
            forwarded.fetchLimit = limit
            forwarded.fetchOffset = offset
            return register(try parent.performAndWait { parent.statesForChild(try parent.fetch(forwarded)) })
        }
        var query = try storeQuery(request, entity: entity)
        query.limit = limit
        query.offset = offset
        // Rows of one result have distinct keys: in an empty context none can be registered.
        return try fetchObjects(entity: entity, query, mayBeRegistered: hasRegisteredObjects)
    }

    /// Orders objects as `orderBy` does in SQL: `nil` first ascending, strings by
    /// scalar, ties by primary key (unsaved objects last, in insertion order).
    func sortInMemory(_ objects: [ManagedObject], by descriptors: [FetchSortDescriptor], entity: EntityDescription) throws -> [ManagedObject] {
        let keys = try descriptors.map { descriptor in
            (descriptor, try coordinator.model.resolve(FetchPredicate.KeyPath.dotted(descriptor.key), from: entity))
        }
        func order(_ a: ManagedObject, _ b: ManagedObject) -> Bool {
            for (descriptor, resolved) in keys {
                let left = PredicateEvaluator.reach(resolved, from: a).scalar
                let right = PredicateEvaluator.reach(resolved, from: b).scalar
                var result: Int
                switch (left, right) {
                case (nil, nil): result = 0
                case (nil, _): result = -1
                case (_, nil): result = 1
                case (let l?, let r?):
                    result = ValueComparison.compare(l, r, options: descriptor.caseInsensitive ? .caseInsensitive : []) ?? 0
                }
                if !descriptor.ascending { result = -result }
                if result != 0 { return result < 0 }
            }
            switch (a.objectID.primaryKey, b.objectID.primaryKey) {
            case (let l?, let r?): return l < r
            case (.some, nil): return true
            case (nil, .some): return false
            default: return a.objectID.description < b.objectID.description
            }
        }
        return objects.sorted(by: order)
    }

    /// Loads relationships of many objects with one query per relationship and level.
    func prefetch(_ keyPaths: [String], for objects: [ManagedObject], entity: EntityDescription) throws {
        for keyPath in keyPaths {
            var level = objects
            var current = entity
            for name in try FetchPredicate.KeyPath.dotted(keyPath).components {
                guard let relationship = current.relationship(named: name),
                    let destination = coordinator.model.entity(named: relationship.destinationEntityName)
                else {
                    throw FetchPredicateError(message: "\(current.name) has no relationship \"\(name)\" to prefetch")
                }
                if relationship.joinTable != nil {
                    try loadRelationship(relationship, of: level)
                    var seen: Set<ObjectIdentifier> = []
                    level = level.flatMap { $0.relatedObjects(at: relationship.index) }
                        .filter { seen.insert(ObjectIdentifier($0)).inserted }
                } else if relationship.isToMany || relationship.columnName == nil {
                    guard let inverseName = relationship.inverseName,
                        destination.relationship(named: inverseName)?.columnName != nil
                    else { break }
                    try loadRelationship(relationship, of: level)
                    level = level.flatMap { $0.relatedObjects(at: relationship.index) }
                } else {
                    var missing: Set<ObjectID> = []
                    for object in level {
                        object.prepareStorage()
                        if case .key(let key) = object.storage.toOne[relationship.index] {
                            let id = ObjectID(entityName: destination.name, primaryKey: key)
                            if registeredObject(for: id) == nil { missing.insert(id) }
                        }
                    }
                    if !missing.isEmpty { _ = try fetchObjects(withIDs: Array(missing)) }
                    level = level.flatMap { $0.relatedObjects(at: relationship.index) }
                }
                current = destination
            }
        }
    }
}

extension FetchRequest {
    /// The request as a child context hands it to its parent: the parent's unsaved
    /// changes count, and relationships are prefetched by the child.
    var fromChild: FetchRequest {
        var request = self
        request.includesPendingChanges = true
        request.relationshipKeyPathsForPrefetching = []
        return request
    }
}
