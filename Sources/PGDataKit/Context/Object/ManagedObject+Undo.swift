/// What a change of an object tells its context's undo manager.
extension ManagedObject {
    /// Before attribute `slot` is set to `value`: records the object's state with the
    /// context's undo manager when the value changes. (The setters' path calls it only
    /// when the context has an undo manager.)
    @inline(never)
    func willWriteForUndo(_ value: borrowing StoredValue, at slot: Int) {
        guard let undo = contextReference?.undoManager else { return }
        if slot < storage.valueCount, storage.value(at: slot) == value { return }
        undo.willChange(self)
    }

    /// Before a change of the object: records its state with the context's undo manager.
    @inline(never)
    func willChangeForUndo() {
        contextReference?.undoManager?.willChange(self)
    }
}
