import Foundation

/// A live, ordered set of objects that match a fetch request, kept true when any
/// process saves (Core Data's `NSFetchedResultsController`, SQKDataKit's
/// `SQKManagedObjectController`), with fetched / updated / inserted / deleted index sets.
///
/// For example, over the main context of a `ContextManager`:
///
/// ```swift
/// let main = manager.mainContext
/// let request = FetchRequest<User>(
///     predicate: try FetchPredicate(format: "age >= %d", 18), sortDescriptors: [FetchSortDescriptor("name")])
/// let controller = ManagedObjectController(fetchRequest: request, context: main)
/// controller.onInserted = { controller, indexes in
///     for index in indexes { print("new adult:", controller.objects[index].name ?? "") }
/// }
/// controller.onDeleted = { _, indexes in print("left at old indexes", Array(indexes)) }
/// try main.performAndWait { try controller.performFetch() }
/// // Saves of private contexts, of other processes (through the change log) and
/// // deleteAll now reach the callbacks, on the main context's queue.
/// ```
///
/// **Membership is decided by the database.** After each change set the controller asks
/// which of the changed rows match the request's predicate *now*, with one statement for
/// all controllers of that entity on the context (none when no inserted row and no
/// changed attribute can affect the predicate), and places the matching objects by the
/// request's sort descriptors. Objects that stop matching leave, objects that start
/// matching enter at their sorted index, objects whose sort key changed move. Deleted
/// objects always leave. Unsaved changes of the context count as in a fetch when the
/// request's `includesPendingChanges` is `true` (evaluated in memory at the next fetch or
/// change set); with `false` the stored values decide.
///
/// **Where changes come from.** The controller listens to its context's saves and merges:
/// on a `ContextManager`'s main context these are the saves of private contexts,
/// `deleteAll`, and every other process's saves (the change log and listener; after a
/// listener reconnect the catch-up produces the same callbacks). A controller on a
/// private context sees that context's own saves only.
///
/// **Nothing before `performFetch()`.** A controller reports changes only once it has
/// fetched, as Core Data's fetched results controller does (SQKDataKit's controller
/// follows saves from its creation): saves and merges before `performFetch()` call no
/// callback, send nothing to `changes`, and leave `objects` empty. Nothing is lost: the
/// fetch reads their result and reports it as fetched, not as inserted or updated. To
/// hear every save from a point on, create the controller and call `performFetch()` in
/// one `performAndWait` on its context's queue, where no merge can come between them.
///
/// **Threads and lifetime.** Use the controller on its context's queue, like the context:
/// `performFetch()`, `objects` and the callbacks run there. Set the delegate and closures
/// before `performFetch()` (or on the queue). The controller observes until it is
/// released or `stop()`ped, or its coordinator (manager) is closed; then its `changes`
/// streams end. The delegate is held weakly; closures strongly (capture the controller
/// weakly in them, or use the controller passed in).
///
/// Predicates and sort keys through relationships (`user.name`, `ANY posts.title`) are
/// evaluated when objects of the controller's own entity change, as in Core Data: a
/// change of the related object alone does not move or filter them.
public class ManagedObjectController<T: ManagedObject>: @unchecked Sendable {
    // Sendable: confined to `context`'s queue like the context itself; `shared` (stream
    // continuations, the stopped flag) is locked.

