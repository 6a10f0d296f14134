import Foundation

/// What an import does when a record names a related object (by its remote key) that
/// exists neither in the context nor in the database.
public enum MissingRelatedObject: Sendable, Equatable {
    /// Insert a stub: a new object that carries only the key (SQKDataKit's stubs). A
    /// later import of the related entity fills it in; saved as an upsert, so a row
    /// another process inserted meanwhile is kept as it is.
    case createStub
    /// Leave the relationship empty.
    case leaveNil
    /// Throw `ImportError.unresolvedRelationship` naming the record.
    case fail
}

/// One map from a value in the records to an attribute or to-one relationship
/// (Vokoder's `VOKManagedObjectMap`).
///
/// The remote side is a dotted key path through nested objects (`"author.id"`). An
/// attribute map converts the value to the attribute's type (see "Mapping records" in
/// the Importing article for the rules); a relationship map finds the related object by a unique key
/// of its entity, within the one-query-per-batch discipline of the import.
///
/// For example:
///
/// ```swift
/// let maps: [ObjectMap<Post>] = [
///     ObjectMap("id", to: \.postID),
///     ObjectMap("headline", to: \.title, ignoresNullValueOverwrites: true),
///     .relationship("author.id", to: \.user, matching: \User.userID),
/// ]
/// ```
public struct ObjectMap<Object: ManagedObject>: Sendable {
    /// The dotted key path in the records.
    public var remoteKeyPath: String
    /// The attribute or relationship name.
    public var modelKey: String
    /// How dates are read and written; the mapper's when `nil`.
    public var dateFormat: DateFormat?
    /// Whether numeric attributes accept numbers written as strings; the mapper's
    /// setting when `nil`.
    public var parsesNumbersFromStrings: Bool?
    /// Whether a `null` leaves a value that is already set as it is; the mapper's
    /// setting when `nil`.
    public var ignoresNullValueOverwrites: Bool?
    /// For a relationship map: the unique attribute of the related entity its remote
    /// value matches.
    public var destinationKey: String?
    /// For a relationship map: what to do when no related object matches.
    public var whenMissing: MissingRelatedObject

    /// Maps a remote key path to an attribute by name.
    public init(
        _ remoteKeyPath: String, to modelKey: String, dateFormat: DateFormat? = nil,
        parsesNumbersFromStrings: Bool? = nil, ignoresNullValueOverwrites: Bool? = nil
    ) {
        self.remoteKeyPath = remoteKeyPath
        self.modelKey = modelKey
        self.dateFormat = dateFormat
        self.parsesNumbersFromStrings = parsesNumbersFromStrings
        self.ignoresNullValueOverwrites = ignoresNullValueOverwrites
        self.destinationKey = nil
        self.whenMissing = .createStub
    }

    /// Maps a remote key path to an attribute, named by its key path (`\.title`).
    public init<Value: AttributeValue>(
        _ remoteKeyPath: String, to attribute: ReferenceWritableKeyPath<Object, Value>, dateFormat: DateFormat? = nil,
        parsesNumbersFromStrings: Bool? = nil, ignoresNullValueOverwrites: Bool? = nil
    ) {
        self.init(
            remoteKeyPath, to: propertyName(attribute), dateFormat: dateFormat,
            parsesNumbersFromStrings: parsesNumbersFromStrings, ignoresNullValueOverwrites: ignoresNullValueOverwrites)
    }

    /// Maps a remote key path holding a related object's unique key to a to-one
    /// relationship, by name.
    ///
    /// For example, `.relationship("UserID", to: "user", matching: "userID")`.
    public static func relationship(
        _ remoteKeyPath: String, to relationship: String, matching destinationKey: String,
        whenMissing: MissingRelatedObject = .createStub, ignoresNullValueOverwrites: Bool? = nil
    ) -> ObjectMap {
        var map = ObjectMap(remoteKeyPath, to: relationship, ignoresNullValueOverwrites: ignoresNullValueOverwrites)
        map.destinationKey = destinationKey
        map.whenMissing = whenMissing
        return map
    }

    /// Maps a remote key path holding a related object's unique key to a to-one
    /// relationship, both named by key paths.
    ///
    /// For example, `.relationship("UserID", to: \.user, matching: \User.userID)`.
    public static func relationship<Destination: ManagedObject, Key: AttributeValue>(
        _ remoteKeyPath: String, to relationship: ReferenceWritableKeyPath<Object, Destination?>,
        matching destinationKey: ReferenceWritableKeyPath<Destination, Key>,
        whenMissing: MissingRelatedObject = .createStub, ignoresNullValueOverwrites: Bool? = nil
    ) -> ObjectMap {
        .relationship(
            remoteKeyPath, to: propertyName(relationship), matching: propertyName(destinationKey),
            whenMissing: whenMissing, ignoresNullValueOverwrites: ignoresNullValueOverwrites)
    }

    /// Whether this map targets a relationship.
    public var isRelationship: Bool { destinationKey != nil }
}

/// The property a key path of a managed object reads; an impossible name (which the
/// import then reports as an unknown key) when the key path is not an `@Attribute` or
/// `@Relationship`.
func propertyName(_ keyPath: AnyKeyPath) -> String {
    do {
        return try PredicateTranslator.propertyName(keyPath)
    } catch {
        return "<\(keyPath) is not an @Attribute or @Relationship>"
    }
}
