/// Records could not be imported as asked. Each error names the record (its index in the
/// input, counted from 0 across batches), the remote key and the entity or attribute,
/// but its description never shows the record's values (they can be personal data);
/// `debugDescription` shows the offending value of a `typeMismatch`.
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
/// } catch ImportError.Code.missingKey {
///     print("a record has no UserID; nothing of its batch was saved")
/// } catch let error as ImportError where error.code == .typeMismatch {
///     print(error)   // record 17: "Age" is a string, but User.age expects Int
/// }
/// ```
///
/// A code stands as a `catch` pattern on its own (`ErrorCode`); binding the error
/// (`catch let error as ImportError where …`) gives its fields.
public struct ImportError: Error, Sendable, DescribedError {
    /// What went wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ImportError.Code.missingKey { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case missingKey, typeMismatch, unknownKey, notUniqueKey, invalidMap,
                unresolvedRelationship, deletedInContext, recordFailed, unknownMember, invalidRecord
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// A record has no value (or `null`) for the unique key.
        public static let missingKey = Code(.missingKey)
        /// A record's value has a type the attribute cannot take (a string where a number
        /// belongs and numbers are not parsed from strings, a date in another format, a
        /// number that does not fit, `null` for a non-optional attribute).
        public static let typeMismatch = Code(.typeMismatch)
        /// A map or unique key names no attribute or relationship of the entity.
        public static let unknownKey = Code(.unknownKey)
        /// The key used to match records is not a unique key of the model; declare it
        /// with `@Attribute(unique: true)` (and a unique constraint in the database).
        public static let notUniqueKey = Code(.notUniqueKey)
        /// A map or link does not fit the model (for example a relationship map naming a
        /// to-many relationship); `reason` says how.
        public static let invalidMap = Code(.invalidMap)
        /// A record refers to a related object (by its remote key) that does not exist,
        /// and the link says `.fail` for missing objects.
        public static let unresolvedRelationship = Code(.unresolvedRelationship)
        /// The object with the record's key was deleted in the context and not saved
        /// yet; save or roll back first.
        public static let deletedInContext = Code(.deletedInContext)
        /// The caller's closure (setter or after-import closure) threw for a record; see
        /// `underlying`.
        public static let recordFailed = Code(.recordFailed)
        /// A record has a member no map reads (`ObjectMapper.rejectsUnknownMembers`).
        public static let unknownMember = Code(.unknownMember)
        /// The object a record made or changed breaks validation rules (`AttributeRule`,
        /// the `validateFor…` hooks): `underlying` is the `ObjectValidationError` naming each.
        public static let invalidRecord = Code(.invalidRecord)