    /// The context whose objects the controller shows.
    public let context: ManagedObjectContext
    /// The request; `nil` for a controller of given objects.
    public let fetchRequest: FetchRequest<T>?
    /// The key path whose values divide the objects into sections; it must be the key of
    /// the first sort descriptor.
    public let sectionNameKeyPath: String?
    /// Change sets that touch more objects than this are flagged `isLargeChange` (a list
    /// view should reload rather than animate each change). 100 by default.
    public var largeChangeThreshold = 100
    /// Told about fetches and changes before the closures; held weakly.
    public weak var delegate: (any ManagedObjectControllerDelegate<T>)?
    /// Called after `performFetch()` with every index of the objects.
    public var onFetched: ((ManagedObjectController<T>, IndexSet) -> Void)?
    /// Called with the new indexes of saved objects that stayed.
    public var onUpdated: ((ManagedObjectController<T>, IndexSet) -> Void)?
    /// Called with the new indexes of objects that entered.
    public var onInserted: ((ManagedObjectController<T>, IndexSet) -> Void)?
    /// Called with the old indexes of objects that left.
    public var onDeleted: ((ManagedObjectController<T>, IndexSet) -> Void)?
    /// Called with each whole change set (moves, sections, the large-change flag), after
    /// the calls above.
    public var onChange: ((ManagedObjectController<T>, ControllerChanges) -> Void)?
    /// Called when asking the database about a change set failed.
    public var onError: ((ManagedObjectController<T>, any Error) -> Void)?
    /// Shows only the objects it returns `true` for (SQKDataKit's
    /// `filterReturnedObjectsBlock`): applied in memory, on the context's queue, to what
    /// the fetch returns and to every object a change set would bring in or keep. For
    /// what a predicate cannot say; set it before `performFetch()`. With a `fetchLimit`
    /// the window is the fetch's, so fewer objects than the limit may show.
    ///
    /// ```swift
    /// controller.filter = { user in user.name?.unicodeScalars.first?.properties.isUppercase == true }
    /// ```
    public var filter: ((T) -> Bool)?

    var members = OrderedMembers<T>()
    var order = ControllerSortOrder.given
    var sectionList: [ControllerSection] = []
    var isFetched = false
    var window = ControllerWindow()
    /// Members with temporary IDs (unsaved objects shown because of pending changes).
    var temporaryIDs: Set<ObjectID> = []
    /// The limit a paging controller fetches with instead of the request's.
    var pageLimit: Int?
    /// The keys whose change can change membership: the predicate's first components.
    let predicateKeys: Set<String>
    /// The keys whose change can move an object into or out of a window: the sort keys'
    /// first components when the request has a limit or offset or the controller pages.
    let windowKeys: Set<String>
    let givenObjects: [T]?
    let entityForMembership: EntityDescription?
    let shared = ControllerShared()
    private let hub: ControllerHub
    private var clientID = -1

    /// Creates a controller of the objects a request describes in a context (usually a
    /// manager's main context). Nothing is fetched, and no change reported, before
    /// `performFetch()`.
    ///
    /// - Parameters:
    ///   - fetchRequest: which objects, in which order.
    ///   - context: the context whose objects are shown (usually the main context).
    ///   - sectionNameKeyPath: divides the objects into sections by this key path's
    ///     value; it must be the first sort descriptor's key.
    public convenience init(fetchRequest: FetchRequest<T>, context: ManagedObjectContext, sectionNameKeyPath: String? = nil) {
        self.init(fetchRequest: fetchRequest, context: context, sectionNameKeyPath: sectionNameKeyPath, pageSize: nil)
    }

    /// Creates a controller of a request; with `pageSize`, of a window that starts with
    /// one page (see `PagingManagedObjectController`).
    init(fetchRequest: FetchRequest<T>, context: ManagedObjectContext, sectionNameKeyPath: String?, pageSize: Int?) {
        self.context = context
        self.fetchRequest = fetchRequest
        self.sectionNameKeyPath = sectionNameKeyPath
        self.givenObjects = nil
        self.entityForMembership = context.coordinator.model.entity(for: T.self)
        self.pageLimit = pageSize
        self.predicateKeys = fetchRequest.predicate.map(Self.firstKeys) ?? []
        let windowed = pageSize != nil || fetchRequest.fetchLimit != nil || fetchRequest.fetchOffset > 0
        self.windowKeys = windowed
            ? Set(fetchRequest.sortDescriptors.compactMap { $0.key.split(separator: ".").first.map(String.init) }) : []
        self.hub = ControllerHub.hub(for: context)
        clientID = hub.add(self)
        if context.coordinator.isClosed { shared.stop() }
    }

    /// Creates a controller of given objects, in the order given (SQKDataKit's
    /// `initWithManagedObjects:`): it reports their saves as updates and their
    /// deletions; nothing enters.
    ///
    /// For example:
    ///
    /// ```swift
    /// let controller = try ManagedObjectController(objects: [ada, grace])
    /// controller.onDeleted = { _, indexes in print("gone:", Array(indexes)) }
    /// try context.performAndWait { try controller.performFetch() }
    /// ```
    ///
    /// - Throws: `ManagedObjectControllerError.noObjects` for no objects, or
    ///   `.objectOutsideContext` when they do not all belong to one context.
    public convenience init(objects: [T]) throws {
        guard let context = objects.first?.managedObjectContext else {
            if let first = objects.first { throw ManagedObjectControllerError.objectOutsideContext(first.objectID) }
            throw ManagedObjectControllerError.noObjects
        }
        try self.init(objects: objects, context: context)
    }

