import Foundation
import Logging
import Synchronization

/// A scratch pad of managed objects: fetch them, change them, save the changes.
///
/// There are two kinds, as in Core Data:
///
/// - A **private** context is a database transaction. It begins one (repeatable read, so
///   all its fetches see one snapshot of the store) on its first database access and
///   holds its pooled connection until `save()`, `rollback()` or `reset()`. Make one
///   with `ContextManager.newPrivateContext()` for each unit of work.
/// - The **main** context does short reads, each on a connection borrowed for the read,
///   and is where other contexts' saves are merged. A server has no UI thread: the main
///   context runs on a serial queue of its own.
///
/// A private context can also be a **child** of another context (`newChildContext()`):
/// it reads its parent's objects, unsaved changes included, and its `save()` pushes its
/// changes into the parent instead of the database (see `parent`).
///
/// Every context is confined to its queue: use it and its objects inside
/// `perform { }` or `performAndWait { }` (debug builds stop on use from elsewhere). Pass
/// `ObjectID`s, not objects, between contexts.
///
/// For example:
///
/// ```swift
/// let context = manager.newPrivateContext()
/// try context.performAndWait {
///     let user = User(context: context)
///     user.userID = "u1"
///     user.name = "Ada"
///     try context.save()    // one transaction: inserts, updates, deletes, commit
/// }
/// ```
public final class ManagedObjectContext: @unchecked Sendable {
    // Sendable: the context is confined to `queue`; every method that touches its state
    // asserts (in debug builds) that it runs there. `perform` and `performAndWait` are
    // the ways in from other threads.
    // (Attachments, asked for from any thread, are behind their own lock.)

    /// The kind of context.
    public enum ConcurrencyType: Sendable {
        /// The long-lived context where saves are merged; short reads.
        case main
        /// A database transaction for one unit of work, or a child context (see
        /// `parent`).
        case `private`
    }

    /// The kind of context; `.private` for a child context.
    public let concurrencyType: ConcurrencyType
    /// The context a child context reads from and saves into (Core Data's
    /// `parent`); `nil` for a context of the database (main or private). A child
    /// holds its parent strongly; the parent does not know its children.
    ///
    /// For example:
    ///
    /// ```swift
    /// let child = manager.mainContext.newChildContext()
    /// child.parent === manager.mainContext    // true
    /// ```
    public let parent: ManagedObjectContext?
    /// The coordinator whose model and database the context uses.
    public let coordinator: StoreCoordinator
    /// A name for logs and debugging.
    public let name: String
    /// How a save resolves rows changed elsewhere since they were read; `.error`
    /// by default.
    public var mergePolicy: MergePolicy = .error
    /// The conflicts the last successful `save()` settled with `mergePolicy` (empty when
    /// it met none, or under `.error`, where a conflict fails the save instead). Each
    /// names the object, the versions and the snapshot, object and store values.
    ///
    /// For example, counting what a worker's policy decided:
    ///
    /// ```swift
    /// try context.save()
    /// settled += context.resolvedConflicts.count
    /// ```
    public internal(set) var resolvedConflicts: [MergeConflict] = []
    /// Whether the context manager merges this context's saves into the main context
    /// right after commit (`true` by default, as in SQKDataKit).
    public var shouldMergeOnSave = true
    /// The isolation level of a private context's transaction.
    public var isolationLevel: IsolationLevel = .repeatableRead
    /// The longest a statement of this context's transactions may run (a private
    /// context's reads, and every context's saves), beside the configuration's
    /// `lockTimeout`; `nil` (the default) leaves the server's `statement_timeout`. Set
    /// in each transaction the context begins (`set_config(…, true)`, sent with its
    /// `BEGIN`; nothing lasts in the pooled session). A statement that runs longer fails
    /// with a `PostgresError` whose `sqlState` is `.queryCanceled`, which ends the
    /// transaction as any failed statement does; the context's unsaved changes stay.
    /// The main context's reads outside a transaction run without it.
    ///
    /// For example, a request that must answer within two seconds:
    ///
    /// ```swift
    /// let context = manager.newPrivateContext()
    /// context.statementTimeout = .seconds(2)
    /// ```
    public var statementTimeout: Duration?

