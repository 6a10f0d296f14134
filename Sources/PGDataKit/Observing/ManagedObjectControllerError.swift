/// A controller cannot do what was asked.
///
/// For example:
///
/// ```swift
/// do {
///     try controller.performFetch()
/// } catch let error as ManagedObjectControllerError where error.code == .stopped {
///     controller = try makeController()   // a stopped controller stays stopped
/// }
/// ```
public struct ManagedObjectControllerError: Error, Sendable, Equatable, DescribedError {
    /// What went wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ManagedObjectControllerError.Code.stopped { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case stopped, sectionKeyPathNotSorted, objectOutsideContext, noObjects, invalidPageSize
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The controller was stopped (`stop()`), or its coordinator (manager) was closed.
        public static let stopped = Code(.stopped)
        /// `sectionNameKeyPath` must be the key of the first sort descriptor (compared
        /// case-sensitively), so that each section is one run of the sorted objects.
        public static let sectionKeyPathNotSorted = Code(.sectionKeyPathNotSorted)
        /// `ManagedObjectController(objects:)` needs objects of one context; the object
        /// `objectID` belongs to none (or to another than the first's).
        public static let objectOutsideContext = Code(.objectOutsideContext)
        /// `ManagedObjectController(objects:)` was given no objects and no context.
        public static let noObjects = Code(.noObjects)
        /// A paging controller's page size (`pageSize`) must be at least 1.
        public static let invalidPageSize = Code(.invalidPageSize)

        /// The code's name, such as `stopped`.
        public var description: String { base.rawValue }
    }

    /// What went wrong, broadly.
    public let code: Code
    /// What went wrong and what to do.
    public let message: String
    /// The section key path asked for (`sectionKeyPathNotSorted`).
    public private(set) var sectionNameKeyPath: String?
    /// The key of the first sort descriptor, if any (`sectionKeyPathNotSorted`).
    public private(set) var firstSortKey: String?
    /// The object outside the context (`objectOutsideContext`).
    public private(set) var objectID: ObjectID?
    /// The page size asked for (`invalidPageSize`).
    public private(set) var pageSize: Int?

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var contextFields: [ErrorContextField?] {
        [
            .name("sectionNameKeyPath", sectionNameKeyPath), .name("firstSortKey", firstSortKey),
            .name("objectID", objectID), .name("pageSize", pageSize),
        ]
    }

    /// The controller was stopped (`stop()`), or its coordinator (manager) was closed.
    public static var stopped: ManagedObjectControllerError {
        ManagedObjectControllerError(
            .stopped, "the controller was stopped or its manager closed; create a new controller")
    }

    /// `sectionNameKeyPath` is not the key of the first sort descriptor.
    public static func sectionKeyPathNotSorted(
        sectionNameKeyPath: String, firstSortKey: String?
    ) -> ManagedObjectControllerError {
        var error = ManagedObjectControllerError(
            .sectionKeyPathNotSorted,
            "sectionNameKeyPath \(sectionNameKeyPath) must be the key of the first sort descriptor "
                + "(case-sensitive); the first is \(firstSortKey ?? "missing")")
        (error.sectionNameKeyPath, error.firstSortKey) = (sectionNameKeyPath, firstSortKey)
        return error
    }

    /// The object with this ID does not belong to the context of the other objects.
    public static func objectOutsideContext(_ id: ObjectID) -> ManagedObjectControllerError {
        var error = ManagedObjectControllerError(
            .objectOutsideContext, "\(id) does not belong to the context of the controller's other objects")
        error.objectID = id
        return error
    }

    /// `ManagedObjectController(objects:)` was given no objects and no context.
    public static var noObjects: ManagedObjectControllerError {
        ManagedObjectControllerError(
            .noObjects, "a controller of given objects needs at least one object, or a context")
    }

    /// A paging controller's page size must be at least 1.
    public static func invalidPageSize(_ size: Int) -> ManagedObjectControllerError {
        var error = ManagedObjectControllerError(.invalidPageSize, "page size \(size) must be at least 1")
        error.pageSize = size
        return error
    }
}