    /// Creates a controller of given objects of a context (empty allowed).
    ///
    /// - Throws: `ManagedObjectControllerError.objectOutsideContext` for an object of
    ///   another context.
    public init(objects: [T], context: ManagedObjectContext) throws {
        if let stranger = objects.first(where: { $0.managedObjectContext !== context }) {
            throw ManagedObjectControllerError.objectOutsideContext(stranger.objectID)
        }
        self.context = context
        self.fetchRequest = nil
        self.sectionNameKeyPath = nil
        self.givenObjects = objects
        self.entityForMembership = nil
        self.predicateKeys = []
        self.windowKeys = []
        self.hub = ControllerHub.hub(for: context)
        clientID = hub.add(self)
        if context.coordinator.isClosed { shared.stop() }
    }

    deinit {
        hub.remove(clientID)
        shared.stop()
    }

    // MARK: - Reading

    /// The objects, ordered by the request's sort descriptors (or as given). Empty before
    /// `performFetch()`.
    public var objects: [T] {
        context.assertOnQueue()
        return members.elements
    }

    /// The sections when `sectionNameKeyPath` is set (one run of `objects` each), else
    /// one section named `""` holding every object (none when there are no objects).
    public var sections: [ControllerSection] {
        context.assertOnQueue()
        return sectionList
    }

    /// The object at a section and item; `nil` for an index path outside `sections`.
    public func object(at indexPath: ControllerIndexPath) -> T? {
        context.assertOnQueue()
        guard sectionList.indices.contains(indexPath.section),
            sectionList[indexPath.section].range.indices.contains(indexPath.item)
        else { return nil }
        return members.elements[sectionList[indexPath.section].range.lowerBound + indexPath.item]
    }

    /// The section and item of the object at an index of `objects`.
    public func indexPath(forObjectAt index: Int) -> ControllerIndexPath {
        context.assertOnQueue()
        return sectionList.indexPath(of: index)
    }

    /// The index of an object in `objects`, if the controller shows it (a binary search).
    public func index(of object: T) -> Int? {
        context.assertOnQueue()
        guard let index = members.index(of: object.objectID), members.elements[index] === object else { return nil }
        return index
    }

    /// Whether the controller stopped observing (`stop()`, or its coordinator closed).
    public var isStopped: Bool { shared.isStopped }

    /// Every later change set (fetches included), as an async sequence; it ends when the
    /// controller stops or is released.
    ///
    /// For example:
    ///
    /// ```swift
    /// for await changes in controller.changes {
    ///     print("\(changes.inserted.count) in, \(changes.deleted.count) out")
    /// }
    /// ```
    public var changes: AsyncStream<ControllerChanges> { shared.makeStream() }

    /// Stops observing: no more callbacks, the `changes` streams end, and
    /// `performFetch()` throws `ManagedObjectControllerError.stopped`. The objects stay
    /// as they were.
    public func stop() {
        hub.remove(clientID)
        shared.stop()
    }

    // MARK: - Fetching

