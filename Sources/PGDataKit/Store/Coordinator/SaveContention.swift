import Synchronization

/// Which entities a coordinator's saves found contended lately, and so whether a save of
/// them should start in the redo's mode: a read-committed transaction that locks its rows
/// in the global order, reads them and resolves conflicts, rather than a first attempt
/// that would likely fail into that redo. The one owner of this memory (a coordinator's,
/// shared by its contexts); it decides, the save pipeline asks and tells.
///
/// An entity is contended from the moment a save of it met another transaction's work —
/// it had to be redone after a serialization failure, a conflict, a deadlock or a row held
/// elsewhere, or, started in the redo's mode, it found rows that had moved since it read
/// them or keys committed since it looked — until `window` has passed without that
/// happening again. So under steady contention saves of the entity keep starting in the
/// redo's mode, and once it ends the next save after the window is optimistic again.
final class SaveContention: Sendable {
    private struct State {
        var window: Duration = SaveContention.defaultWindow
        /// When saves of each entity last met contention.
        var lastMet: [String: ContinuousClock.Instant] = [:]
    }

    /// The window a coordinator starts with.
    static let defaultWindow = Duration.seconds(1)

    private let state = Mutex(State())
    /// Whether any entity was ever noted (under the current window): a process whose saves
    /// never met contention asks nothing more of a save than this one load.
    private let everNoted = Atomic<Bool>(false)

    /// How long an entity stays contended after its saves last met contention; `.zero`
    /// turns the memory off (and forgets what it held).
    var window: Duration {
        get { state.withLock { $0.window } }
        set {
            state.withLock { state in
                state.window = max(newValue, .zero)
                if state.window == .zero { state.lastMet = [:] }
            }
        }
    }

    /// Whether a save of these entities may find any of them contended (cheap: false
    /// until some save met contention).
    var mayBeContended: Bool { everNoted.load(ordering: .relaxed) }

    /// Saves of these entities met another transaction's work now.
    func noteContention(on entities: some Sequence<String>, at now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            guard state.window > .zero else { return }
            for entity in entities { state.lastMet[entity] = now }
            // (A few entities at most: the ones past the window are dropped as it goes.)
            let window = state.window
            state.lastMet = state.lastMet.filter { now - $0.value < window }
            everNoted.store(!state.lastMet.isEmpty, ordering: .relaxed)
        }
    }

    /// Whether saves of any of these entities met contention within the window.
    func isContended(_ entities: some Sequence<String>, at now: ContinuousClock.Instant = .now) -> Bool {
        guard mayBeContended else { return false }
        return state.withLock { state in
            entities.contains { entity in state.lastMet[entity].map { now - $0 < state.window } ?? false }
        }
    }
}
