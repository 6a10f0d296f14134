/// One object's state as an undo manager records it before a change and puts it back:
/// the storage's checkpoint (values, to-one references, many-to-many changes, deletion
/// mark), whether the context held the object and under which ID, and its kinds of
/// pending change.
struct ObjectUndoState {
    /// Values, references, many-to-many changes and the deletion mark.
    let checkpoint: ObjectCheckpoint
    /// The object's ID (an insert gives it a temporary one; undoing the insert takes it
    /// back, redoing it puts it back).
    let objectID: ObjectID?
    /// Whether the object was registered in the context.
    let isRegistered: Bool
    /// Its kinds of pending change in the context (empty when not registered).
    let membership: PendingMembership
}