    let queue: DispatchQueue
    let queueKey = DispatchSpecificKey<Bool>()
    /// The weak reference every object of this context holds (replaced by `reset()`,
    /// which detaches every object at once by clearing the old one).
    private(set) var reference: ContextReference
    /// What objects deleted elsewhere hold instead: no context, but its logger.
    let detachedReference: ContextReference
    let logger: Logger

    /// The registry, pending changes and the rest of the context's bookkeeping (their
    /// one owner; see `ContextBookkeeping`).
    let bookkeeping = ContextBookkeeping()
    /// Objects inserted and not saved yet.
    var insertedSet: PendingSet { bookkeeping.pending.view(.inserted) }
    /// Objects deleted and not saved yet.
    var deletedSet: PendingSet { bookkeeping.pending.view(.deleted) }
    /// Registered objects that were changed since the last save (may have reverted).
    var changedSet: PendingSet { bookkeeping.pending.view(.changed) }
    /// A private context's open transaction and its serials (see `ContextTransaction`).
    var transaction = ContextTransaction() {
        didSet { holdsTransaction.store(transaction.isOpen, ordering: .relaxed) }
    }
    /// Whether `transaction` is open, for the async `perform` to read from any thread (a
    /// context that holds its connection needs no lease).
    let holdsTransaction = Atomic<Bool>(false)
    /// The pinned snapshot, if any (see `pinSnapshot()` and `SnapshotPin`).
    var snapshotPin: SnapshotPin? {
        didSet { if (oldValue == nil) != (snapshotPin == nil) { snapshotPinEpoch.add(1, ordering: .relaxed) } }
    }
    /// Counts pins and unpins (odd while pinned), for the layers above to read from any
    /// thread: controllers ask nothing early for merges that wait for the unpin.
    let snapshotPinEpoch = Atomic<Int>(0)
    var observers = ContextObservers()
    /// Objects of the layers above that belong to this context, one per type, held
    /// weakly (a controller hub lives while its controllers do): see `attachment(_:make:)`.
    /// (Behind `attachmentsLock`: any thread may ask.)
    private var attachments: [ObjectIdentifier: WeakAttachment] = [:]
    private let attachmentsLock = NSLock()
    /// How many child contexts of this one are alive (counted from any thread).
    let liveChildren = Atomic<Int>(0)
    /// Creates a context; usually `ContextManager` does this.
    ///
    /// - Parameters:
    ///   - concurrencyType: `.private` for a unit of work (one transaction), `.main`
    ///     for the long-lived context saves are merged into.
    ///   - coordinator: the store it reads from and saves to.
    ///   - name: a label for logs and the queue.
    ///   - logger: where the context logs; the coordinator's logger by default.
    public convenience init(
        concurrencyType: ConcurrencyType, coordinator: StoreCoordinator, name: String? = nil, logger: Logger? = nil
    ) {
        self.init(concurrencyType: concurrencyType, coordinator: coordinator, parent: nil, name: name, logger: logger)
    }

    /// Creates a context, a child of `parent` when one is given (see `newChildContext`).
    init(
        concurrencyType: ConcurrencyType, coordinator: StoreCoordinator, parent: ManagedObjectContext?,
        name: String?, logger: Logger?
    ) {
        self.concurrencyType = concurrencyType
        self.coordinator = coordinator
        self.parent = parent
        let label = name ?? (parent.map { "\($0.name).child" } ?? (concurrencyType == .main ? "main" : "private"))
        self.name = label
        self.queue = DispatchQueue(label: "pgdatakit.context.\(label)")
        let logger = logger ?? coordinator.logger
        self.logger = logger
        self.reference = ContextReference(logger: logger)
        self.detachedReference = ContextReference(logger: logger)
        queue.setSpecific(key: queueKey, value: true)
        reference.context = self
    }

