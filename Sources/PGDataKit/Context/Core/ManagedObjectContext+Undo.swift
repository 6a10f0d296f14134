/// A context's undo manager: setting it, the states it records, putting them back.
extension ManagedObjectContext {
    /// Records the context's unsaved changes for `undo()` and `redo()`; `nil` (the
    /// default) records nothing, and costs the changes nothing. Set it before the context
    /// is used, or on its queue; see `ObjectUndoManager` for what is undone and how
    /// changes group.
    ///
    /// For example:
    ///
    /// ```swift
    /// let context = manager.newPrivateContext()
    /// context.undoManager = ObjectUndoManager(levelsOfUndo: 20)
    /// ```
    public var undoManager: ObjectUndoManager? {
        get { reference.undoManager }
        set {
            guard newValue !== reference.undoManager else { return }
            newValue?.attach(to: self)
            reference.undoManager?.detach()
            reference.undoManager = newValue
        }
    }

    /// The state `restoreUndoStates(_:)` puts back: what the object holds and whether,
    /// and how, the context has it.
    func undoState(of object: ManagedObject) -> ObjectUndoState {
        let isRegistered = object.contextReference === reference
        return ObjectUndoState(
            checkpoint: object.storage.checkpoint(complete: true), objectID: object.objectIDStorage,
            isRegistered: isRegistered, membership: isRegistered ? bookkeeping.pendingMembership(of: object) : [])
    }

    /// Puts objects back in recorded states: values, references, many-to-many changes and
    /// deletion marks first, the registry as each state says; then each registered
    /// object's pending changes. An object recorded as changed stays among the changed
    /// ones, and one whose values now differ from its committed ones joins them (an
    /// undo after a merge may do that). An object whose row turned out to be gone stays
    /// as it is.
    func restoreUndoStates(_ states: [(object: ManagedObject, state: ObjectUndoState)]) {
        for (object, state) in states where !object.isMissingFromStore {
            let isRegistered = object.contextReference === reference
            if isRegistered && !state.isRegistered {
                bookkeeping.unregisterWithChanges(object)
                object.contextReference = nil
            }
            object.restore(state.checkpoint)
            if state.isRegistered && !isRegistered {
                object.objectIDStorage = state.objectID
                bookkeeping.reregister(object, as: object.objectID)
                object.contextReference = reference
            } else if !state.isRegistered {
                object.objectIDStorage = state.objectID
            }
        }
        for (object, state) in states where state.isRegistered && !object.isMissingFromStore {
            var membership = state.membership
            if !membership.contains(.inserted), object.hasPersistentChangedValues || object.hasJoinChanges {
                membership.insert(.changed)
            }
            bookkeeping.setPendingMembership(of: object, to: membership)
        }
    }
}
