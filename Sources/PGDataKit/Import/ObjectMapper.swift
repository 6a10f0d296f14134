import Foundation

/// Maps records (JSON objects) to objects of one entity and back (Vokoder's
/// `VOKManagedObjectMapper`): explicit maps from remote key paths to attributes and
/// to-one relationships, default maps by name for the other attributes, a unique key
/// that matches records to existing objects, date and number parsing, `null` handling
/// and closures called after each import and export of a record.
///
/// For example:
///
/// ```swift
/// let mapper = ObjectMapper<Post>(
///     uniqueKey: \.postID,
///     maps: [
///         ObjectMap("id", to: \.postID),
///         ObjectMap("headline", to: \.title),
///         .relationship("author.id", to: \.user, matching: \User.userID),
///     ],
///     mapsOtherAttributes: false)
/// try context.performAndWait {
///     try Post.importRecords(records, mapper: mapper, in: context)
///     try context.save()
/// }
/// let exported = try mapper.export(posts)   // [{"id": …, "headline": …, "author": {"id": …}}]
/// ```
///
/// Rules:
///
/// - **Default maps.** With `mapsOtherAttributes` (the default) every attribute without
///   an explicit map is read from the member of the same name or its snake_case
///   (`userID` from `userID` or `user_id`); `keyStyle` says which name export writes.
/// - **Missing members** leave the attribute as it is (with `missingMembersSetNil`, as
///   Vokoder does, an optional attribute becomes `nil`); **`null`** sets it to `nil` (an
///   error for a non-optional attribute) unless `ignoresNullValueOverwrites` (per mapper
///   or per map) keeps a value that is already set.
/// - **Unknown members** (that no map reads) are ignored; with `rejectsUnknownMembers`
///   they are `ImportError.unknownMember`. **Export** writes `nil` as `null`; with
///   `exportOmitsNil` it leaves the member out.
/// - **Types.** Strings, whole numbers (that fit), numbers, booleans, JSON as is; dates
///   per `dateFormat`; `UUID` from its string; `Data` from base64; numbers from strings
///   only with `parsesNumbersFromStrings`. Anything else is `ImportError.typeMismatch`
///   naming the record index, remote key, attribute and the two types, and nothing of
///   the batch is saved.
/// - **Unique key.** Records are matched to objects with one fetch per batch (see
///   `insertOrUpdate`); without a unique key every record inserts an object.
public struct ObjectMapper<Object: ManagedObject>: Sendable {
    /// Which member name default maps use.
    public enum KeyStyle: Sendable, Equatable {
        /// The attribute's name (`userID`); import also accepts the snake_case name.
        case sameName
        /// The snake_case of the attribute's name (`user_id`); import also accepts the
        /// attribute's name.
        case snakeCase
    }

