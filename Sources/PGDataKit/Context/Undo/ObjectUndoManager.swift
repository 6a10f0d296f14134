/// Undo and redo of a context's unsaved changes: Core Data's `undoManager`, as a type of
/// its own (not Foundation's `UndoManager`, which a server has no run loop to group by).
///
/// A context has none unless one is set, as in Core Data on macOS and Linux:
///
/// ```swift
/// context.undoManager = ObjectUndoManager()
/// user.name = "Grace"
/// context.undoManager?.undo()    // user.name is "Ada" again
/// ```
///
/// What it undoes: attribute values, to-one and to-many relationships (both sides of
/// each pair, as setting them changed both), inserts and deletes (with what the delete
/// rules did), so that `insertedObjects`, `updatedObjects`, `deletedObjects`,
/// `hasChanges` and each object's `changedValues()` are again what they were. `redo()`
/// puts the undone changes back; a new change after an undo forgets what could be
/// redone.
///
/// **Groups.** Outside an explicit group, each call that changes the object graph is one
/// group of its own: setting an attribute or a relationship (with the inverse and a
/// one-to-one partner it releases), `setValue(_:forKey:)`, `insert(_:)`, `delete(_:)`
/// (with its cascades and nullified relationships). `beginUndoGrouping()` and
/// `endUndoGrouping()`, or `group { }`, make every change between them one group, which
/// one `undo()` takes back; nested groups belong to the outermost. (Foundation groups
/// by run-loop turn; a server's queue has none.)
///
/// **What clears it.** A successful `save()` (also a child's save into its parent, which
/// clears the parent's too), `rollback()` and `reset()` remove every group. Merges,
/// refreshes and batch updates change committed values and are not recorded: an undo
/// afterwards puts back the values its changes replaced, which are then unsaved
/// changes if they differ from the new committed ones; an object deleted elsewhere stays
/// deleted. An import records what its calls change like any other calls; wrap it in
/// `group { }` to undo it as one.
///
/// A manager serves one context, on that context's queue (like its objects). Setting it
/// on a second context while the first holds it stops the program, as inserting an
/// object into a second context does.
public final class ObjectUndoManager {
    /// The context it records (the context holds the manager).
    private(set) weak var context: ManagedObjectContext?
    /// Closed groups, oldest first.
    private var undoStack: [UndoGroup] = []
    /// Undone groups, the next to redo last.
    private var redoStack: [UndoGroup] = []
    /// The group being recorded while `groupingLevel` is above zero.
    private var openGroup = UndoGroup()
    /// Open groups: the caller's and the library's own around a call that changes several
    /// objects.
    private var depth = 0
    /// Whether an undo or redo is putting objects back (nothing is recorded meanwhile).
    private var isRestoring = false

    /// The most groups remembered; the oldest go first when there would be more. `0` (the
    /// default), or less, for no limit, as Foundation's `levelsOfUndo`.
    public var levelsOfUndo: Int {
        didSet { dropOldest() }
    }

    /// Creates a manager; set it as a context's `undoManager`.
    ///
    /// - Parameter levelsOfUndo: the most groups remembered (`0`: no limit).
    public init(levelsOfUndo: Int = 0) {
        self.levelsOfUndo = levelsOfUndo
    }

    /// Whether there is a group to undo (no group is open).
    public var canUndo: Bool {
        assertOnQueue()
        return depth == 0 && !undoStack.isEmpty
    }

    /// Whether there is an undone group to redo (no group is open).
    public var canRedo: Bool {
        assertOnQueue()
        return depth == 0 && !redoStack.isEmpty
    }

    /// How many groups are open (`beginUndoGrouping()` calls not ended yet).
    public var groupingLevel: Int {
        assertOnQueue()
        return depth
    }

    /// Opens a group: every change until the matching `endUndoGrouping()` is undone as one.
    public func beginUndoGrouping() {
        assertOnQueue()
        depth += 1
    }

    /// Closes the group `beginUndoGrouping()` opened; the outermost one's changes become
    /// one group to undo. Without an open group it does nothing.
    public func endUndoGrouping() {
        assertOnQueue()
        guard depth > 0 else { return }
        depth -= 1
        guard depth == 0, !openGroup.isEmpty else { return }
        push(openGroup)
        openGroup = UndoGroup()
    }

    /// Runs `body` in a group: its changes are undone as one (the group closes also
    /// when `body` throws).
    ///
    /// For example:
    ///
    /// ```swift
    /// context.undoManager?.group {
    ///     user.name = "Grace"
    ///     user.age = 45
    /// }
    /// ```
    @discardableResult
    public func group<T>(_ body: () throws -> T) rethrows -> T {
        beginUndoGrouping()
        defer { endUndoGrouping() }
        return try body()
    }