    deinit {
        if let connection = transaction.connection {
            coordinator.pool.release(connection)  // rolls the open transaction back
        }
        if let connection = snapshotPin?.connection {
            coordinator.pool.release(connection)  // rolls the pinned transaction back
        }
        parent?.liveChildren.subtract(1, ordering: .relaxed)
        observers.finishAll()
    }

    // MARK: - Objects

    /// Every object registered in the context.
    public var registeredObjects: Set<ManagedObject> {
        assertOnQueue()
        return Set(bookkeeping.registeredObjects)
    }

    /// Objects inserted and not saved yet.
    public var insertedObjects: Set<ManagedObject> {
        assertOnQueue()
        return Set(insertedSet)
    }

    /// Saved objects with unsaved changes (to their rows or their many-to-many
    /// relationships).
    public var updatedObjects: Set<ManagedObject> {
        assertOnQueue()
        return Set(
            changedSet.lazy.filter {
                !self.insertedSet.contains($0) && !self.deletedSet.contains($0) && ($0.hasPersistentChangedValues || $0.hasJoinChanges)
            })
    }

    /// Objects deleted and not saved yet.
    public var deletedObjects: Set<ManagedObject> {
        assertOnQueue()
        return Set(deletedSet)
    }

    /// Whether there is anything to save.
    public var hasChanges: Bool {
        assertOnQueue()
        return hasUnsavedChanges
    }

    /// `hasChanges` without building the set of updated objects: it stops at the first
    /// change it finds.
    var hasUnsavedChanges: Bool {
        if !insertedSet.isEmpty || !deletedSet.isEmpty { return true }
        return changedSet.contains {
            !insertedSet.contains($0) && !deletedSet.contains($0) && ($0.hasPersistentChangedValues || $0.hasJoinChanges)
        }
    }

    /// Adds a new object; it gets a temporary ID and is inserted at the next save.
    public func insert(_ object: ManagedObject) {
        assertOnQueue()
        if object.managedObjectContext === self { return }
        precondition(
            object.managedObjectContext == nil,
            "\(object.objectID) belongs to another context; insert a new object instead")
        let undo = reference.undoManager
        undo?.beginCall()
        defer { undo?.endCall() }
        undo?.willChange(object)
        object.entityStorage = coordinator.model.entity(for: type(of: object)) ?? object.entity
        object.prepareStorage()
        object.managedObjectContext = self
        PendingObjects.clearStaleSlot(of: object)  // (what a context that went away left on it)
        object.storage.setRowLocation(0)
        object.objectID = ObjectID(temporaryFor: object.entity.rootEntityName)
        bookkeeping.register(object, as: object.objectID)
        bookkeeping.pending.insert(object, into: .inserted)
        // Related objects set before insertion come along.
        for case .object(let related) in object.storage.toOne where related.managedObjectContext == nil {
            insert(related)
        }
        adoptRelationshipsSetBeforeInsertion(object)
    }

    /// Inserts an object fresh from `init()` whose entity is known (imports create one
    /// per new key): what `insert(_:)` does for such an object, without looking the
    /// entity up or visiting relationships it cannot have yet.
    func insertNew(_ object: ManagedObject, entity: EntityDescription) {
        // An initialiser that set relationships brings related objects: the full path.
        guard object.storage.toOne.isEmpty, object.storage.joinMembers.isEmpty, object.managedObjectContext == nil else {
            insert(object)
            return
        }
        reference.undoManager?.willChange(object)
        object.entityStorage = entity
        if object.storage.valueCount != entity.defaultValues.count { object.storage.replaceValues(entity.defaultValueRun) }
        if !entity.relationships.isEmpty { object.prepareStorage() }
        object.contextReference = reference
        object.objectID = ObjectID(temporaryFor: entity.rootEntityName)
        bookkeeping.register(object, as: object.objectID)
        PendingObjects.clearStaleSlot(of: object)  // (what a context that went away left on it)
        object.storage.setRowLocation(0)
        bookkeeping.pending.insert(object, into: .inserted)
    }

