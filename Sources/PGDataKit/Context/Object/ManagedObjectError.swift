/// A managed object could not be read, changed, found or saved as asked.
///
/// Match the `code`; the context fields that apply to it are set:
///
/// ```swift
/// do {
///     try user.setValue("forty", forKey: "age")
/// } catch let error as ManagedObjectError where error.code == .typeMismatch {
///     print(error.entity, error.key, error.expected, error.actual)  // User age Int String
/// }
/// ```
///
/// The description never shows an attribute's value; `debugDescription` adds the code and
/// every context field.
public struct ManagedObjectError: Error, Sendable, Equatable, DescribedError {
    /// What went wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ManagedObjectError.Code.unknownKey { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case unknownKey, typeMismatch, objectNotFound, objectDeleted, unknownEntity,
                invalidStoredValue, deleteDenied, wrongContext, equivalentKeys, abstractEntity
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The entity has no attribute or relationship named `key`.
        public static let unknownKey = Code(.unknownKey)
        /// A value of the wrong type was given for `key` (`expected`, `actual`).
        public static let typeMismatch = Code(.typeMismatch)
        /// No row exists (any more) for `objectID`.
        public static let objectNotFound = Code(.objectNotFound)
        /// The object `objectID` was deleted (here or by another process) and cannot be used.
        public static let objectDeleted = Code(.objectDeleted)
        /// `entity` is not part of the coordinator's model.
        public static let unknownEntity = Code(.unknownEntity)
        /// A stored row (`primaryKey`) holds a value in `key` that the model cannot
        /// represent (for example `NULL` in a non-optional attribute); `reason` says why.
        public static let invalidStoredValue = Code(.invalidStoredValue)
        /// A delete of `objectID` was refused by a `.deny` rule: the relationship `key`
        /// still holds `relatedCount` objects.
        public static let deleteDenied = Code(.deleteDenied)
        /// The object `objectID` belongs to another context.
        public static let wrongContext = Code(.wrongContext)
        /// Two rows hold texts in `key` that PostgreSQL keeps apart (different bytes) but
        /// Swift's `String` holds equal (canonically equivalent), so one `String`-keyed
        /// result cannot hold both; key it by `ExactText`.
        public static let equivalentKeys = Code(.equivalentKeys)
        /// An object of an abstract `entity` was to be saved: only objects of its
        /// sub-entities are stored.
        public static let abstractEntity = Code(.abstractEntity)

        /// The code's name, such as `typeMismatch`.
        public var description: String { base.rawValue }
    }

    /// What went wrong, broadly.
    public let code: Code
    /// What failed and what to do, naming the entity, key and object (never a value).
    public let message: String
    /// The entity's name.
    public private(set) var entity: String?
    /// The attribute or relationship name.
    public private(set) var key: String?
    /// The Swift type the key takes (`typeMismatch`).
    public private(set) var expected: String?
    /// The Swift type that was given (`typeMismatch`), or `nil` as `"nil"`.
    public private(set) var actual: String?
    /// The object concerned.
    public private(set) var objectID: ObjectID?
    /// The primary key of the stored row (`invalidStoredValue`).
    public private(set) var primaryKey: Int64?
    /// Why the stored value is invalid (`invalidStoredValue`).
    public private(set) var reason: String?
    /// How many related objects a `.deny` rule found (`deleteDenied`).
    public private(set) var relatedCount: Int?

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var contextFields: [ErrorContextField?] {
        [
            .name("entity", entity), .name("key", key), .name("expected", expected), .name("actual", actual),
            .name("objectID", objectID), .name("primaryKey", primaryKey), .name("reason", reason),
            .name("relatedCount", relatedCount),
        ]
    }

    /// The entity has no attribute or relationship with this name.
    public static func unknownKey(entity: String, key: String) -> ManagedObjectError {
        var error = ManagedObjectError(.unknownKey, "\(entity) has no attribute or relationship named \"\(key)\"")
        error.entity = entity
        error.key = key
        return error
    }

    /// A value of the wrong type was given for a key.
    public static func typeMismatch(entity: String, key: String, expected: String, actual: String) -> ManagedObjectError {
        var error = ManagedObjectError(.typeMismatch, "\(entity).\(key) expects \(expected), got \(actual)")
        error.entity = entity
        error.key = key
        error.expected = expected
        error.actual = actual
        return error
    }

    /// No row exists (any more) for the object ID.
    public static func objectNotFound(_ id: ObjectID) -> ManagedObjectError {
        var error = ManagedObjectError(.objectNotFound, "no row exists for \(id): it was deleted or never saved")
        error.objectID = id
        error.entity = id.entityName
        return error
    }

    /// The object was deleted (here or by another process) and cannot be used.
    public static func objectDeleted(_ id: ObjectID) -> ManagedObjectError {
        var error = ManagedObjectError(.objectDeleted, "\(id) was deleted and can no longer be used")
        error.objectID = id
        error.entity = id.entityName
        return error
    }

    /// The entity is not part of the coordinator's model.
    public static func unknownEntity(_ name: String) -> ManagedObjectError {
        var error = ManagedObjectError(.unknownEntity, "\(name) is not an entity of the model")
        error.entity = name
        return error
    }

    /// A stored row holds a value the model cannot represent (for example `NULL` in a
    /// non-optional attribute).
    public static func invalidStoredValue(
        entity: String, key: String, primaryKey: Int64, reason: String
    ) -> ManagedObjectError {
        var error = ManagedObjectError(
            .invalidStoredValue, "row \(primaryKey) of \(entity) has an invalid value for \(key): \(reason)")
        error.entity = entity
        error.key = key
        error.primaryKey = primaryKey
        error.reason = reason
        return error
    }

    /// A delete was refused by a `.deny` rule: related objects still exist.
    public static func deleteDenied(
        entity: String, relationship: String, objectID: ObjectID, relatedCount: Int
    ) -> ManagedObjectError {
        var error = ManagedObjectError(
            .deleteDenied,
            "cannot delete \(objectID): \(entity).\(relationship) has the deny rule and still holds "
                + "\(relatedCount) object(s)")
        error.entity = entity
        error.key = relationship
        error.objectID = objectID
        error.relatedCount = relatedCount
        return error
    }

    /// The object belongs to another context.
    public static func wrongContext(_ id: ObjectID) -> ManagedObjectError {
        var error = ManagedObjectError(.wrongContext, "\(id) belongs to another context")
        error.objectID = id
        error.entity = id.entityName
        return error
    }

    /// Two rows hold texts in `key` that are different keys to PostgreSQL but equal as
    /// Swift `String`s; key the result by `ExactText`.
    public static func equivalentKeys(entity: String, key: String) -> ManagedObjectError {
        var error = ManagedObjectError(
            .equivalentKeys,
            "two rows of \(entity) hold \(key) texts that are different keys to PostgreSQL but equal as "
                + "Swift Strings (canonically equivalent); key the result by ExactText to keep both")
        error.entity = entity
        error.key = key
        return error
    }

    /// An object of an abstract entity was to be saved; only objects of its sub-entities
    /// are stored (a save throws this before it sends any statement).
    public static func abstractEntity(_ id: ObjectID, entity: String) -> ManagedObjectError {
        var error = ManagedObjectError(
            .abstractEntity, "\(id) is an object of the abstract entity \(entity); insert one of its sub-entities instead")
        error.objectID = id
        error.entity = entity
        return error
    }
}
