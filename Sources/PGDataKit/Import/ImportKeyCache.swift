import Synchronization

/// Remembers which row holds each remote key, so that relationship links across
/// batches (posts → their users) look up each key in the database once.
///
/// Import operations keep one for their whole run. Pass one to several
/// `insertOrUpdate` calls to share it. It holds primary keys, not objects, so it is safe
/// to share between contexts and threads. A key whose row is deleted later stays cached
/// (a save then fails on the foreign key); use a fresh cache for each import job.
///
/// For example:
///
/// ```swift
/// let cache = ImportKeyCache()
/// for batch in batches {
///     try Post.insertOrUpdate(
///         batch, uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context,
///         relationships: [.relationship("UserID", to: \.user, matching: \User.userID)], keyCache: cache)
///     try context.save()
/// }
/// ```
public final class ImportKeyCache: Sendable {
    private struct Entry: Hashable, @unchecked Sendable {
        // Sendable: `value` holds an attribute scalar (String, Int, UUID, …), all Sendable,
        // possibly boxed in an AnyHashable.
        let entity: String
        let attribute: String
        let value: UniqueValue
    }

    private let entries = Mutex<[Entry: Int64]>([:])
    /// When the cache holds more keys than this, it starts over (keeps memory bounded).
    public let maximumCount: Int

    /// An empty cache.
    ///
    /// - Parameter maximumCount: the most keys held before the cache empties itself.
    public init(maximumCount: Int = 1_000_000) {
        self.maximumCount = maximumCount
    }

    /// How many keys are cached.
    public var count: Int { entries.withLock { $0.count } }

    /// Forgets every key.
    public func removeAll() { entries.withLock { $0.removeAll() } }

    func primaryKey(entity: String, attribute: String, value: UniqueValue) -> Int64? {
        entries.withLock { $0[Entry(entity: entity, attribute: attribute, value: value)] }
    }

    func store(_ primaryKey: Int64, entity: String, attribute: String, value: UniqueValue) {
        entries.withLock { entries in
            if entries.count >= maximumCount { entries.removeAll(keepingCapacity: true) }
            entries[Entry(entity: entity, attribute: attribute, value: value)] = primaryKey
        }
    }
}