    /// Makes room for objects about to be inserted and changed (an import's batch), so
    /// the tables are not rehashed as they grow.
    func reserveCapacity(inserting: Int, changing: Int) {
        if inserting > 0 { bookkeeping.reserveTemporaries(adding: inserting) }
        if inserting + changing > 0 { bookkeeping.pending.reserveCapacity(adding: inserting + changing) }
    }

    /// Marks an object for deletion at the next save and applies its relationships'
    /// delete rules now: cascade deletes related objects, nullify clears their
    /// references (or, for many-to-many, takes the object out of their sets), deny is
    /// checked at save. Whatever the rule, the object's join-table rows go with it.
    public func delete(_ object: ManagedObject) {
        assertOnQueue()
        guard object.managedObjectContext === self, !object.deletedFlag else { return }
        let undo = reference.undoManager
        undo?.beginCall()
        defer { undo?.endCall() }
        undo?.willChange(object)
        object.setDeleted(true)
        let wasInserted = bookkeeping.pending.remove(object, from: .inserted) != nil
        if wasInserted {
            bookkeeping.unregister(object.objectID)
        } else {
            bookkeeping.pending.insert(object, into: .deleted)
        }
        for relationship in object.entity.relationships {
            switch relationship.deleteRule {
            case .cascade:
                for related in object.relatedObjects(at: relationship.index) { delete(related) }
            case .nullify where relationship.joinTable != nil:
                leaveJoinedObjects(object, relationship: relationship)
            case .nullify where relationship.columnName == nil:
                guard let inverseName = relationship.inverseName else { continue }
                for related in object.relatedObjects(at: relationship.index) {
                    if let inverse = related.entity.relationship(named: inverseName) {
                        related.setRelatedObjects([], at: inverse.index)
                    }
                }
            case .nullify, .deny, .noAction:
                break
            }
        }
        // An unsaved object simply leaves the context.
        if wasInserted { object.managedObjectContext = nil }
    }

    /// Records a change to a registered object.
    func objectDidChange(_ object: ManagedObject) {
        guard object.contextReference === reference else { return }  // (this context's objects share it)
        if !PendingObjects.has(object, .inserted) { bookkeeping.pending.insert(object, into: .changed) }
    }

    // MARK: - Database access

    /// Runs `body` with the context's connection: a private context's transaction
    /// (begun on first use), or a connection borrowed for a main context's read.
    func withDatabase<T>(_ body: (Connection) throws -> T) throws -> T {
        // A child's reads of stored values only go through its root context, on the
        // parent's queue (a private root's transaction answers them).
        if let parent { return try parent.performAndWait { try parent.withDatabase(body) } }
        switch concurrencyType {
        case .main:
            if snapshotPin != nil { return try withPinnedConnection(body) }
            try coordinator.admitNewWork()
            return try coordinator.pool.withConnection(body)
        case .private:
            if snapshotPin != nil { try checkPinnedTransaction() }
            let connection = try transactionConnection()
            if bookkeeping.holdsRetired {
                connection.doWhileWaiting { [weak bookkeeping] in bookkeeping?.releaseRetired() }
            }
            defer {
                if bookkeeping.holdsRetired {
                    connection.doWhileWaiting(nil)
                    bookkeeping.releaseRetired()
                }
            }
            do {
                return try body(connection)
            } catch let error as PostgresError {
                // A failed statement aborts the transaction; its snapshot is gone.
                endTransaction()
                if snapshotPin != nil { throw losePinnedSnapshot(error) }
                throw error
            }
        }
    }

    /// The private context's transaction, begun if needed.
    func transactionConnection() throws -> Connection {
        if let connection = transaction.connection { return connection }
        let connection = try coordinator.beginTransaction(isolation: isolationLevel, statementTimeout: statementTimeout)
        if transaction.opened(connection, readsAtOneSnapshot: isolationLevel != .readCommitted) {
            // The serials started over: no location read 65,535 transactions ago may pass
            // for one of the new transaction's.
            for object in bookkeeping.registeredObjects { object.storage.setRowLocation(0) }
        }
        return connection
    }

