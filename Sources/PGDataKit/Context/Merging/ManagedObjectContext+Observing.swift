import Foundation

/// The observers of one context; confined to its queue except for registration, which
/// is locked.
struct ContextObservers: @unchecked Sendable {
    // Sendable: `storage` is a locked box shared with the tokens.
    final class Storage: @unchecked Sendable {
        // Safe: every access holds `lock`.
        let lock = NSLock()
        var nextID = 0
        var didSave: [Int: @Sendable (ContextChanges) -> Void] = [:]
        var didChange: [Int: @Sendable (ContextChanges) -> Void] = [:]
        var saveStreams: [Int: AsyncStream<ContextChanges>.Continuation] = [:]
        var changeStreams: [Int: AsyncStream<ContextChanges>.Continuation] = [:]
    }

    let storage = Storage()

    func add(didSave: Bool, _ observer: @escaping @Sendable (ContextChanges) -> Void) -> ObserverToken {
        let storage = self.storage
        storage.lock.lock()
        let id = storage.nextID
        storage.nextID += 1
        if didSave { storage.didSave[id] = observer } else { storage.didChange[id] = observer }
        storage.lock.unlock()
        return ObserverToken {
            storage.lock.lock()
            storage.didSave.removeValue(forKey: id)
            storage.didChange.removeValue(forKey: id)
            storage.lock.unlock()
        }
    }

    /// Registers a did-save observer for the context's whole life (no token).
    func addForLifetime(didSave observer: @escaping @Sendable (ContextChanges) -> Void) {
        storage.lock.lock()
        storage.didSave[storage.nextID] = observer
        storage.nextID += 1
        storage.lock.unlock()
    }

    func stream(didSave: Bool) -> AsyncStream<ContextChanges> {
        let storage = self.storage
        let (stream, continuation) = AsyncStream.makeStream(of: ContextChanges.self)
        storage.lock.lock()
        let id = storage.nextID
        storage.nextID += 1
        if didSave { storage.saveStreams[id] = continuation } else { storage.changeStreams[id] = continuation }
        storage.lock.unlock()
        continuation.onTermination = { _ in
            storage.lock.lock()
            storage.saveStreams.removeValue(forKey: id)
            storage.changeStreams.removeValue(forKey: id)
            storage.lock.unlock()
        }
        return stream
    }

    func postDidSave(_ changes: ContextChanges) { post(changes, didSave: true) }

    func postDidChange(_ changes: ContextChanges) { post(changes, didSave: false) }

    /// Calls the observers (in the order they were registered) and feeds the streams of
    /// one kind, outside the lock.
    private func post(_ changes: ContextChanges, didSave: Bool) {
        storage.lock.lock()
        let observers = didSave ? storage.didSave : storage.didChange
        let streams = didSave ? storage.saveStreams : storage.changeStreams
        storage.lock.unlock()
        // (One observer, the common case — a private context's manager: no sorted copy.)
        if observers.count == 1, let only = observers.first?.value {
            only(changes)
        } else {
            for (_, observer) in observers.sorted(by: { $0.key < $1.key }) { observer(changes) }
        }
        for stream in streams.values { stream.yield(changes) }
    }

    func finishAll() {
        storage.lock.lock()
        let streams = Array(storage.saveStreams.values) + Array(storage.changeStreams.values)
        storage.lock.unlock()
        streams.forEach { $0.finish() }
    }
}

extension ManagedObjectContext {
    /// Calls `observer` on the context's queue after each successful save, with what the
    /// save changed, until `cancel()` is called on the returned token. Observers are
    /// called in the order they were registered.
    ///
    /// For example:
    ///
    /// ```swift
    /// let token = context.observeDidSave { changes in
    ///     print("saved \(changes.inserted.count) new objects")
    /// }
    /// ```
    public func observeDidSave(_ observer: @escaping @Sendable (ContextChanges) -> Void) -> ObserverToken {
        observers.add(didSave: true, observer)
    }

    /// Calls `observer` on the context's queue after changes from elsewhere were merged
    /// into this context (Core Data's objects-did-change after a merge), in the order
    /// observers were registered.
    public func observeObjectsDidChange(_ observer: @escaping @Sendable (ContextChanges) -> Void) -> ObserverToken {
        observers.add(didSave: false, observer)
    }

    /// Every later successful save of this context, as an async sequence.
    ///
    /// For example:
    ///
    /// ```swift
    /// for await changes in context.didSaveNotifications { print(changes.updated) }
    /// ```
    public var didSaveNotifications: AsyncStream<ContextChanges> { observers.stream(didSave: true) }

    /// Every later merge into this context, as an async sequence.
    public var objectsDidChangeNotifications: AsyncStream<ContextChanges> { observers.stream(didSave: false) }
}
