import Synchronization

/// Ids of change records this process wrote whose notifications have not come yet: a
/// notification that carries only an id noted here needs no read of the log. Recent ids
/// only (the set empties at 4,096; a notification that arrives before its id is noted, or
/// after the set emptied, is read as usual).
final class OwnRecordIDs: Sendable {
    private let ids = Mutex<Set<Int64>>([])

    /// Notes the id of a change record this process wrote.
    func note(_ id: Int64) {
        ids.withLock { ids in
            if ids.count >= 4_096 { ids.removeAll(keepingCapacity: true) }
            ids.insert(id)
        }
    }

    /// Whether `id` is one this process wrote, forgetting it.
    func take(_ id: Int64) -> Bool {
        ids.withLock { $0.remove(id) != nil }
    }
}
