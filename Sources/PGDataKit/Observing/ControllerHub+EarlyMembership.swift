import Foundation
import Synchronization

/// A membership question asked as soon as the listener read other processes' saves,
/// while the main context still merges them: when the merge's objects-did-change
/// arrives with the same changes, the answer is ready (or in flight) instead of being
/// asked only then. It is still one statement per entity per change set.
final class EarlyMembership: @unchecked Sendable {
    // Safe: `outcomes` is written on the hub's early queue before `ready` is signalled,
    // and read only after waiting for `ready`.

    /// One entity's answer.
    struct Outcome {
        /// The condition number of each client that was asked, by identity.
        let conditions: [ObjectIdentifier: Int]
        let result: Result<MembershipAnswer, any Error>
    }

    /// The change set the answer is for (the union of the records, as the manager merges
    /// them).
    let changes: ContextChanges
    let created = ContinuousClock.now
    /// The context's `snapshotPinEpoch` when asked: a pin since then delays the merge.
    let pinEpoch: Int
    let ready = DispatchSemaphore(value: 0)
    var outcomes: [String: Outcome] = [:]

    init(changes: ContextChanges, pinEpoch: Int) {
        self.changes = changes
        self.pinEpoch = pinEpoch
    }
}

/// Whether the hub asks early, and the answer not yet taken.
struct EarlyState {
    var pending: EarlyMembership?
    /// The last change sets the context handled without an early answer: the merge can
    /// run before the listener's thread gets here, and then asking early would be a
    /// second statement for the same change set.
    var recentlyHandled: [ContextChanges] = []
    /// Turned off when an answer was never taken: this context does not merge the
    /// listener's records (its manager does not merge remote changes).
    var enabled = true
}

extension ControllerHub {
    /// Observes the coordinator's records when the context is a main context and the
    /// coordinator's listener already runs (a manager that merges other processes' saves
    /// into it); never starts the listener itself.
    func observeRemoteChangesEarly() -> ObserverToken? {
        guard context.concurrencyType == .main, context.coordinator.listenerBackendPID != nil else { return nil }
        return context.coordinator.observeRemoteChangeBatches { [weak self] records in self?.prepare(records) }
    }

    /// On the listener's thread: asks (on the hub's own queue, so the listener goes on
    /// reading) which of the records' changed rows match each controller's condition.
    func prepare(_ records: [ChangeRecord]) {
        var union = ContextChanges()
        for record in records { union.formUnion(record.changes) }
        let changes = union
        let clients = liveClients.filter { $0.membershipEntity != nil }
        guard !clients.isEmpty else { return }
        // A pinned context merges at its unpin, all at once: nothing to prepare now.
        let pinEpoch = context.snapshotPinEpoch.load(ordering: .relaxed)
        guard pinEpoch & 1 == 0 else { return }
        let prepared = EarlyMembership(changes: changes, pinEpoch: pinEpoch)
        let proceed = early.withLock { state -> Bool in
            if let pending = state.pending, pending.created.duration(to: .now) > .seconds(5) {
                // Never taken: the context does not merge these records, unless a pin
                // since held the merge back.
                if pending.pinEpoch == pinEpoch { state.enabled = false }
                state.pending = nil
            }
            guard state.enabled, !state.recentlyHandled.contains(changes) else { return false }
            state.pending = prepared
            return true
        }
        guard proceed else { return }
        let coordinator = context.coordinator
        earlyQueue.async {
            defer { prepared.ready.signal() }
            for (name, batch) in Self.batches(of: changes, model: coordinator.model) where !batch.candidates.isEmpty {
                let keys = batch.candidates.compactMap(\.primaryKey)
                var compiler = PredicateSQLCompiler(model: coordinator.model, parameters: [keys])
                var query = MembershipQuery(keys: keys)
                var conditions: [ObjectIdentifier: Int] = [:]
                for client in clients
                where client.membershipEntity?.rootEntityName == name && client.mayNeedMembership(for: batch, changes: changes) {
                    guard case .condition(let condition)? = try? client.membershipCondition(compiler: &compiler) else {
                        continue
                    }
                    conditions[ObjectIdentifier(client)] = query.conditions.count
                    query.conditions.append(condition)
                }
                guard !conditions.isEmpty else { continue }
                query.parameters = Array(compiler.parameters.dropFirst())
                let result = Result {
                    try coordinator.pool.withConnection { try coordinator.selectMembership(of: batch.entity, query, on: $0) }
                }
                prepared.outcomes[name] = EarlyMembership.Outcome(conditions: conditions, result: result)
            }
        }
    }

    /// On the context's queue: the early answer for exactly these changes, waited for if
    /// still in flight; `nil` when there is none (a save of this process, say).
    func takeEarlyMembership(for changes: ContextChanges) -> EarlyMembership? {
        let prepared = early.withLock { state -> EarlyMembership? in
            guard let pending = state.pending, pending.changes == changes else {
                state.recentlyHandled.append(changes)
                if state.recentlyHandled.count > 4 { state.recentlyHandled.removeFirst() }
                return nil
            }
            state.pending = nil
            return pending
        }
        prepared?.ready.wait()
        return prepared
    }
}
