import Synchronization

/// Observers told once when a coordinator is closed (object controllers stop then).
final class CloseObservers: Sendable {
    private struct State {
        var isClosed = false
        var nextID = 0
        var observers: [Int: @Sendable () -> Void] = [:]
    }

    private let state = Mutex(State())

    /// Whether `close()` was called.
    var isClosed: Bool { state.withLock { $0.isClosed } }

    /// Adds an observer, called once at `close()`; called at once when already closed.
    func add(_ observer: @escaping @Sendable () -> Void) -> ObserverToken {
        let id = state.withLock { state -> Int? in
            guard !state.isClosed else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.observers[id] = observer
            return id
        }
        guard let id else {
            observer()
            return ObserverToken {}
        }
        return ObserverToken { [weak self] in _ = self?.state.withLock { $0.observers.removeValue(forKey: id) } }
    }

    /// Marks the coordinator closed and calls every observer once, in the order they
    /// were added.
    func close() {
        let observers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.isClosed else { return [] }
            state.isClosed = true
            defer { state.observers.removeAll() }
            return state.observers.sorted { $0.key < $1.key }.map(\.value)
        }
        observers.forEach { $0() }
    }
}

extension StoreCoordinator {
    /// Whether `close()` was called: the pool lends no connection and the listener is
    /// stopped.
    public var isClosed: Bool { closeObservers.isClosed }

    /// Calls `observer` once when the coordinator is closed (at once when it already
    /// is), on the thread that closes it, until the token is cancelled.
    func observeClose(_ observer: @escaping @Sendable () -> Void) -> ObserverToken {
        closeObservers.add(observer)
    }
}