        /// The code's name, such as `missingKey`.
        public var description: String { base.rawValue }
    }

    /// What went wrong, broadly.
    public let code: Code
    /// One sentence naming the record, key and attribute (never a value).
    public let message: String
    /// The record's index in the input (counted from 0 across batches), if the error
    /// concerns one record.
    public private(set) var recordIndex: Int?
    /// The record's member (remote key), or the model key a map names.
    public private(set) var key: String?
    /// The entity's name.
    public private(set) var entity: String?
    /// The attribute or relationship concerned.
    public private(set) var attribute: String?
    /// The type the attribute takes (`typeMismatch`).
    public private(set) var expected: String?
    /// The type the record held (`typeMismatch`).
    public private(set) var actual: String?
    /// How a map does not fit the model (`invalidMap`).
    public private(set) var reason: String?
    /// What the caller's closure threw (`recordFailed`), or the `ObjectValidationError` of
    /// the record's object (`invalidRecord`).
    public private(set) var underlying: (any Error)?
    /// The record's value that did not fit (`typeMismatch`): data, so only
    /// `debugDescription` shows it.
    public private(set) var value: String?

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var contextFields: [ErrorContextField?] {
        [
            .name("recordIndex", recordIndex), .name("key", key), .name("entity", entity),
            .name("attribute", attribute), .name("expected", expected), .name("actual", actual),
            .name("reason", reason), .value("value", value), .underlying("underlying", underlying),
        ]
    }

    /// A record has no value (or `null`) for the unique key.
    public static func missingKey(recordIndex: Int, key: String, entity: String, attribute: String) -> ImportError {
        var error = ImportError(
            .missingKey, "record \(recordIndex): the unique key \"\(key)\" is missing or null (\(entity).\(attribute))")
        (error.recordIndex, error.key, error.entity, error.attribute) = (recordIndex, key, entity, attribute)
        return error
    }

    /// A record's value has a type the attribute cannot take; `value` (shown only by
    /// `debugDescription`) is the value.
    public static func typeMismatch(
        recordIndex: Int, key: String, entity: String, attribute: String, expected: String, actual: String,
        value: String? = nil
    ) -> ImportError {
        var error = ImportError(
            .typeMismatch, "record \(recordIndex): \"\(key)\" is \(actual), but \(entity).\(attribute) expects \(expected)")
        (error.recordIndex, error.key, error.entity, error.attribute) = (recordIndex, key, entity, attribute)
        (error.expected, error.actual, error.value) = (expected, actual, value)
        return error
    }

    /// A map or unique key names no attribute or relationship of the entity.
    public static func unknownKey(entity: String, key: String) -> ImportError {
        var error = ImportError(.unknownKey, "\(entity) has no attribute or relationship named \"\(key)\"")
        (error.entity, error.key) = (entity, key)
        return error
    }

    /// The key used to match records is not a unique key of the model.
    public static func notUniqueKey(entity: String, attribute: String) -> ImportError {
        var error = ImportError(
            .notUniqueKey,
            "\(entity).\(attribute) is not a unique key: declare it with @Attribute(unique: true) "
                + "and a unique constraint on its column")
        (error.entity, error.attribute) = (entity, attribute)
        return error
    }

    /// A map or link does not fit the model.
    public static func invalidMap(entity: String, key: String, reason: String) -> ImportError {
        var error = ImportError(.invalidMap, "map for \(entity).\(key): \(reason)")
        (error.entity, error.key, error.reason) = (entity, key, reason)
        return error
    }

    /// A record refers to a related object (by its remote key) that does not exist.
    public static func unresolvedRelationship(
        recordIndex: Int, key: String, entity: String, relationship: String
    ) -> ImportError {
        var error = ImportError(
            .unresolvedRelationship, "record \(recordIndex): no object matches \"\(key)\" for \(entity).\(relationship)")
        (error.recordIndex, error.key, error.entity, error.attribute) = (recordIndex, key, entity, relationship)
        return error
    }

    /// The object with the record's key was deleted in the context and not saved yet.
    public static func deletedInContext(recordIndex: Int, key: String, entity: String) -> ImportError {
        var error = ImportError(
            .deletedInContext,
            "record \(recordIndex): the \(entity) with this \"\(key)\" was deleted in the context and not saved; "
                + "save or roll back first")
        (error.recordIndex, error.key, error.entity) = (recordIndex, key, entity)
        return error
    }

    /// The caller's closure (setter or after-import closure) threw for a record.
    public static func recordFailed(recordIndex: Int, underlying: any Error) -> ImportError {
        var error = ImportError(.recordFailed, "record \(recordIndex): \(underlying)")
        (error.recordIndex, error.underlying) = (recordIndex, underlying)
        return error
    }

    /// The object a record made or changed breaks validation rules; `validation` names
    /// each (no values).
    public static func invalidRecord(recordIndex: Int, entity: String, validation: ObjectValidationError) -> ImportError {
        let failures = validation.failures.map(\.summary).joined(separator: "; ")
        var error = ImportError(.invalidRecord, "record \(recordIndex): \(failures)")
        (error.recordIndex, error.entity, error.underlying) = (recordIndex, entity, validation)
        return error
    }

    /// A record has a member no map reads (`ObjectMapper.rejectsUnknownMembers`).
    public static func unknownMember(recordIndex: Int, key: String, entity: String) -> ImportError {
        var error = ImportError(
            .unknownMember, "record \(recordIndex): \"\(key)\" is not mapped to any attribute or relationship of \(entity)")
        (error.recordIndex, error.key, error.entity) = (recordIndex, key, entity)
        return error
    }
}

extension JSONValue {
    /// The value as `ImportError.value` keeps it: scalars as JSON text, arrays and
    /// objects as `[…]` and `{…}` (they may nest deeply, and the point is their type).
    var importErrorText: String {
        switch self {
        case .array: return "[…]"
        case .object: return "{…}"
        default: return jsonText
        }
    }
}
