extension ManagedObjectQueries where Self: ManagedObject {
    /// Sets attributes of every row that matches a predicate with one `UPDATE`, without
    /// loading the objects (Core Data's `NSBatchUpdateRequest`) — and, unlike Core Data's
    /// batch requests, every context and process merges it like a save.
    ///
    /// The rows are locked in primary-key order (as saves lock them), updated, their
    /// versions bumped, and a change record naming every updated object and the
    /// attributes set is written in the same transaction, which commits at once (the
    /// context's write transaction; a private context's transaction ends). This
    /// context's objects of those rows are re-read (their unsaved changes stay on top),
    /// the context manager merges the update into the main context, and every other
    /// process's listener merges it from the change log; controllers move. A context
    /// that loaded one of the rows before and saves a change to it afterwards meets the
    /// new version: under `.error` its save throws `MergeConflictError`, and no update is
    /// lost. Unsaved changes of the context stay unsaved. Attributes only (not
    /// relationships); each value is checked as `setValue(_:forKey:)` checks it, before
    /// anything is sent (its type; the attributes' validation rules are not run). When a
    /// private context's snapshot cannot write a row changed since (`40001`), the update
    /// is redone once in a read-committed transaction, which waits for the row and checks
    /// it against the predicate again.
    ///
    /// For example:
    ///
    /// ```swift
    /// let renamed = try User.updateAll(in: context, set: ["name": "Anonymous"], where: "age < %@", 18)
    /// ```
    ///
    /// Not in a child context (`ManagedObjectContext.newChildContext(name:)`): it commits at
    /// once, behind the parent's back. Fetch the objects and change them there instead.
    ///
    /// - Parameters:
    ///   - context: a main or private context.
    ///   - values: attribute names and the value every matching row gets (`nil`: `NULL`,
    ///     for an optional attribute).
    ///   - predicate: which rows; `nil` updates every row.
    /// - Returns: the number of rows updated.
    /// - Throws: `ManagedObjectError.unknownKey` (an attribute the entity does not have,
    ///   or a relationship) or `.typeMismatch` (nothing is sent then),
    ///   `ChildContextError.unsupported` in a child context, `FetchPredicateError`,
    ///   `PostgresError` (a constraint the new values break: nothing changes).
    @discardableResult
    public static func updateAll(
        in context: ManagedObjectContext, set values: [String: Any?], where predicate: FetchPredicate? = nil
    ) throws -> Int {
        context.assertOnQueue()
        let entity = try context.entityDescription(for: self)
        var assignments: [(attribute: AttributeDescription, value: StoredValue)] = []
        for (name, value) in values.sorted(by: { $0.key < $1.key }) {
            guard let attribute = entity.attribute(named: name) else {
                throw ManagedObjectError.unknownKey(entity: entity.name, key: name)
            }
            if let json = value as? JSONValue, json.nestsTooDeep {
                throw ManagedObjectError.typeMismatch(
                    entity: entity.name, key: name, expected: "JSONValue nested at most \(JSONValue.maximumDepth) levels",
                    actual: "JSONValue nested deeper")
            }
            guard let stored = attribute.coerce(value) else {
                throw ManagedObjectError.typeMismatch(
                    entity: entity.name, key: name, expected: attribute.swiftTypeName,
                    actual: value.map { String(describing: type(of: $0)) } ?? "nil")
            }
            assignments.append((attribute, stored))
        }
        guard !assignments.isEmpty else { return 0 }
        let query = try context.storeQuery(FetchRequest<Self>(predicate: predicate), entity: entity, ordered: false)
        return try context.batchUpdate(of: entity, setting: assignments, query).count
    }

    /// Sets attributes of every row matching a format string; see
    /// `updateAll(in:set:where:)`.
    ///
    /// - Throws: as `updateAll(in:set:where:)`.
    @discardableResult
    public static func updateAll(
        in context: ManagedObjectContext, set values: [String: Any?], where format: String, _ arguments: Any?...
    ) throws -> Int {
        try updateAll(in: context, set: values, where: try FetchPredicate(format: format, argumentArray: arguments))
    }
}
