import Foundation

/// An aggregate the database computes over an attribute.
public enum AggregateFunction: String, Sendable {
    /// `sum(…)`.
    case sum
    /// `avg(…)`.
    case average = "avg"
    /// `min(…)`.
    case min
    /// `max(…)`.
    case max
}

/// The type-level queries of managed objects; every `ManagedObject` subclass has them.
public protocol ManagedObjectQueries: AnyObject {}

extension ManagedObject: ManagedObjectQueries {}

/// One-line queries on an entity type, in a given context (RHManagedObject, Vokoder and
/// SQKDataKit conveniences). They run on the context's queue like any context call.
///
/// For example:
///
/// ```swift
/// try context.performAndWait {
///     let adults = try User.fetch(in: context, where: "age >= %d", 18, sortedBy: [FetchSortDescriptor("name")])
///     let ada = try User.first(in: context, where: "name == %@", "Ada")
///     let total: Int? = try User.aggregate(.sum, of: "age", in: context)
///     let removed = try Post.deleteAll(in: context, where: "title == nil")
/// }
/// ```
extension ManagedObjectQueries where Self: ManagedObject {
    /// Every object of the entity.
    ///
    /// - Throws: `PostgresError`.
    public static func fetchAll(in context: ManagedObjectContext) throws -> [Self] {
        try context.fetch(FetchRequest<Self>())
    }

