/// Records could not be imported as asked. Each case names the record (its index in the
/// input, counted from 0 across batches), the remote key and the entity or attribute,
/// but never the record's values (they can be personal data).
///
/// When an import throws, nothing from the failing batch is saved: `insertOrUpdate` and
/// `importRecords` leave the context as it was before the call, and an import operation
/// rolls the batch back (earlier batches stay saved).
///
/// For example:
///
/// ```swift
/// do {
///     try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) { record, user in
///         user.name = record["Name"]?.stringValue
///     }
/// } catch let error as ImportError {
///     print(error)   // record 17: the unique key "UserID" is missing or null (User.userID)
/// }
/// ```
public enum ImportError: Error, Sendable, CustomStringConvertible {
    /// A record has no value (or `null`) for the unique key.
    case missingKey(recordIndex: Int, key: String, entity: String, attribute: String)
    /// A record's value has a type the attribute cannot take (a string where a number
    /// belongs and numbers are not parsed from strings, a date in another format, a
    /// number that does not fit, `null` for a non-optional attribute).
    case typeMismatch(recordIndex: Int, key: String, entity: String, attribute: String, expected: String, actual: String)
    /// A map or unique key names no attribute or relationship of the entity.
    case unknownKey(entity: String, key: String)
    /// The key used to match records is not a unique key of the model; declare it with
    /// `@Attribute(unique: true)` (and a unique constraint in the database).
    case notUniqueKey(entity: String, attribute: String)
    /// A map or link does not fit the model (for example a relationship map naming a
    /// to-many relationship).
    case invalidMap(entity: String, key: String, reason: String)
    /// A record refers to a related object (by its remote key) that does not exist, and
    /// the link says `.fail` for missing objects.
    case unresolvedRelationship(recordIndex: Int, key: String, entity: String, relationship: String)
    /// The object with the record's key was deleted in the context and not saved yet;
    /// save or roll back first.
    case deletedInContext(recordIndex: Int, key: String, entity: String)
    /// The caller's closure (setter or after-import closure) threw for a record.
    case recordFailed(recordIndex: Int, underlying: any Error)
    /// A record has a member no map reads (`ObjectMapper.rejectsUnknownMembers`).
    case unknownMember(recordIndex: Int, key: String, entity: String)

    /// The record index, if the error concerns one record.
    public var recordIndex: Int? {
        switch self {
        case .missingKey(let index, _, _, _), .typeMismatch(let index, _, _, _, _, _),
            .unresolvedRelationship(let index, _, _, _), .deletedInContext(let index, _, _),
            .recordFailed(let index, _), .unknownMember(let index, _, _):
            return index
        case .unknownKey, .notUniqueKey, .invalidMap:
            return nil
        }
    }

    /// One sentence naming the record, key and attribute.
    public var description: String {
        switch self {
        case .missingKey(let index, let key, let entity, let attribute):
            return "record \(index): the unique key \"\(key)\" is missing or null (\(entity).\(attribute))"
        case .typeMismatch(let index, let key, let entity, let attribute, let expected, let actual):
            return "record \(index): \"\(key)\" is \(actual), but \(entity).\(attribute) expects \(expected)"
        case .unknownKey(let entity, let key):
            return "\(entity) has no attribute or relationship named \"\(key)\""
        case .notUniqueKey(let entity, let attribute):
            return "\(entity).\(attribute) is not a unique key: declare it with @Attribute(unique: true) "
                + "and a unique constraint on its column"
        case .invalidMap(let entity, let key, let reason):
            return "map for \(entity).\(key): \(reason)"
        case .unresolvedRelationship(let index, let key, let entity, let relationship):
            return "record \(index): no object matches \"\(key)\" for \(entity).\(relationship)"
        case .deletedInContext(let index, let key, let entity):
            return "record \(index): the \(entity) with this \"\(key)\" was deleted in the context and not saved; "
                + "save or roll back first"
        case .recordFailed(let index, let underlying):
            return "record \(index): \(underlying)"
        case .unknownMember(let index, let key, let entity):
            return "record \(index): \"\(key)\" is not mapped to any attribute or relationship of \(entity)"
        }
    }
}
