import Foundation

/// The context's side of fetch requests: the public fetches, each run by a
/// `FetchRequestRunner` made for the call, and forwards to it for the callers outside
/// this file.
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
        return try traced(PGDataKitTracing.fetch, T.self, rows: { $0.count }) {
            try FetchRequestRunner(context: self).fetch(request)
        }
    }

    /// Counts the objects a request describes (`SELECT count(*)` unless pending changes
    /// of the entity must be counted). A child context without pending changes of the
    /// entity asks its parent for the count (the parent's unsaved changes counted).
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public func count<T: ManagedObject>(for request: FetchRequest<T>) throws -> Int {
        assertOnQueue()
        return try traced(PGDataKitTracing.count, T.self, rows: { $0 }) {
            try FetchRequestRunner(context: self).count(for: request)
        }
    }

    /// The IDs of the objects a request describes (only the keys are read unless pending
    /// changes must be counted). A child context without pending changes of the entity
    /// asks its parent (the parent's unsaved changes counted, its inserts' temporary IDs
    /// included).
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public func fetchObjectIDs<T: ManagedObject>(_ request: FetchRequest<T>) throws -> [ObjectID] {
        assertOnQueue()
        return try traced(PGDataKitTracing.fetch, T.self, rows: { $0.count }) {
            try FetchRequestRunner(context: self).fetchObjectIDs(request)
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
        return try traced(PGDataKitTracing.fetch, T.self, rows: { $0.count }) {
            try FetchRequestRunner(context: self).fetchDictionaries(request)
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
        try FetchRequestRunner(context: self).fetch(request, inBatches: body)
    }

    // MARK: - Forwards

    /// A request's predicate, order and window compiled for the Store
    /// (`FetchRequestRunner.storeQuery(_:entity:ordered:)`).
    func storeQuery<T: ManagedObject>(
        _ request: FetchRequest<T>, entity: EntityDescription, ordered: Bool = true
    ) throws -> StoreQuery {
        try FetchRequestRunner(context: self).storeQuery(request, entity: entity, ordered: ordered)
    }

    /// Orders objects as `orderBy` does in SQL
    /// (`FetchRequestRunner.sortInMemory(_:by:entity:)`).
    func sortInMemory(_ objects: [ManagedObject], by descriptors: [FetchSortDescriptor], entity: EntityDescription) throws -> [ManagedObject] {
        try FetchRequestRunner(context: self).sortInMemory(objects, by: descriptors, entity: entity)
    }

    /// Loads relationships of many objects with one query per relationship and level
    /// (`FetchRequestRunner.prefetch(_:for:entity:)`).
    func prefetch(_ keyPaths: [String], for objects: [ManagedObject], entity: EntityDescription) throws {
        try FetchRequestRunner(context: self).prefetch(keyPaths, for: objects, entity: entity)
    }

    /// Runs a fetch of `type`'s objects in a span (`PGDataKitTracing`), with the rows it
    /// returned; only `body` without a tracer, and in a child context (its parent's fetch
    /// has the span).
    @inline(__always)
    private func traced<R>(
        _ operation: String, _ type: ManagedObject.Type, rows: (R) -> Int, _ body: () throws -> R
    ) rethrows -> R {
        guard coordinator.isTracing, parent == nil else { return try body() }
        return try coordinator.tracing.withSpan(operation, table: type.tableName, entity: type.entityName) { span in
            let result = try body()
            span?.set([PGDataKitTracing.returnedRows: .int64(Int64(rows(result)))])
            return result
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