    /// Fetches the objects (as `context.fetch(request)` would, pending changes included
    /// when the request says so), replaces `objects` and reports them as fetched.
    ///
    /// With a `fetchLimit` or `fetchOffset` the controller keeps the window between the
    /// first and the last object fetched: objects that sort inside it enter, the window
    /// is not refilled when objects leave; fetch again to re-read it.
    ///
    /// Not over a child context (`ManagedObjectContext.newChildContext(name:)`): a
    /// controller follows its context's saves and merges, which a child's saves (into its
    /// parent) and the store do not share. Put the controller on the root context.
    ///
    /// - Throws: `ManagedObjectControllerError.stopped`, `.sectionKeyPathNotSorted`,
    ///   `ChildContextError.unsupported` over a child context, or what `fetch` throws
    ///   (`FetchPredicateError`, `PostgresError`, …).
    public func performFetch() throws {
        context.assertOnQueue()
        try context.refuseInChild(
            "ManagedObjectController.performFetch()",
            advice: "a controller follows the saves of the store and merges into its context; "
                + "put it on the root context (the main context, usually)")
        guard !shared.isStopped, !context.coordinator.isClosed else { throw ManagedObjectControllerError.stopped }
        let entries: [OrderedMembers<T>.Entry]
        if let givenObjects {
            order = .given
            entries = givenObjects.enumerated().compactMap { position, object in
                guard !object.isMissingFromStore, object.managedObjectContext === context else { return nil }
                return .init(id: object.objectID, element: object, key: ControllerSortKey.position(position))
            }
            window = ControllerWindow()
        } else {
            let (fetched, window) = try context.coordinator.tracing.withSpan(
                PGDataKitTracing.refresh, table: T.tableName, entity: T.entityName
            ) { span in
                span?.set([PGDataKitTracing.controllers: .int64(1)])
                return try fetchWindow()
            }
            entries = fetched.map { .init(id: $0.objectID, element: $0, key: sortKey(for: $0)) }
            self.window = window
        }
        members = OrderedMembers()
        members.reset(entries)
        temporaryIDs = Set(members.elements.map(\.objectID).filter(\.isTemporaryID))
        sectionList = computeSections()
        isFetched = true
        var changes = ControllerChanges(kind: .fetched)
        changes.fetched = IndexSet(integersIn: 0..<members.count)
        changes.insertedSections = IndexSet(integersIn: 0..<sectionList.count)
        changes.objectCount = members.count
        changes.isLargeChange = members.count > largeChangeThreshold
        deliver(changes)
    }

    /// Fetches the request's objects (with `pageLimit` when paging), resolves the order
    /// and returns the objects and the window they span.
    func fetchWindow() throws -> ([T], ControllerWindow) {
        guard var request = fetchRequest else { return ([], ControllerWindow()) }
        let entity = try context.entityDescription(for: T.self)
        let order = try ControllerSortOrder(request.sortDescriptors, entity: entity, model: context.coordinator.model)
        if let sectionNameKeyPath {
            let first = request.sortDescriptors.first
            guard first?.key == sectionNameKeyPath, first?.caseInsensitive == false else {
                throw ManagedObjectControllerError.sectionKeyPathNotSorted(
                    sectionNameKeyPath: sectionNameKeyPath, firstSortKey: first?.key)
            }
        }
        if let pageLimit { request.fetchLimit = pageLimit }
        let fetched = try context.fetch(request)
        try context.prefetch(order.relationshipPaths, for: fetched, entity: entity)
        self.order = order
        var window = ControllerWindow()
        if let limit = request.fetchLimit, fetched.count >= limit {
            if let last = fetched.last { window.upper = sortKey(for: last) } else { window.isEmpty = true }
        }
        if request.fetchOffset > 0 {
            if let first = fetched.first { window.lower = sortKey(for: first) } else { window.isEmpty = true }
        }
        guard let filter else { return (fetched, window) }
        return (fetched.filter(filter), window)
    }

    /// Deletes every object the controller shows from its context (SQKDataKit's
    /// `deleteObjects`); the rows go at the context's next save, and the objects leave
    /// the controller with the change set of the deletion.
    ///
    /// - Returns: how many objects were deleted.
    @discardableResult
    public func deleteObjects() -> Int {
        context.assertOnQueue()
        let shown = members.elements
        for object in shown { context.delete(object) }
        return shown.count
    }

    /// Where an object sorts: by its values in the context, or by its stored values when
    /// the request leaves pending changes out and the object has some.
    func sortKey(for object: T) -> ControllerSortKey {
        let committed = fetchRequest.map { !$0.includesPendingChanges } == true && context.hasPendingChanges(object)
        return order.key(for: object, committed: committed)
    }