    /// Ends a private context's transaction (rolling back what it did not commit) and
    /// gives the connection back.
    func endTransaction() {
        guard let connection = transaction.close() else { return }
        coordinator.rollbackAndRelease(connection)
    }

    /// Whether a private context holds an open transaction (and its snapshot).
    public var hasOpenTransaction: Bool {
        assertOnQueue()
        return transaction.isOpen
    }

    // MARK: - Rollback, reset, refresh

    /// Discards unsaved changes: inserted objects leave the context, deleted ones come
    /// back, changed ones return to their committed values. A private context also ends
    /// its transaction, so its next read sees a new snapshot (and a pinned snapshot ends
    /// with it, merging what came meanwhile; the main context's pin stays). A child context's objects
    /// return to the parent's values as the child read them; the parent is not touched.
    public func rollback() {
        assertOnQueue()
        for object in insertedSet {
            bookkeeping.unregister(object.objectID)
            object.managedObjectContext = nil
            object.setDeleted(false)
        }
        bookkeeping.pending.removeAll(.inserted)
        bookkeeping.clearKeyedInsertKeysChanged()
        for object in deletedSet { object.setDeleted(false) }
        bookkeeping.pending.removeAll(.deleted)
        for object in changedSet { revert(object) }
        bookkeeping.pending.removeAll(.changed)
        for object in bookkeeping.registeredObjects {
            object.storage.forgetLoaded()
            object.storage.forgetJoinMembers()
        }
        reference.undoManager?.removeAllActions()
        endTransaction()
        if snapshotPin != nil, concurrencyType == .private { endPinWithTransaction(call: "rollback()") }
    }

    /// Puts an object's committed values and to-one keys back (in a child context: the
    /// parent's values and references as the child read them).
    func revert(_ object: ManagedObject) {
        guard let snapshot = object.storage.snapshot else { return }
        object.storage.replaceValues(snapshot)
        for relationship in object.entity.toOneRelationships {
            let key = object.storage.snapshotKeys.count > relationship.index ? object.storage.snapshotKeys[relationship.index] : nil
            object.setReference(key.map { .key($0) } ?? .none, at: relationship.index)
        }
        for (index, id) in object.storage.snapshotTemporaryTargets ?? [:] {
            object.setReference(bookkeeping.object(for: id).map { .object($0) } ?? .none, at: index)
        }
    }

    /// Forgets every object and change, and ends a private context's transaction (and
    /// its pinned snapshot, if any; the main context's pin stays). A child
    /// context forgets its own objects and changes only; the parent is not touched.
    ///
    /// A private context holding a batch's worth of objects (up to 16,384) lets go of them
    /// while the server runs its next statement, so their deallocation overlaps the
    /// server's work (an import that resets after each batch gains a few percent); the
    /// objects are detached at once either way, and released by the next reset at the
    /// latest. Larger sets are released at once.
    public func reset() {
        assertOnQueue()
        // Every object holds the shared reference: clearing it detaches them all (and
        // their changes are recorded nowhere).
        let undoManager = reference.undoManager
        reference.context = nil
        reference.undoManager = nil
        reference = ContextReference(logger: logger)
        reference.context = self
        reference.undoManager = undoManager
        undoManager?.removeAllActions()
        // A context reset after each batch of an import refills its tables with about as
        // many objects: their room is kept, up to a bound, so memory stays flat.
        // (A child's reads run on its parent's connection: it has no statement to overlap.)
        bookkeeping.reset(retiring: concurrencyType == .private && parent == nil, keepBound: 16_384)
        endTransaction()
        if snapshotPin != nil, concurrencyType == .private { endPinWithTransaction(call: "reset()") }
    }