    /// The objects matching a predicate, in order, at most `limit`.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func fetch(
        in context: ManagedObjectContext, where predicate: FetchPredicate? = nil,
        sortedBy sortDescriptors: [FetchSortDescriptor] = [], limit: Int? = nil
    ) throws -> [Self] {
        try context.fetch(FetchRequest<Self>(predicate: predicate, sortDescriptors: sortDescriptors, fetchLimit: limit))
    }

    /// The objects matching a format string, in order, at most `limit`.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func fetch(
        in context: ManagedObjectContext, where format: String, _ arguments: Any?...,
        sortedBy sortDescriptors: [FetchSortDescriptor] = [], limit: Int? = nil
    ) throws -> [Self] {
        try fetch(
            in: context, where: try FetchPredicate(format: format, argumentArray: arguments), sortedBy: sortDescriptors,
            limit: limit)
    }

    /// The first object matching a predicate in an order, or `nil`.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func first(
        in context: ManagedObjectContext, where predicate: FetchPredicate? = nil,
        sortedBy sortDescriptors: [FetchSortDescriptor] = []
    ) throws -> Self? {
        try fetch(in: context, where: predicate, sortedBy: sortDescriptors, limit: 1).first
    }

    /// The first object matching a format string in an order, or `nil`.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func first(
        in context: ManagedObjectContext, where format: String, _ arguments: Any?...,
        sortedBy sortDescriptors: [FetchSortDescriptor] = []
    ) throws -> Self? {
        try first(in: context, where: try FetchPredicate(format: format, argumentArray: arguments), sortedBy: sortDescriptors)
    }

    /// How many objects match (counted by the database unless unsaved changes count).
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func count(in context: ManagedObjectContext, where predicate: FetchPredicate? = nil) throws -> Int {
        try context.count(for: FetchRequest<Self>(predicate: predicate))
    }

    /// How many objects match a format string.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func count(in context: ManagedObjectContext, where format: String, _ arguments: Any?...) throws -> Int {
        try count(in: context, where: try FetchPredicate(format: format, argumentArray: arguments))
    }

    /// Whether any object matches.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func exists(in context: ManagedObjectContext, where predicate: FetchPredicate? = nil) throws -> Bool {
        try context.count(for: FetchRequest<Self>(predicate: predicate, fetchLimit: 1)) > 0
    }

    /// Whether any object matches a format string.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func exists(in context: ManagedObjectContext, where format: String, _ arguments: Any?...) throws -> Bool {
        try exists(in: context, where: try FetchPredicate(format: format, argumentArray: arguments))
    }

    /// The distinct values of a key among matching objects, computed by the database
    /// (saved data only), in ascending order with `nil` first. A child context asks its
    /// root context's connection: saved data only there too.
    ///
    /// For example, `let ages = try User.distinctValues(of: "age", as: Int.self, in: context)`
    /// is an `[Int?]`. A to-one relationship's value is the related row's key (`Int64`).
    ///
    /// - Throws: `ManagedObjectError.typeMismatch` when the key's values are not `Value`,
    ///   `FetchPredicateError` or `PostgresError`.
    public static func distinctValues<Value: Sendable>(
        of key: String, as type: Value.Type = Value.self, in context: ManagedObjectContext,
        where predicate: FetchPredicate? = nil
    ) throws -> [Value?] {
        var request = FetchRequest<Self>(predicate: predicate)
        request.propertiesToFetch = [key]
        request.returnsDistinctResults = true
        return try context.fetchDictionaries(request).map { row in
            guard case .some(.some(let value)) = row[key] else { return nil }
            return try cast(value, to: Value.self, key: key, in: context)
        }
    }

    /// An aggregate of an attribute over matching objects, computed by the database
    /// (saved data only); `nil` when no row matches. A child context asks its root
    /// context's connection (a private root's transaction): saved data only there too.
    ///
    /// For example, `let oldest: Int? = try User.aggregate(.max, of: "age", in: context)`.
    ///
    /// - Throws: `FetchPredicateError`, `PostgresError`, or `PostgresValueError` when the
    ///   result does not fit `Value` (an average read as `Int`, say).
    public static func aggregate<Value: PostgresDecodable>(
        _ function: AggregateFunction, of key: String, as type: Value.Type = Value.self,
        in context: ManagedObjectContext, where predicate: FetchPredicate? = nil
    ) throws -> Value? {
        context.assertOnQueue()
        let entity = try context.entityDescription(for: self)
        let model = context.coordinator.model
        let resolved = try model.resolve(FetchPredicate.KeyPath.dotted(key), from: entity)
        guard resolved.toManyIndex == nil, resolved.attribute != nil else {
            throw FetchPredicateError(message: "\(key) is not an attribute of \(entity.name) or its to-one relationships")
        }
        var compiler = PredicateSQLCompiler(model: model)
        let column = try compiler.valueSQL(resolved, alias: "t").sql
        var query = StoreQuery()
        if let predicate { query.condition = try compiler.compile(predicate, entity: entity, alias: "t") }
        query.parameters = compiler.parameters
        let result = try context.withDatabase {
            try context.coordinator.aggregate(function.rawValue, of: column, of: entity, query, on: $0)
        }
        return try result[0].decode(Value?.self, at: 0)
    }

    /// Matching objects keyed by the value of an attribute (Vokoder's
    /// `fetchAsDictionary`); with duplicates, the last one in primary-key order wins, and
    /// objects whose value is `nil` are left out.
    ///
    /// For example, `let byID = try User.fetchAsDictionary(keyedBy: "userID", as: String.self, in: context)`
    /// is a `[String: User]`. Text keys are told apart as PostgreSQL tells them apart, byte
    /// for byte; Swift's `String` holds canonically equivalent texts ("é" precomposed and
    /// as "e" plus an accent) equal, so a `String`-keyed dictionary cannot hold two such
    /// rows: that is an error rather than a lost row. Key by `ExactText` to keep both:
    /// `fetchAsDictionary(keyedBy: "userID", as: ExactText.self, in: context)`.
    ///
    /// - Throws: `ManagedObjectError.typeMismatch` when the key's values are not `Key`,
    ///   `.equivalentKeys` when two rows' texts are different keys to PostgreSQL but one
    ///   `String` key, `ManagedObjectError.unknownKey`, `FetchPredicateError` or
    ///   `PostgresError`.
    public static func fetchAsDictionary<Key: Hashable & Sendable>(
        keyedBy key: String, as type: Key.Type = Key.self, in context: ManagedObjectContext,
        where predicate: FetchPredicate? = nil
    ) throws -> [Key: Self] {
        var dictionary: [Key: Self] = [:]
        // The text of each `String` key, to tell a duplicate from a canonical twin.
        var spellings: [Key: ExactText] = [:]
        for object in try fetch(in: context, where: predicate) {
            guard let value = try object.value(forKey: key) else { continue }
            if Key.self == ExactText.self, let text = value as? String {
                dictionary[try cast(ExactText(text), to: Key.self, key: key, in: context)] = object
                continue
            }
            let typed = try cast(value, to: Key.self, key: key, in: context)
            if let text = value as? String {
                let spelling = ExactText(text)
                if let previous = spellings.updateValue(spelling, forKey: typed), previous != spelling {
                    throw ManagedObjectError.equivalentKeys(entity: object.entity.name, key: key)
                }
            }
            dictionary[typed] = object
        }
        return dictionary
    }

    /// A value read for `key`, as `T`, or a type-mismatch error naming entity and key.
    private static func cast<T>(_ value: Any, to type: T.Type, key: String, in context: ManagedObjectContext) throws -> T {
        guard let typed = value as? T else {
            throw ManagedObjectError.typeMismatch(
                entity: (try? context.entityDescription(for: self).name) ?? entityName, key: key,
                expected: String(describing: T.self), actual: String(describing: Swift.type(of: value)))
        }
        return typed
    }

    /// Deletes every matching row with one `DELETE` statement and commits at once (like
    /// Core Data's batch delete): in a private context's open transaction, which then
    /// ends (so its next read sees the deletion), or else in a transaction of its own.
    /// Unsaved changes of the context stay unsaved. The deletions still reach this
    /// context (its objects are marked deleted), its did-save observers, through the
    /// context manager the main context, and — through a change record written in the
    /// same transaction — every other process's listener. Database foreign-key actions
    /// apply (rows they delete are not in the change record); the model's delete rules
    /// do not.
    ///
    /// With `includingUnsavedInserts` (SQKDataKit's `sqk_deleteAllObjectsInContext:`,
    /// which deletes the context's objects), the context's inserted, unsaved objects
    /// that match are deleted from it too (they never reach the database); by default
    /// they stay, as only rows are deleted.
    ///
    /// For example:
    ///
    /// ```swift
    /// try User.deleteAll(in: context, where: try FetchPredicate(format: "age < 18"), includingUnsavedInserts: true)
    /// ```
    ///
    /// Not in a child context (`ManagedObjectContext.newChildContext(name:)`): it commits at
    /// once, behind the parent's back. Fetch the objects and `delete()` them there instead.
    ///
    /// - Returns: the number of rows deleted (unsaved inserts not counted).
    /// - Throws: `ChildContextError.unsupported` in a child context, `FetchPredicateError`
    ///   or `PostgresError`.
    @discardableResult
    public static func deleteAll(
        in context: ManagedObjectContext, where predicate: FetchPredicate? = nil, includingUnsavedInserts: Bool = false
    ) throws -> Int {
        context.assertOnQueue()
        let entity = try context.entityDescription(for: self)
        let query = try context.storeQuery(FetchRequest<Self>(predicate: predicate), entity: entity, ordered: false)
        // Matched before the rows go: a predicate may read related saved objects.
        var unsaved: [ManagedObject] = []
        if includingUnsavedInserts {
            let evaluator = PredicateEvaluator(model: context.coordinator.model)
            for object in context.insertedObjects where context.coordinator.model.isEntity(object.entity, kindOf: entity.name) {
                if try predicate.map({ try evaluator.evaluate($0, on: object) }) ?? true { unsaved.append(object) }
            }
        }
        let deleted = try context.batchDelete(of: entity, query).count
        for object in unsaved { context.delete(object) }
        return deleted
    }

    /// Deletes every row matching a format string; see `deleteAll(in:where:)`.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    @discardableResult
    public static func deleteAll(in context: ManagedObjectContext, where format: String, _ arguments: Any?...) throws -> Int {
        try deleteAll(in: context, where: try FetchPredicate(format: format, argumentArray: arguments))
    }

    /// The first object (in primary-key order, unsaved ones included) that matches a
    /// predicate, or a new object inserted into the context
    /// (RHManagedObject's `newOrExistingEntityWithPredicate:`). The new object's values
    /// are its defaults: set what the predicate asked for yourself.
    ///
    /// For example:
    ///
    /// ```swift
    /// let user = try User.insertOrFetch(where: try FetchPredicate(format: "userID == %@", "u1"), in: context)
    /// if user.isInserted { user.userID = "u1" }
    /// ```
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func insertOrFetch(where predicate: FetchPredicate, in context: ManagedObjectContext) throws -> Self {
        if let existing = try first(in: context, where: predicate) { return existing }
        let object = Self()
        context.insert(object)
        return object
    }

    /// `insertOrFetch(where:in:)` with a format string.
    ///
    /// - Throws: `FetchPredicateError` or `PostgresError`.
    public static func insertOrFetch(in context: ManagedObjectContext, where format: String, _ arguments: Any?...) throws -> Self {
        try insertOrFetch(where: try FetchPredicate(format: format, argumentArray: arguments), in: context)
    }

    /// The object whose `key` equals `value` (unsaved ones included), or a new object
    /// inserted with it.
    ///
    /// For example, `let user = try User.insertOrFetch(key: "userID", value: "u1", in: context)`.
    ///
    /// - Throws: `ManagedObjectError` when the key is unknown or the value has the wrong
    ///   type, `FetchPredicateError` or `PostgresError`.
    public static func insertOrFetch(key: String, value: Any?, in context: ManagedObjectContext) throws -> Self {
        let entity = try context.entityDescription(for: self)
        guard let attribute = entity.attribute(named: key) else {
            throw ManagedObjectError.unknownKey(entity: entity.name, key: key)
        }
        guard attribute.coerce(value) != nil else {
            throw ManagedObjectError.typeMismatch(
                entity: entity.name, key: key, expected: attribute.swiftTypeName,
                actual: value.map { String(describing: type(of: $0)) } ?? "nil")
        }
        let predicate = try FetchPredicate(format: "%K == %@", key, value)
        if let existing = try first(in: context, where: predicate) { return existing }
        let object = Self()
        context.insert(object)
        do {
            try object.setValue(value, forKey: key)
        } catch {
            context.delete(object)
            throw error
        }
        return object
    }
}
