/// What an import call changed in a context, so that a failing call leaves the context
/// as it was: the objects it inserted and the previous state of the objects it changed.
/// Changes a caller's closure makes to other objects are not tracked.
final class ImportUndo {
    private struct Remembered {
        let object: ManagedObject
        let checkpoint: ObjectStorage.Checkpoint
        let wasChanged: Bool
    }

    // Each of these is read or changed once or twice per imported record. Release builds
    // leave out their runtime exclusivity checks (callgrind: about 80 instructions an
    // access): each access is one append, lookup or insertion, calling out to nothing
    // (a remembered state is made before it is stored); debug builds keep the checks.
    #if DEBUG
    /// The objects the import inserted.
    private(set) var inserted: [ManagedObject] = []
    /// Objects the import fetched into a context that held none of them: their committed
    /// values are their state before the import.
    private var fetched: [ManagedObject] = []
    /// The state of existing objects before the import changed them.
    private var remembered: [ObjectIdentifier: Remembered] = [:]
    /// The context's unsaved inserts from before the call, noted when the import keeps
    /// existing objects: to it they exist already, while its own inserts take later
    /// records of their keys.
    private var insertedBefore: Set<ObjectIdentifier> = []
    #else
    // Unsafe: appended to, read or emptied whole; no access overlaps another.
    @exclusivity(unchecked) private(set) var inserted: [ManagedObject] = []
    // Unsafe: as `inserted`.
    @exclusivity(unchecked) private var fetched: [ManagedObject] = []
    // Unsafe: looked up or given one state at a time; no access overlaps another.
    @exclusivity(unchecked) private var remembered: [ObjectIdentifier: Remembered] = [:]
    // Unsafe: filled once, then looked up; no access overlaps another.
    @exclusivity(unchecked) private var insertedBefore: Set<ObjectIdentifier> = []
    #endif
    /// Whether anything is recorded: not where the whole context is rolled back instead
    /// (an import operation's own context).
    private let tracks: Bool

    init(tracks: Bool = true) { self.tracks = tracks }

    /// Notes the context's unsaved inserts of an entity as they are before the call
    /// (recorded also where nothing else is).
    func noteInsertedBefore(_ entity: EntityDescription, in context: ManagedObjectContext) {
        for object in context.insertedSet where object.entity.name == entity.name {
            insertedBefore.insert(ObjectIdentifier(object))
        }
    }

    /// Whether `object` is an unsaved insert of this call: inserted in the context, and
    /// not before the call (as `noteInsertedBefore(_:in:)` saw it).
    func isInsertedByCall(_ object: ManagedObject, in context: ManagedObjectContext) -> Bool {
        context.insertedSet.contains(object) && !insertedBefore.contains(ObjectIdentifier(object))
    }

    /// Makes room for `count` more inserted objects (a batch's new keys).
    func reserveInserted(_ count: Int) {
        if tracks { inserted.reserveCapacity(inserted.count + count) }
    }

    /// Notes an object the import inserted.
    func noteInserted(_ object: ManagedObject) {
        if tracks { inserted.append(object) }
    }

    /// Notes an object the import registered by fetching it (it was not in the context
    /// before): undone by putting its committed values back, so nothing is copied now.
    func noteFetched(_ object: ManagedObject) {
        if tracks { fetched.append(object) }
    }

    /// Notes the state of an existing object before the import changes it (once).
    func remember(_ object: ManagedObject, in context: ManagedObjectContext) {
        guard tracks else { return }
        let id = ObjectIdentifier(object)
        guard remembered[id] == nil else { return }
        object.prepareStorage()
        remembered[id] = Remembered(
            object: object, checkpoint: object.storage.checkpoint(), wasChanged: context.changedSet.contains(object))
    }

    /// Puts the context back: changed objects get their values back, then inserted
    /// objects leave it. (In this order: existing objects no longer point at the inserted
    /// ones when those go, so no delete rule reaches them.) The context's undo manager
    /// records none of it.
    func revert(in context: ManagedObjectContext) {
        guard let undoManager = context.undoManager else { return revertUnrecorded(in: context) }
        undoManager.withoutRecording { revertUnrecorded(in: context) }
    }

    private func revertUnrecorded(in context: ManagedObjectContext) {
        for entry in remembered.values {
            entry.object.restore(entry.checkpoint)
            if !entry.wasChanged { context.bookkeeping.pending.remove(entry.object, from: .changed) }
        }
        // After the remembered ones: an object fetched by this call and remembered by a
        // later batch of it ends at its committed values.
        for object in fetched where object.managedObjectContext === context {
            context.revert(object)
            context.bookkeeping.pending.remove(object, from: .changed)
        }
        for object in inserted.reversed() where object.managedObjectContext === context {
            context.delete(object)
        }
        inserted.removeAll()
        fetched.removeAll()
        remembered.removeAll()
    }
}
