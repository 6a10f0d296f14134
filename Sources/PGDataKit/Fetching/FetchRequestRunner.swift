import Foundation

/// One run of a fetch request in a context: the request's objects, the context's unsaved
/// changes applied on top in memory (`fetch(_:)`), their count (`count(for:)`), their IDs
/// (`fetchObjectIDs(_:)`), their rows as dictionaries (`fetchDictionaries(_:)`) or their
/// pages through a cursor (`fetch(_:inBatches:)`), and what those share: the request
/// compiled for the Store (`storeQuery`), the in-memory order (`sortInMemory`) and the
/// prefetch of relationships (`prefetch`). The context makes one for each call, in its
/// methods and forwards of the same names (`ManagedObjectContext+FetchRequest.swift`); it
/// lives for that call.
///
/// It reads the context's model (`coordinator`), pending changes (`insertedSet`,
/// `changedSet`, `deletedSet`), `parent` and `concurrencyType`; it reads rows through the
/// context's connection (`withDatabase`, or a read-only transaction for a main-queue
/// context's cursor) and registers the objects through the context (`fetchObjects`,
/// `register`, `loadRelationship`), and a batched fetch takes each page's unchanged
/// objects out again (`unregister`). In a child context it asks the parent through the
/// context (`performAndWait`, `statesForChild`). It holds the one reference and nothing
/// else: a method call copies it.
struct FetchRequestRunner {
    /// The context the request runs in (held for the one call).
    let context: ManagedObjectContext