    /// The unique attribute records are matched on; `nil` inserts one object per record.
    public var uniqueKey: String?
    /// The explicit maps.
    public var maps: [ObjectMap<Object>]
    /// Whether attributes without an explicit map are mapped by name.
    public var mapsOtherAttributes: Bool
    /// The member names of default maps.
    public var keyStyle: KeyStyle
    /// Whether a `null` keeps a value that is already set (maps may override).
    public var ignoresNullValueOverwrites: Bool
    /// How dates are read and written (maps may override).
    public var dateFormat: DateFormat
    /// Whether numeric attributes accept numbers written as strings (maps may override).
    public var parsesNumbersFromStrings: Bool
    /// Called for each record after its values were applied to its object (the place
    /// for anything maps cannot say).
    public var afterImport: (@Sendable (JSONValue, Object) throws -> Void)?
    /// Called for each object after its record was exported (Vokoder's
    /// `exportCompletionBlock`), with the object and the record's members (nested or flat
    /// as the export's style says), which it may change: the place for members no map
    /// writes, or for leaving some out. What it throws stops the export.
    ///
    /// ```swift
    /// mapper.afterExport = { post, record in
    ///     record["kind"] = "post"
    ///     record["titleLength"] = .number(Double(post.title?.count ?? 0))
    /// }
    /// ```
    public var afterExport: (@Sendable (Object, inout [String: JSONValue]) throws -> Void)?
    /// Whether a member missing from a record sets its optional attribute to `nil`
    /// (Vokoder's mapper) rather than leaving it as it is (the default). Non-optional
    /// attributes and the unique key are left as they are.
    ///
    /// ```swift
    /// var mapper = ObjectMapper<User>(uniqueKey: \.userID)
    /// mapper.missingMembersSetNil = true   // {"userID": "u1"} clears name and age
    /// ```
    public var missingMembersSetNil = false
    /// Whether a record member that no map reads is an error (`ImportError.unknownMember`,
    /// naming the record and member) rather than ignored (the default). Only top-level
    /// members are checked.
    public var rejectsUnknownMembers = false
    /// Whether export leaves out members whose value is `nil` rather than writing
    /// `null` (the default). In the nested style the objects above such a member stay,
    /// as in Vokoder's hierarchical export: a post without author is `{"author": {}}`.
    public var exportOmitsNil = false
    /// Whether records update the objects whose keys exist (`true`, the default). With
    /// `false` (Vokoder's mapper `overwriteObjectsWithServerChanges = NO`) imports
    /// through this mapper insert new keys and leave existing objects untouched: rows,
    /// objects the context holds (saved or not, such as those of an earlier import into
    /// the same context), and a row another process inserts before the save. Every
    /// import path reads it: `importRecords(_:mapper:in:)` (no save needed in between),
    /// `MappableModel`'s `importRecords(_:in:)`, import operations (where `false` here or
    /// in `ImportOptions.updatesExistingObjects` keeps existing objects).
    ///
    /// ```swift
    /// var mapper = ObjectMapper<User>(uniqueKey: \.userID)
    /// mapper.updatesExistingObjects = false   // {"userID": "u1", …} leaves an existing u1 as it is
    /// ```
    public var updatesExistingObjects = true
    /// Lenient import (Vokoder's mapper skips malformed values): when set, a value that
    /// does not convert to its attribute is skipped — the attribute keeps what it had,
    /// the record is still imported — and reported here as the
    /// `ImportError.typeMismatch` it would have thrown (record index, key, attribute,
    /// both types), on the importing context's queue. When `nil` (the default) such a
    /// value stops the import with that error.
    ///
    /// ```swift
    /// let skipped = Mutex<[ImportError]>([])
    /// mapper.onMalformedValue = { error in skipped.withLock { $0.append(error) } }
    /// ```
    public var onMalformedValue: (@Sendable (ImportError) -> Void)?

    /// A mapper with the unique key named by a string.
    public init(
        uniqueKey: String? = nil, maps: [ObjectMap<Object>] = [], mapsOtherAttributes: Bool = true,
        keyStyle: KeyStyle = .sameName, ignoresNullValueOverwrites: Bool = false, dateFormat: DateFormat = .iso8601,
        parsesNumbersFromStrings: Bool = false, afterImport: (@Sendable (JSONValue, Object) throws -> Void)? = nil
    ) {
        self.uniqueKey = uniqueKey
        self.maps = maps
        self.mapsOtherAttributes = mapsOtherAttributes
        self.keyStyle = keyStyle
        self.ignoresNullValueOverwrites = ignoresNullValueOverwrites
        self.dateFormat = dateFormat
        self.parsesNumbersFromStrings = parsesNumbersFromStrings
        self.afterImport = afterImport
    }

    /// A mapper with the unique key named by its key path (`\.userID`).
    public init<Key: AttributeValue>(
        uniqueKey: ReferenceWritableKeyPath<Object, Key>, maps: [ObjectMap<Object>] = [], mapsOtherAttributes: Bool = true,
        keyStyle: KeyStyle = .sameName, ignoresNullValueOverwrites: Bool = false, dateFormat: DateFormat = .iso8601,
        parsesNumbersFromStrings: Bool = false, afterImport: (@Sendable (JSONValue, Object) throws -> Void)? = nil
    ) {
        self.init(
            uniqueKey: propertyName(uniqueKey), maps: maps, mapsOtherAttributes: mapsOtherAttributes, keyStyle: keyStyle,
            ignoresNullValueOverwrites: ignoresNullValueOverwrites, dateFormat: dateFormat,
            parsesNumbersFromStrings: parsesNumbersFromStrings, afterImport: afterImport)
    }

    /// An insert-or-update in SQKDataKit's style as a mapper: records are matched on
    /// `uniqueRemoteKey` and `setter` does the rest (no other maps). For import
    /// operations.
    ///
    /// For example:
    ///
    /// ```swift
    /// let mapper = ObjectMapper<User>(uniqueKey: \.userID, remoteKey: "UserID") { record, user in
    ///     user.name = record["Name"]?.stringValue
    /// }
    /// ```
    public init<Key: AttributeValue>(
        uniqueKey: ReferenceWritableKeyPath<Object, Key>, remoteKey: String,
        relationships: [ObjectMap<Object>] = [], setter: @escaping @Sendable (JSONValue, Object) throws -> Void
    ) {
        let key = propertyName(uniqueKey)
        self.init(
            uniqueKey: key, maps: [ObjectMap(remoteKey, to: key)] + relationships, mapsOtherAttributes: false,
            afterImport: setter)
    }
}