    /// The first key-path components a predicate reads (attributes and relationships of
    /// the entity), found without recursion.
    static func firstKeys(of predicate: FetchPredicate) -> Set<String> {
        var keys: Set<String> = []
        var pending = [predicate]
        func add(_ expression: FetchPredicate.Expression) {
            var expressions = [expression]
            while let next = expressions.popLast() {
                switch next {
                case .keyPath(let path), .count(let path):
                    if let first = path.components.first { keys.insert(first) }
                case .list(let items): expressions.append(contentsOf: items)
                case .aggregate(_, let collection, _):
                    if let first = collection.components.first { keys.insert(first) }
                case .subquery(let subquery):
                    if let first = subquery.collection.components.first { keys.insert(first) }
                case .value, .variable: break
                }
            }
        }
        while let next = pending.popLast() {
            switch next.kind {
            case .constant: break
            case .not(let inner): pending.append(inner)
            case .and(let parts), .or(let parts): pending.append(contentsOf: parts)
            case .comparison(let comparison):
                add(comparison.left)
                add(comparison.right)
            }
        }
        return keys
    }

    // MARK: - Sections

    func computeSections() -> [ControllerSection] {
        guard !members.elements.isEmpty else { return [] }
        guard sectionNameKeyPath != nil else { return [ControllerSection(name: "", range: 0..<members.count)] }
        var sections: [ControllerSection] = []
        var start = 0
        let order = self.order
        while start < members.count {
            let end = members.endOfRun(from: start, sameGroup: ControllerSortKey.sameFirstTerm)
            sections.append(ControllerSection(name: order.sectionName(of: members.elements[start]), range: start..<end))
            start = end
        }
        return sections
    }

    // MARK: - Delivering

    /// Calls the delegate, then the closures, then feeds the streams.
    func deliver(_ changes: ControllerChanges) {
        if changes.kind == .fetched {
            delegate?.controller(self, didFetchObjectsAt: changes.fetched)
            onFetched?(self, changes.fetched)
        }
        if !changes.deleted.isEmpty {
            delegate?.controller(self, didDeleteObjectsAt: changes.deleted)
            onDeleted?(self, changes.deleted)
        }
        if !changes.inserted.isEmpty {
            delegate?.controller(self, didInsertObjectsAt: changes.inserted)
            onInserted?(self, changes.inserted)
        }
        if !changes.updated.isEmpty {
            delegate?.controller(self, didUpdateObjectsAt: changes.updated)
            onUpdated?(self, changes.updated)
        }
        delegate?.controller(self, didChange: changes)
        onChange?(self, changes)
        shared.yield(changes)
    }

    func deliver(_ error: any Error) {
        delegate?.controller(self, didFailWith: error)
        onError?(self, error)
    }
}

/// The part of a sort order a controller with a fetch limit or offset shows: keys from
/// `lower` to `upper` (inclusive; unbounded where `nil`).
struct ControllerWindow {
    var lower: ControllerSortKey?
    var upper: ControllerSortKey?
    /// Nothing fits (the fetch found no object at its offset, or the limit is 0).
    var isEmpty = false

    func contains(_ key: ControllerSortKey) -> Bool {
        if isEmpty { return false }
        if let lower, ControllerSortKey.compare(lower, key) > 0 { return false }
        if let upper, ControllerSortKey.compare(key, upper) > 0 { return false }
        return true
    }
}

/// A controller's state shared across threads: the stopped flag and stream
/// continuations.
final class ControllerShared: @unchecked Sendable {
    // Safe: every access holds `lock`.
    private let lock = NSLock()
    private var stopped = false
    private var nextID = 0
    private var continuations: [Int: AsyncStream<ControllerChanges>.Continuation] = [:]

    var isStopped: Bool { lock.withLock { stopped } }

    func makeStream() -> AsyncStream<ControllerChanges> {
        let (stream, continuation) = AsyncStream.makeStream(of: ControllerChanges.self)
        let id = lock.withLock { () -> Int? in
            guard !stopped else { return nil }
            let id = nextID
            nextID += 1
            continuations[id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.lock.withLock { self?.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ changes: ControllerChanges) {
        let targets = lock.withLock { Array(continuations.values) }
        for continuation in targets { continuation.yield(changes) }
    }

    /// Marks the controller stopped and ends its streams.
    func stop() {
        let targets = lock.withLock { () -> [AsyncStream<ControllerChanges>.Continuation] in
            stopped = true
            defer { continuations.removeAll() }
            return Array(continuations.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