    /// `ManagedObjectContext.fetch(_:)`'s work: the stored (or the parent's) objects, with
    /// the context's unsaved changes of the entity applied in memory when the request
    /// includes them.
    ///
    /// - Throws: `FetchPredicateError`, `FetchRequestError`, or `PostgresError`.
    func fetch<T: ManagedObject>(_ request: FetchRequest<T>) throws -> [T] {
        let entity = try context.entityDescription(for: T.self)
        let pending = request.includesPendingChanges ? pendingObjects(of: entity) : []
        var results: [ManagedObject]
        if pending.isEmpty, context.parent == nil {
            // The common case: the store's rows, straight into an array of `T`.
            var query = try storeQuery(request, entity: entity)
            query.limit = request.fetchLimit
            query.offset = request.fetchOffset
            // Rows of one result have distinct keys: in an empty context none can be registered.
            let objects = try context.fetchObjects(
                entity: entity, query, as: T.self, mayBeRegistered: context.hasRegisteredObjects)
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
            let evaluator = PredicateEvaluator(model: context.coordinator.model)
            results = try candidates.filter { object in
                if object.deletedFlag { return false }
                guard let predicate = request.predicate,
                    context.changedSet.contains(object) || context.insertedSet.contains(object)
                else {
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

    /// `ManagedObjectContext.count(for:)`'s work: `SELECT count(*)`, the parent's count in
    /// a child context, or the fetch's count when pending changes of the entity count.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    func count<T: ManagedObject>(for request: FetchRequest<T>) throws -> Int {
        let entity = try context.entityDescription(for: T.self)
        if request.includesPendingChanges && !pendingObjects(of: entity).isEmpty {
            return try fetch(request).count
        }
        if let parent = context.parent {
            return try parent.performAndWait { try parent.count(for: request.fromChild) }
        }
        let query = try storeQuery(request, entity: entity, ordered: false)
        return try context.withDatabase { try context.coordinator.count(of: entity, query, on: $0) }
    }

    /// `ManagedObjectContext.fetchObjectIDs(_:)`'s work: the stored keys, the parent's IDs
    /// in a child context, or the fetch's IDs when pending changes of the entity count.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    func fetchObjectIDs<T: ManagedObject>(_ request: FetchRequest<T>) throws -> [ObjectID] {
        let entity = try context.entityDescription(for: T.self)
        if request.includesPendingChanges && !pendingObjects(of: entity).isEmpty {
            return try fetch(request).map(\.objectID)
        }
        if let parent = context.parent {
            return try parent.performAndWait { try parent.fetchObjectIDs(request.fromChild) }
        }
        let query = try storeQuery(request, entity: entity)
        return try context.withDatabase { try context.coordinator.selectKeys(of: entity, query, on: $0) }.map {
            ObjectID(entityName: entity.rootEntityName, primaryKey: $0)
        }
    }

    /// `ManagedObjectContext.fetchDictionaries(_:)`'s work: the request's columns read
    /// straight from the store and decoded into dictionaries.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    func fetchDictionaries<T: ManagedObject>(_ request: FetchRequest<T>) throws -> [[String: (any Sendable)?]] {
        let entity = try context.entityDescription(for: T.self)
        try request.validatePaging()
        let keys = request.propertiesToFetch ?? entity.attributes.map(\.name)
        var compiler = PredicateSQLCompiler(model: context.coordinator.model)
        var columns: [String] = []
        var decoders: [(PostgresCell) throws -> StoredValue] = []
        for key in keys {
            let resolved = try context.coordinator.model.resolve(FetchPredicate.KeyPath.dotted(key), from: entity)
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
        let result = try context.withDatabase {
            try context.coordinator.selectValues(columns, distinct: request.returnsDistinctResults, of: entity, query, on: $0)
        }
        return try result.map { row in
            var dictionary: [String: (any Sendable)?] = [:]
            for (index, key) in keys.enumerated() {
                dictionary[key] = .some(try row.withCell(at: index) { try decoders[index]($0) }.anyValue)
            }
            return dictionary
        }
    }

    /// `ManagedObjectContext.fetch(_:inBatches:)`'s work: pages of `fetchBatchSize` through
    /// a server-side cursor, each page's unchanged objects out of the context after `body`.
    ///
    /// - Throws: `ChildContextError.unsupported` in a child context, `FetchPredicateError`,
    ///   `PostgresError`, or what `body` throws.
    func fetch<T: ManagedObject>(_ request: FetchRequest<T>, inBatches body: ([T]) throws -> Void) throws {
        try context.refuseInChild(
            "fetch(_:inBatches:)",
            advice: "its cursor reads stored rows and would miss the parent's unsaved changes; "
                + "page with fetchLimit and fetchOffset instead")
        let entity = try context.entityDescription(for: T.self)
        let batchSize = request.fetchBatchSize > 0 ? request.fetchBatchSize : 1000
        let query = try storeQuery(request, entity: entity)
        func run(_ connection: Connection) throws {
            try context.coordinator.forEachPage(of: entity, query, pageSize: batchSize, on: connection) { page in
                var batch: [ManagedObject] = []
                batch.reserveCapacity(page.count)
                if entity.hasSubentities {
                    // (Each row read again with its own entity's columns, on the cursor's connection.)
                    let keys = try page.map { try ManagedObjectContext.decodeInteger($0, column: 0) }
                    batch = try context.fetchHierarchy(of: entity, .keys(keys, of: entity), on: connection)
                } else {
                    for row in page { batch.append(try context.register(row: row, entity: entity)) }
                }
                try prefetch(request.relationshipKeyPathsForPrefetching, for: batch, entity: entity)
                try body(batch.compactMap { ManagedObject.cast($0, to: T.self) })
                for object in batch where !context.changedSet.contains(object) && !context.deletedSet.contains(object) {
                    context.unregister(object)
                }
            }
        }
        switch context.concurrencyType {
        case .private: try context.withDatabase(run)
        case .main where context.readsPinnedSnapshot: try context.withDatabase(run)  // (in the pinned transaction)
        case .main: try context.coordinator.withReadOnlyTransaction(run)
        }
    }

    // MARK: - Helpers

    /// Inserted, changed and deleted objects of an entity (and of its sub-entities).
    func pendingObjects(of entity: EntityDescription) -> [ManagedObject] {
        // (By identity: an object of a class outside the model that names itself after the
        // entity is pending under that name, yet is none of the entity's.)
        let model = context.coordinator.model
        return (Array(context.insertedSet) + Array(context.changedSet) + Array(context.deletedSet)).filter {
            $0.entity === entity
                || (entity.hasSubentities && $0.entity.superentityName != nil && model.isEntity($0.entity, kindOf: entity.name))
        }
    }

    /// A request's predicate, order and window compiled for the Store.
    func storeQuery<T: ManagedObject>(
        _ request: FetchRequest<T>, entity: EntityDescription, ordered: Bool = true
    ) throws -> StoreQuery {
        try request.validatePaging()
        var compiler = PredicateSQLCompiler(model: context.coordinator.model)
        var query = StoreQuery(limit: request.fetchLimit, offset: request.fetchOffset)
        if let predicate = request.predicate { query.condition = try compiler.compile(predicate, entity: entity, alias: "t") }
        if ordered { query.orderBy = try compiler.orderBy(request.sortDescriptors, entity: entity, alias: "t") }
        query.parameters = compiler.parameters
        return query
    }

    /// The request's objects as the context's store has them, in a window of `limit` and
    /// `offset`: the stored rows, or in a child context the parent's objects (its unsaved
    /// changes included).
    private func fetchFromStore<T: ManagedObject>(
        _ request: FetchRequest<T>, entity: EntityDescription, limit: Int?, offset: Int
    ) throws -> [ManagedObject] {
        if let parent = context.parent {
            // The parent's objects as it sees them, unsaved changes included.
            var forwarded = request.fromChild
            forwarded.fetchLimit = limit
            forwarded.fetchOffset = offset
            return context.register(try parent.performAndWait { parent.statesForChild(try parent.fetch(forwarded)) })
        }
        var query = try storeQuery(request, entity: entity)
        query.limit = limit
        query.offset = offset
        // Rows of one result have distinct keys: in an empty context none can be registered.
        return try context.fetchObjects(entity: entity, query, mayBeRegistered: context.hasRegisteredObjects)
    }

    /// Orders objects as `orderBy` does in SQL: `nil` first ascending, strings by
    /// scalar, ties by primary key (unsaved objects last, in insertion order).
    func sortInMemory(
        _ objects: [ManagedObject], by descriptors: [FetchSortDescriptor], entity: EntityDescription
    ) throws -> [ManagedObject] {
        let keys = try descriptors.map { descriptor in
            (descriptor, try context.coordinator.model.resolve(FetchPredicate.KeyPath.dotted(descriptor.key), from: entity))
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
                    let destination = context.coordinator.model.entity(named: relationship.destinationEntityName)
                else {
                    throw FetchPredicateError(message: "\(current.name) has no relationship \"\(name)\" to prefetch")
                }
                if relationship.joinTable != nil {
                    try context.loadRelationship(relationship, of: level)
                    var seen: Set<ObjectIdentifier> = []
                    level = level.flatMap { $0.relatedObjects(at: relationship.index) }
                        .filter { seen.insert(ObjectIdentifier($0)).inserted }
                } else if relationship.isToMany || relationship.columnName == nil {
                    guard let inverseName = relationship.inverseName,
                        destination.relationship(named: inverseName)?.columnName != nil
                    else { break }
                    try context.loadRelationship(relationship, of: level)
                    level = level.flatMap { $0.relatedObjects(at: relationship.index) }
                } else {
                    var missing: Set<ObjectID> = []
                    for object in level {
                        object.prepareStorage()
                        if case .key(let key) = object.storage.toOne[relationship.index] {
                            let id = ObjectID(entityName: destination.rootEntityName, primaryKey: key)
                            if context.registeredObject(for: id) == nil { missing.insert(id) }
                        }
                    }
                    if !missing.isEmpty { _ = try context.fetchObjects(withIDs: Array(missing)) }
                    level = level.flatMap { $0.relatedObjects(at: relationship.index) }
                }
                current = destination
            }
        }
    }
}