/// An `ObjectMapper` checked against the model, ready to run.
struct CompiledMapper {
    struct AttributeMap {
        let attribute: AttributeDescription
        /// Where the value is read (the first present wins); the first is written on
        /// export.
        let paths: [RemoteKeyPath]
        let conversion: ValueConversion
        let ignoresNull: Bool
    }

    let entity: EntityDescription
    let key: AttributeDescription?
    let keyPaths: [RemoteKeyPath]
    let attributeMaps: [AttributeMap]
    let links: [RecordImport.Link]
    let linkMaps: [(link: RecordImport.Link, conversion: ValueConversion)]
    let missingMembersSetNil: Bool
    let onMalformedValue: (@Sendable (ImportError) -> Void)?
    /// The top-level members some map reads, when unknown ones are errors.
    let knownMembers: Set<String>?
    let exportOmitsNil: Bool

    /// Checks the mapper against the model.
    ///
    /// - Throws: `ImportError.unknownKey`, `.notUniqueKey` or `.invalidMap`.
    init<Object>(_ mapper: ObjectMapper<Object>, entity: EntityDescription, model: Model) throws {
        self.entity = entity
        func conversion(_ map: ObjectMap<Object>?) -> ValueConversion {
            ValueConversion(
                dateFormat: map?.dateFormat ?? mapper.dateFormat,
                parsesNumbersFromStrings: map?.parsesNumbersFromStrings ?? mapper.parsesNumbersFromStrings)
        }
        func defaultPaths(_ name: String) -> [RemoteKeyPath] {
            let snake = Naming.snakeCase(name)
            let names = mapper.keyStyle == .sameName ? [name, snake] : [snake, name]
            return (names[0] == names[1] ? [names[0]] : names).map(RemoteKeyPath.init)
        }
        var attributeMaps: [AttributeMap] = []
        var mapped: Set<String> = []
        for map in mapper.maps where !map.isRelationship {
            guard let attribute = entity.attribute(named: map.modelKey) else {
                if entity.relationship(named: map.modelKey) != nil {
                    throw ImportError.invalidMap(
                        entity: entity.name, key: map.modelKey,
                        reason: "is a relationship: map it with ObjectMap.relationship(_:to:matching:)")
                }
                throw ImportError.unknownKey(entity: entity.name, key: map.modelKey)
            }
            mapped.insert(attribute.name)
            attributeMaps.append(
                AttributeMap(
                    attribute: attribute, paths: [RemoteKeyPath(map.remoteKeyPath)], conversion: conversion(map),
                    ignoresNull: map.ignoresNullValueOverwrites ?? mapper.ignoresNullValueOverwrites))
        }
        var key: AttributeDescription?
        if let uniqueKey = mapper.uniqueKey {
            let attribute = try RecordImport.uniqueAttribute(uniqueKey, of: entity)
            key = attribute
            if !mapped.contains(attribute.name) {
                mapped.insert(attribute.name)
                attributeMaps.append(
                    AttributeMap(
                        attribute: attribute, paths: defaultPaths(attribute.name), conversion: conversion(nil),
                        ignoresNull: mapper.ignoresNullValueOverwrites))
            }
        }
        if mapper.mapsOtherAttributes {
            for attribute in entity.attributes where !mapped.contains(attribute.name) {
                attributeMaps.append(
                    AttributeMap(
                        attribute: attribute, paths: defaultPaths(attribute.name), conversion: conversion(nil),
                        ignoresNull: mapper.ignoresNullValueOverwrites))
            }
        }
        self.key = key
        self.keyPaths = key.flatMap { key in attributeMaps.first { $0.attribute === key }?.paths } ?? []
        self.attributeMaps = attributeMaps
        let relationshipMaps = mapper.maps.filter(\.isRelationship)
        let links = try RecordImport.links(
            relationshipMaps, of: entity, model: model, ignoresNull: mapper.ignoresNullValueOverwrites)
        self.links = links
        self.linkMaps = zip(links, relationshipMaps).map { ($0, conversion($1)) }
        self.missingMembersSetNil = mapper.missingMembersSetNil
        self.onMalformedValue = mapper.onMalformedValue
        self.exportOmitsNil = mapper.exportOmitsNil
        if mapper.rejectsUnknownMembers {
            let paths = attributeMaps.flatMap(\.paths) + links.flatMap(\.paths)
            self.knownMembers = Set(paths.compactMap(\.components.first))
        } else {
            self.knownMembers = nil
        }
    }

