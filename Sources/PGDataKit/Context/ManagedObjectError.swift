/// A managed object could not be read, changed, found or saved as asked.
public enum ManagedObjectError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The entity has no attribute or relationship with this name.
    case unknownKey(entity: String, key: String)
    /// A value of the wrong type was given for a key.
    case typeMismatch(entity: String, key: String, expected: String, actual: String)
    /// No row exists (any more) for the object ID.
    case objectNotFound(ObjectID)
    /// The object was deleted (here or by another process) and cannot be used.
    case objectDeleted(ObjectID)
    /// The entity is not part of the coordinator's model.
    case unknownEntity(String)
    /// A stored row holds a value the model cannot represent (for example `NULL` in a
    /// non-optional attribute).
    case invalidStoredValue(entity: String, key: String, primaryKey: Int64, reason: String)
    /// A delete was refused by a `.deny` rule: related objects still exist.
    case deleteDenied(entity: String, relationship: String, objectID: ObjectID, relatedCount: Int)
    /// The object belongs to another context.
    case wrongContext(ObjectID)
    /// Two rows hold texts in `key` that PostgreSQL keeps apart (different bytes) but
    /// Swift's `String` holds equal (canonically equivalent), so one `String`-keyed
    /// result cannot hold both; key it by `ExactText`.
    case equivalentKeys(entity: String, key: String)

    /// Names the entity, key, object and what was expected.
    public var description: String {
        switch self {
        case .unknownKey(let entity, let key):
            return "\(entity) has no attribute or relationship named \"\(key)\""
        case .typeMismatch(let entity, let key, let expected, let actual):
            return "\(entity).\(key) expects \(expected), got \(actual)"
        case .objectNotFound(let id):
            return "no row exists for \(id): it was deleted or never saved"
        case .objectDeleted(let id):
            return "\(id) was deleted and can no longer be used"
        case .unknownEntity(let name):
            return "\(name) is not an entity of the model"
        case .invalidStoredValue(let entity, let key, let primaryKey, let reason):
            return "row \(primaryKey) of \(entity) has an invalid value for \(key): \(reason)"
        case .deleteDenied(let entity, let relationship, let id, let count):
            return "cannot delete \(id): \(entity).\(relationship) has the deny rule and still holds \(count) object(s)"
        case .wrongContext(let id):
            return "\(id) belongs to another context"
        case .equivalentKeys(let entity, let key):
            return "two rows of \(entity) hold \(key) texts that are different keys to PostgreSQL but equal as "
                + "Swift Strings (canonically equivalent); key the result by ExactText to keep both"
        }
    }
}
