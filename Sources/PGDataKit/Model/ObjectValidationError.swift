/// Objects a save would write break rules of the model or of their classes: every
/// failure found, for every object, in one error. Nothing was sent to the server; the
/// context keeps its changes, to be fixed and saved again (or rolled back).
///
/// `save()` checks each inserted and changed object's attribute rules (`AttributeRule`,
/// declared with `@Attribute(validate:)`), then calls its `validateForInsert()` or
/// `validateForUpdate()`, and each deleted object's `validateForDelete()`. The
/// description names each object, attribute and rule but never a value (values can be
/// personal data); `debugDescription` adds what each hook threw.
///
/// For example:
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error as ObjectValidationError {
///     for failure in error.failures {
///         print(failure.objectID, failure.attribute ?? "-", failure.rule)
///     }
/// }
/// ```
///
/// A hook reports failures of its own by throwing a `ObjectValidationError` (its failures join
/// the others) or any other error (which becomes one failure, in `underlying`).
public struct ObjectValidationError: Error, Sendable, DescribedError {
    /// What went wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ObjectValidationError.Code.invalidObjects { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case invalidObjects
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// One or more objects break a rule; `failures` lists each.
        public static let invalidObjects = Code(.invalidObjects)

        /// The code's name, such as `invalidObjects`.
        public var description: String { base.rawValue }
    }

    /// What went wrong, broadly.
    public let code: Code
    /// Every failure, objects in the order they were inserted, changed or deleted.
    public let failures: [ValidationFailure]

    /// An error of the given failures, for a `validateFor…` hook to throw.
    ///
    /// - Parameter failures: The failures (at least one, for the error to mean anything).
    public init(_ failures: [ValidationFailure]) {
        self.code = .invalidObjects
        self.failures = failures
    }

    /// The objects named, in order, each once.
    public var objectIDs: [ObjectID] {
        var seen: Set<ObjectID> = []
        return failures.map(\.objectID).filter { seen.insert($0).inserted }
    }

    /// "3 objects are not valid: …" with each failure's message (no values).
    public var message: String {
        "\(objects) not valid: " + failures.map(\.message).joined(separator: "; ")
    }

    /// `message`, with what each hook threw.
    package var debugMessage: String {
        "\(objects) not valid: " + failures.map(\.debugMessage).joined(separator: "; ")
    }

    private var objects: String {
        let count = objectIDs.count
        return count == 1 ? "1 object is" : "\(count) objects are"
    }

    package var contextFields: [ErrorContextField?] {
        [.names("objectIDs", objectIDs), .name("failures", failures.count)]
    }
}

/// One rule one object breaks: which object, which attribute (`nil` for a rule of the
/// whole object, from a `validateFor…` hook), which rule, and what the rule asks.
public struct ValidationFailure: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of rule a failure is of.
    ///
    /// A struct of named values rather than an enum, so later versions can add rules
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    public struct Rule: Sendable, Hashable, CustomStringConvertible {
        /// The rules, one case each.
        enum Base: String, Sendable {
            case required, minimum, maximum, range, length, pattern, custom
            case validateForInsert, validateForUpdate, validateForDelete
        }

        /// Which rule this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// `AttributeRule.required`: the value is `nil`; or a to-one relationship
        /// declared `required: true` points at nothing.
        public static let required = Rule(.required)
        /// `AttributeRule.minimum(_:)`.
        public static let minimum = Rule(.minimum)
        /// `AttributeRule.maximum(_:)`.
        public static let maximum = Rule(.maximum)
        /// `AttributeRule.range(_:)`.
        public static let range = Rule(.range)
        /// `AttributeRule.length(_:)`.
        public static let length = Rule(.length)
        /// `AttributeRule.pattern(_:)`.
        public static let pattern = Rule(.pattern)
        /// `AttributeRule.custom(_:_:)`, or a failure a hook made with
        /// `ValidationFailure.init(_:attribute:reason:)`.
        public static let custom = Rule(.custom)
        /// The object's `validateForInsert()` threw.
        public static let validateForInsert = Rule(.validateForInsert)
        /// The object's `validateForUpdate()` threw.
        public static let validateForUpdate = Rule(.validateForUpdate)
        /// The object's `validateForDelete()` threw.
        public static let validateForDelete = Rule(.validateForDelete)

        /// The rule's name, such as `maximum`.
        public var description: String { base.rawValue }
    }

    /// The object that breaks the rule.
    public let objectID: ObjectID
    /// Its entity's name.
    public let entity: String
    /// The attribute (or relationship), or `nil` for a rule of the whole object.
    public let attribute: String?
    /// Which kind of rule.
    public let rule: Rule
    /// What the rule asks, completing "must …" (`be at most 150`); for a hook's
    /// failure, its reason.
    public let requirement: String
    /// What a hook threw, when it was not a `ObjectValidationError`.
    public let underlying: (any Error)?

    /// A failure of `objectID`'s `attribute` (`nil`: the whole object).
    init(
        objectID: ObjectID, entity: String, attribute: String?, rule: Rule, requirement: String,
        underlying: (any Error)? = nil
    ) {
        self.objectID = objectID
        self.entity = entity
        self.attribute = attribute
        self.rule = rule
        self.requirement = requirement
        self.underlying = underlying
    }

    /// `User/temporary-1a2b3c4d: User.age must be at most 150` (no value).
    public var message: String { "\(objectID): \(summary)" }

    /// What fails, without the object: `User.age must be at most 150`, or
    /// `validateForInsert() threw SomeError` (the type only).
    var summary: String {
        if let underlying { return "\(rule)() threw \(type(of: underlying))" }
        return (attribute.map { "\(entity).\($0)" } ?? entity) + " must \(requirement)"
    }

    /// `message`, with what a hook threw.
    var debugMessage: String {
        guard let underlying else { return message }
        return "\(objectID): \(rule)() threw \(String(reflecting: underlying))"
    }

    /// `message`.
    public var description: String { message }
    /// `message`, with what a hook threw.
    public var debugDescription: String { debugMessage }
}
