import Foundation

/// A controller over a growing window of a sorted result (Vokoder's paging fetched
/// results): `performFetch()` loads the first `pageSize` objects, each `loadNextPage()`
/// grows `fetchLimit` by `pageSize` and reports the new objects as inserted. Saves and
/// merges reach it with the same callbacks as `ManagedObjectController`: objects that
/// sort inside the loaded window enter, objects that leave are not replaced until the
/// next page is loaded.
///
/// For example:
///
/// ```swift
/// let request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("name")])
/// let pages = try PagingManagedObjectController(fetchRequest: request, context: main, pageSize: 50)
/// pages.onInserted = { controller, indexes in print("rows", Array(indexes)) }
/// try main.performAndWait {
///     try pages.performFetch()      // objects 0..<50
///     if pages.hasMorePages { try pages.loadNextPage() }   // inserted 50..<100
/// }
/// ```
public final class PagingManagedObjectController<T: ManagedObject>: ManagedObjectController<T>, @unchecked Sendable {
    // Sendable: as its superclass, confined to the context's queue.

    /// How many objects each page adds.
    public let pageSize: Int

    /// Creates a paging controller; the request's own `fetchLimit` is replaced by the
    /// window's (its `fetchOffset` applies).
    ///
    /// - Throws: `ManagedObjectControllerError.invalidPageSize` for a size below 1.
    public init(
        fetchRequest: FetchRequest<T>, context: ManagedObjectContext, pageSize: Int, sectionNameKeyPath: String? = nil
    ) throws {
        guard pageSize >= 1 else { throw ManagedObjectControllerError.invalidPageSize(pageSize) }
        self.pageSize = pageSize
        super.init(fetchRequest: fetchRequest, context: context, sectionNameKeyPath: sectionNameKeyPath, pageSize: pageSize)
    }

    /// The window's limit: `pageSize` after `performFetch()`, plus `pageSize` per
    /// `loadNextPage()`.
    public var fetchLimit: Int {
        context.assertOnQueue()
        return pageLimit ?? pageSize
    }

    /// Whether the last load filled its limit, so more objects may follow.
    public var hasMorePages: Bool {
        context.assertOnQueue()
        return window.upper != nil
    }

    /// Loads the first page (`fetchLimit` back to `pageSize`) and reports it as fetched.
    ///
    /// - Throws: what `ManagedObjectController.performFetch()` throws.
    public override func performFetch() throws {
        context.assertOnQueue()
        pageLimit = pageSize
        try super.performFetch()
    }

    /// Grows `fetchLimit` by `pageSize`, reads the window again (one query) and reports
    /// the difference — normally the next page, as inserted at the end — through the
    /// usual callbacks. Before the first `performFetch()` it does that instead.
    ///
    /// - Throws: `ManagedObjectControllerError.stopped`, or what a fetch throws; the
    ///   window stays as it was then.
    public func loadNextPage() throws {
        context.assertOnQueue()
        guard !isStopped, !context.coordinator.isClosed else { throw ManagedObjectControllerError.stopped }
        guard isFetched else { return try performFetch() }
        let previous = pageLimit ?? pageSize
        let (limit, overflow) = previous.addingReportingOverflow(pageSize)
        pageLimit = overflow ? Int.max : limit
        let oldSections = sectionList
        let oldCount = members.count
        let fetched: [T]
        do {
            (fetched, window) = try fetchWindow()
        } catch {
            pageLimit = previous
            throw error
        }
        let wanted = Set(fetched.map(\.objectID))
        let leaving = members.elements.map(\.objectID).filter { !wanted.contains($0) }
        var staying: [OrderedMembers<T>.Entry] = []
        var entering: [OrderedMembers<T>.Entry] = []
        for object in fetched {
            let key = sortKey(for: object)
            if let member = members.member(object.objectID) {
                if member.key != key || member.element !== object {
                    staying.append(.init(id: object.objectID, element: object, key: key))
                }
            } else {
                entering.append(.init(id: object.objectID, element: object, key: key))
                if object.objectID.isTemporaryID { temporaryIDs.insert(object.objectID) }
            }
        }
        let diff = members.apply(leaving: leaving, staying: staying, entering: entering)
        guard !diff.isEmpty else { return }
        var changes = changeSet(from: diff, oldSections: oldSections, oldCount: oldCount)
        changes.deletedObjectIDs = members.lastDeleted
        deliver(changes)
    }
}