    /// Takes back the last group of changes.
    ///
    /// - Returns: `false`, changing nothing, when there is nothing to undo or a group is
    ///   open.
    @discardableResult
    public func undo() -> Bool {
        assertOnQueue()
        guard depth == 0, let context, var group = undoStack.popLast() else { return false }
        isRestoring = true
        defer { isRestoring = false }
        group.undo(in: context)
        redoStack.append(group)
        return true
    }

    /// Puts back the last group `undo()` took back.
    ///
    /// - Returns: `false`, changing nothing, when there is nothing to redo or a group is
    ///   open.
    @discardableResult
    public func redo() -> Bool {
        assertOnQueue()
        guard depth == 0, let context, let group = redoStack.popLast() else { return false }
        isRestoring = true
        defer { isRestoring = false }
        group.redo(in: context)
        undoStack.append(group)
        return true
    }

    /// Forgets every group to undo and to redo (what a save, a rollback and a reset do).
    /// Open groups stay open, and record what changes from now on.
    public func removeAllActions() {
        assertOnQueue()
        clear()
    }

    private func clear() {
        undoStack.removeAll()
        redoStack.removeAll()
        openGroup = UndoGroup()
    }

    // MARK: - Recording (the library's side)

    /// Attaches the manager to the context that sets it as its `undoManager`.
    func attach(to context: ManagedObjectContext) {
        precondition(
            self.context == nil || self.context === context,
            "this ObjectUndoManager is the undo manager of another context; give each context one of its own")
        self.context = context
    }

    /// Detaches the manager from its context, forgetting every group.
    func detach() {
        clear()
        depth = 0
        context = nil
    }

    /// Records `object`'s state before a change, once per group: in the open group, or as
    /// a group of its own when none is open. A new change forgets what could be redone.
    func willChange(_ object: ManagedObject) {
        guard !isRestoring, let context else { return }
        if !redoStack.isEmpty { redoStack.removeAll() }
        if depth > 0 {
            openGroup.record(object, in: context)
            return
        }
        var group = UndoGroup()
        group.record(object, in: context)
        push(group)
    }

    /// Runs `body` without recording what it changes (an import putting back what its
    /// failed call changed: the groups the call recorded then put back what is there).
    func withoutRecording<T>(_ body: () throws -> T) rethrows -> T {
        let wasRestoring = isRestoring
        isRestoring = true
        defer { isRestoring = wasRestoring }
        return try body()
    }

    /// Opens the library's own group around a call that may change several objects
    /// (`endCall()` closes it).
    func beginCall() {
        if !isRestoring { beginUndoGrouping() }
    }

    /// Closes the group `beginCall()` opened. `discarding` (a call that failed and put
    /// back what it changed) forgets the group when it is the outermost one: there is
    /// nothing to undo.
    func endCall(discarding: Bool = false) {
        guard !isRestoring else { return }
        if discarding && depth == 1 {
            depth = 0
            openGroup = UndoGroup()
            return
        }
        endUndoGrouping()
    }

    private func push(_ group: UndoGroup) {
        undoStack.append(group)
        dropOldest()
    }

    private func dropOldest() {
        guard levelsOfUndo > 0 else { return }
        if undoStack.count > levelsOfUndo { undoStack.removeFirst(undoStack.count - levelsOfUndo) }
        if redoStack.count > levelsOfUndo { redoStack.removeFirst(redoStack.count - levelsOfUndo) }
    }

    private func assertOnQueue() {
        context?.assertOnQueue()
    }
}

/// One group of changes to undo: each object's state before the group first changed it,
/// and, once undone, its state before the undo (what a redo puts back).
struct UndoGroup {
    private var entries: [(object: ManagedObject, before: ObjectUndoState, after: ObjectUndoState?)] = []
    private var recorded: Set<ObjectIdentifier> = []

    /// Whether nothing was recorded.
    var isEmpty: Bool { entries.isEmpty }

    /// Records an object's state, unless this group holds it already.
    mutating func record(_ object: ManagedObject, in context: ManagedObjectContext) {
        guard recorded.insert(ObjectIdentifier(object)).inserted else { return }
        entries.append((object, context.undoState(of: object), nil))
    }

    /// Notes every object's state now, then puts back the states before the group.
    mutating func undo(in context: ManagedObjectContext) {
        for position in entries.indices {
            entries[position].after = context.undoState(of: entries[position].object)
        }
        context.restoreUndoStates(entries.map { ($0.object, $0.before) })
    }

    /// Puts back the states `undo(in:)` noted.
    func redo(in context: ManagedObjectContext) {
        context.restoreUndoStates(entries.compactMap { entry in entry.after.map { (entry.object, $0) } })
    }
}