    /// Re-reads an object's row (Core Data's `refresh(_:mergeChanges:)`).
    ///
    /// With `mergeChanges` the object's unsaved changes are kept on top of the store's
    /// values; without, they are discarded. A private context reads within its snapshot.
    /// A child context re-reads the object from its parent instead (the parent's current
    /// values, its unsaved changes included), never from the database.
    ///
    /// - Throws: `ManagedObjectError.objectNotFound` when the row is gone (the object is
    ///   then marked deleted and leaves the context; in a child, when the parent no
    ///   longer has the object), or `PostgresError`.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) throws {
        assertOnQueue()
        guard object.managedObjectContext === self else { throw ManagedObjectError.wrongContext(object.objectID) }
        if parent != nil {
            guard !insertedSet.contains(object) else { return }
            try refreshFromParent([object], localEdits: mergeChanges ? .keep : .discard)
            if object.isMissingFromStore { throw ManagedObjectError.objectNotFound(object.objectID) }
            return
        }
        guard let key = object.objectID.primaryKey else { return }
        try refreshObjects([key: object], entity: object.entity, localEdits: mergeChanges ? .keep : .discard)
        if object.isMissingFromStore { throw ManagedObjectError.objectNotFound(object.objectID) }
    }

    // MARK: - Attachments

    /// A weakly held attachment.
    private struct WeakAttachment {
        weak var object: AnyObject?
    }

    /// The context's attachment of a type (a layer above keeps per-context state this
    /// way, such as the controllers' shared observation), made by `make` when there is
    /// none alive. The context holds it weakly: whoever uses it keeps it alive. Any thread.
    ///
    /// - Returns: the attachment, and whether it was made now.
    func attachment<Attachment: AnyObject>(
        _ type: Attachment.Type, make: () -> Attachment
    ) -> (attachment: Attachment, isNew: Bool) {
        attachmentsLock.withLock {
            let key = ObjectIdentifier(type)
            if let existing = attachments[key]?.object as? Attachment { return (existing, false) }
            let made = make()
            attachments[key] = WeakAttachment(object: made)
            return (made, true)
        }
    }

    // MARK: - Narrow reads for the layers above

    /// The registered object with this ID, if any (nothing is fetched).
    func registeredObject(for id: ObjectID) -> ManagedObject? { bookkeeping.object(for: id) }

    /// Whether any object is registered.
    var hasRegisteredObjects: Bool { bookkeeping.registeredCount > 0 }

    /// How many objects have unsaved changes of any kind.
    var pendingObjectCount: Int { bookkeeping.pending.count }

    /// Lets go of an object: it leaves the registry and the context (a batched fetch's
    /// page without unsaved changes).
    func unregister(_ object: ManagedObject) {
        bookkeeping.unregister(object.objectID)
        object.managedObjectContext = nil
    }

    /// Marks an object whose row is gone as deleted and removes it from the context.
    func forgetDeletedObject(_ object: ManagedObject) {
        object.setDeleted(true)
        object.storage.setMissingFromStore(true)
        bookkeeping.unregister(object.objectID)
        bookkeeping.pending.remove(object)
        object.contextReference = detachedReference
    }
}

/// A weak reference to a context, shared by its objects, with the context's logger.
final class ContextReference: @unchecked Sendable {
    // Sendable: `context` is set in the context's initialiser or `reset()` and cleared by
    // `reset()`, all on the context's queue, where its objects read it too.
    weak var context: ManagedObjectContext?
    let logger: Logger
    /// Counts changes of registrations, to-one references and deletion marks of the
    /// context's objects: a one-to-many members index built at another count is stale.
    var membershipGeneration = 0
    /// The context's undo manager (`ManagedObjectContext.undoManager`), here so that a
    /// change of an object finds it with one load: `nil`, the default, records nothing.
    var undoManager: ObjectUndoManager?
    /// Where the context's objects copy their values on their first write (see
    /// `ValueArena`), here so that a write finds it with one load.
    let valueArena = ValueArena()

    init(logger: Logger) { self.logger = logger }
}
