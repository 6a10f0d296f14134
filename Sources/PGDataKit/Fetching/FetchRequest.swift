/// What to fetch: an entity, a predicate, an order, paging, and what to return.
///
/// For example:
///
/// ```swift
/// var request = FetchRequest<User>(
///     predicate: try FetchPredicate(format: "age > %d AND name BEGINSWITH[c] %@", 30, "a"),
///     sortDescriptors: [FetchSortDescriptor("name")])
/// request.fetchLimit = 20
/// request.relationshipKeyPathsForPrefetching = ["posts"]
/// let users = try context.fetch(request)
/// ```
public struct FetchRequest<Result: ManagedObject>: Sendable {
    /// The filter; `nil` fetches every object of the entity.
    public var predicate: FetchPredicate?
    /// The order; the primary key breaks ties (and orders when empty).
    public var sortDescriptors: [FetchSortDescriptor]
    /// At most this many results; `nil` or `0` for no limit. A negative limit makes the
    /// fetch throw `FetchRequestError`.
    ///
    /// As in Core Data (and every helper ported from it), `0` means "no limit", not "no
    /// rows": setting `0` stores `nil`, so reading it back gives `nil`.
    ///
    /// ```swift
    /// var request = FetchRequest<User>()
    /// request.fetchLimit = 0          // every user, as NSFetchRequest.fetchLimit = 0
    /// #expect(request.fetchLimit == nil)
    /// ```
    public var fetchLimit: Int? {
        get { limit }
        set { limit = newValue == 0 ? nil : newValue }
    }
    /// The limit, never 0 (`fetchLimit` turns 0 into `nil`).
    private var limit: Int?
    /// Skip this many results first. A negative offset makes the fetch throw
    /// `FetchRequestError`.
    public var fetchOffset: Int
    /// Rows per page for `fetch(_:inBatches:)` (1,000 when 0).
    public var fetchBatchSize: Int
    /// Whether unsaved inserted, changed and deleted objects of the context count
    /// (`true` by default, as in Core Data). Dictionary results and batches ignore them.
    public var includesPendingChanges: Bool
    /// Relationships (dotted for several levels, such as `posts.user`) loaded for the
    /// whole result with one query per relationship, instead of one per object later.
    public var relationshipKeyPathsForPrefetching: [String]
    /// The keys `fetchDictionaries` returns (attributes, or to-one key paths such as
    /// `user.name`); all attributes when `nil`.
    public var propertiesToFetch: [String]?
    /// Whether `fetchDictionaries` drops duplicate rows (`SELECT DISTINCT`).
    public var returnsDistinctResults: Bool

    /// Creates a request.
    public init(
        predicate: FetchPredicate? = nil, sortDescriptors: [FetchSortDescriptor] = [], fetchLimit: Int? = nil,
        fetchOffset: Int = 0
    ) {
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
        self.limit = fetchLimit == 0 ? nil : fetchLimit
        self.fetchOffset = fetchOffset
        self.fetchBatchSize = 0
        self.includesPendingChanges = true
        self.relationshipKeyPathsForPrefetching = []
        self.propertiesToFetch = nil
        self.returnsDistinctResults = false
    }

    /// Creates a request from a predicate format string.
    ///
    /// - Throws: `FetchPredicateError` with the position of the problem.
    public init(format: String, _ arguments: Any?...) throws {
        self.init(predicate: try FetchPredicate(format: format, argumentArray: arguments))
    }
}

extension FetchRequest {
    /// Checks the paging before any SQL is built: a negative `fetchLimit` or
    /// `fetchOffset` throws, naming the property.
    func validatePaging() throws(FetchRequestError) {
        if let fetchLimit, fetchLimit < 0 {
            throw FetchRequestError(field: "fetchLimit", message: "is \(fetchLimit); it must be 0 or more (0 or nil for no limit)")
        }
        if fetchOffset < 0 {
            throw FetchRequestError(field: "fetchOffset", message: "is \(fetchOffset); it must be 0 or more")
        }
    }

    /// How many rows to read from the store when pending objects are merged in memory:
    /// limit + offset + the number of pending objects, saturating at `Int.max` (a limit
    /// of `Int.max` means "all").
    func storeLimit(pendingCount: Int) -> Int? {
        guard let fetchLimit else { return nil }
        let (withOffset, overflow) = fetchLimit.addingReportingOverflow(fetchOffset)
        let (total, overflow2) = withOffset.addingReportingOverflow(pendingCount)
        return overflow || overflow2 ? Int.max : total
    }
}

/// A fetch request asks for something no fetch can do, such as a negative limit.
///
/// For example, `request.fetchOffset = -1` makes `context.fetch(request)` throw
/// `FetchRequestError` with `field == "fetchOffset"`:
///
/// ```swift
/// do {
///     _ = try context.fetch(request)
/// } catch let error as FetchRequestError where error.code == .invalidValue {
///     print(error)   // invalid fetch request: fetchOffset is -1; it must be 0 or more
/// }
/// ```
public struct FetchRequestError: Error, Sendable, Equatable, DescribedError {
    /// What is wrong, broadly: `invalidValue`.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch FetchRequestError.Code.invalidValue { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case invalidValue
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// A property of the request (`field`) has a value no fetch can take, such as a
        /// negative `fetchLimit` or `fetchOffset`.
        public static let invalidValue = Code(.invalidValue)

        /// The code's name, such as `invalidValue`.
        public var description: String { base.rawValue }
    }

    /// The request property at fault, such as `fetchLimit` or `fetchOffset`.
    public var field: String
    /// What is wrong with it.
    public var message: String

    /// Creates an error.
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    /// What is wrong, broadly: `invalidValue`.
    public var code: Code { .invalidValue }

    /// `invalid fetch request: fetchOffset is -1; it must be 0 or more`.
    public var description: String { "invalid fetch request: \(field) \(message)" }

    /// The description, which names the field.
    package var debugMessage: String { description }

    /// The field, for `debugDescription`.
    package var contextFields: [ErrorContextField?] { [.name("field", field)] }
}