    /// Applies a record's mapped attributes to an object (the unique key, which matched
    /// the object, and the links are set by the import).
    func apply(_ record: JSONValue, to object: ManagedObject, index: Int, formatters: DateFormatters) throws {
        object.prepareStorage()
        if let knownMembers, case .object(let members) = record {
            for name in members.keys.sorted() where !knownMembers.contains(name) {
                throw ImportError.unknownMember(recordIndex: index, key: name, entity: entity.name)
            }
        }
        for map in attributeMaps where map.attribute !== key {
            var found: JSONValue?
            var path = map.paths[0]
            for candidate in map.paths {
                if let value = candidate.value(in: record) {
                    found = value
                    path = candidate
                    break
                }
            }
            guard let value = found else {
                if missingMembersSetNil && map.attribute.isOptional { object.setStoredValue(.null, at: map.attribute.index) }
                continue
            }
            if value.isNull && map.ignoresNull && !object.storage.value(at: map.attribute.index).isNull { continue }
            let stored: StoredValue
            do {
                stored = try map.conversion.storedValue(value, for: map.attribute, formatters: formatters)
            } catch {
                let mismatch = ImportError.typeMismatch(
                    recordIndex: index, key: path.description, entity: entity.name, attribute: map.attribute.name,
                    expected: error.expected, actual: error.actual, value: value.importErrorText)
                guard let onMalformedValue else { throw mismatch }
                onMalformedValue(mismatch)
                continue
            }
            object.setStoredValue(stored, at: map.attribute.index)
        }
    }
}

extension ObjectMapper {
    /// The mapper compiled for a context's model, as a record import.
    func recordImport(in context: ManagedObjectContext) throws -> RecordImport {
        let entity = try context.entityDescription(for: Object.self)
        let compiled = try CompiledMapper(self, entity: entity, model: context.coordinator.model)
        let afterImport = self.afterImport
        var importer = RecordImport(
            entity: entity, objectClass: Object.self, key: compiled.key, keyPaths: compiled.keyPaths,
            keyName: compiled.keyPaths.first?.description ?? "", links: compiled.links,
            apply: { record, object, index, formatters in
                try compiled.apply(record, to: object, index: index, formatters: formatters)
                if let afterImport, let typed = object as? Object { try afterImport(record, typed) }
            })
        importer.updatesExisting = updatesExistingObjects
        return importer
    }
}

/// An entity that carries its own mapper (Vokoder's `VOKMappableModel`).
///
/// For example:
///
/// ```swift
/// final class Author: ManagedObject, MappableModel {
///     @Attribute(unique: true) var authorID: String = ""
///     @Attribute var name: String?
///     static var objectMapper: ObjectMapper<Author> {
///         ObjectMapper(uniqueKey: \.authorID, keyStyle: .snakeCase)
///     }
/// }
/// try Author.importRecords(records, in: context)        // [{"author_id": "a1", "name": "Ada"}]
/// let record = try author.exportRecord()               // {"author_id": "a1", "name": "Ada"}
/// ```
public protocol MappableModel: ManagedObject {
    /// The maps, unique key and options of the entity's records.
    static var objectMapper: ObjectMapper<Self> { get }
}

extension ManagedObjectQueries where Self: ManagedObject {
    /// Imports records through a mapper: matched on its unique key with one fetch per
    /// batch (as `insertOrUpdate`), or inserted when it has none. Nothing is saved.
    ///
    /// - Returns: one object per distinct key (per record without a key), in order.
    /// - Throws: `ImportError` naming the record index (the context is then left as it
    ///   was before the call), `PostgresError`.
    @discardableResult
    public static func importRecords(
        _ records: [JSONValue], mapper: ObjectMapper<Self>, in context: ManagedObjectContext, batchSize: Int = 1_000,
        keyCache: ImportKeyCache? = nil
    ) throws -> [Self] {
        context.assertOnQueue()
        return ManagedObject.cast(
            try mapper.recordImport(in: context).run(records, batchSize: batchSize, in: context, cache: keyCache), to: Self.self)
    }
}

extension MappableModel {
    /// Imports records through the entity's own `objectMapper`; see
    /// `importRecords(_:mapper:in:batchSize:keyCache:)`.
    ///
    /// - Throws: `ImportError`, `PostgresError`.
    @discardableResult
    public static func importRecords(
        _ records: [JSONValue], in context: ManagedObjectContext, batchSize: Int = 1_000, keyCache: ImportKeyCache? = nil
    ) throws -> [Self] {
        try importRecords(records, mapper: objectMapper, in: context, batchSize: batchSize, keyCache: keyCache)
    }
}
