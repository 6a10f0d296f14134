import PGDataKitPostgres

/// A save's change record worked out while the server runs the save's last `UPDATE`.
///
/// The record lists what the save changed (`savedChanges`), and its text
/// (`ChangeLog.encode`) is a few hundred instructions an object: for a batch of updates,
/// a tenth of a millisecond and more that the client would otherwise spend between that
/// statement's answer and the `COMMIT`, with the server idle. The record of the outcome in
/// which the `UPDATE` finds every row is the only likely one, so it is made while the
/// statement runs (`Connection.doWhileWaiting`) and used when the outcome is that one;
/// any other outcome (a conflict, or writes after the `UPDATE` that change the outcome)
/// makes its record as before. Nothing is sent before the answer is read.
extension SavePipeline {
    /// The record made ahead, and the outcome it is the record of.
    final class RecordAhead {
        /// How many objects the outcome it was made for holds before the last `UPDATE`:
        /// inserted, merged, updated, deleted (the outcome's arrays are appended to; the
        /// updates already in it keep their keys, as nothing that changes them follows
        /// the updates: `makesRecordAhead`).
        private let inserted: Int
        private let merged: Int
        private let updatedBefore: Int
        private let deleted: Int
        /// The last `UPDATE`'s objects, in order, and the keys it writes.
        private let objects: [ManagedObject]
        private let keys: Set<String>
        /// What the save changed, in that outcome.
        private(set) var changes: ContextChanges?
        /// The change record's text (`nil` when encoding it failed: the commit then
        /// encodes it again and reports the error).
        private(set) var encoded: String?

        /// A record to make for `outcome` once `objects` are updated too, writing `keys`.
        init(after outcome: WriteOutcome, updating objects: [ManagedObject], keys: Set<String>) {
            inserted = outcome.inserted.count
            merged = outcome.merged.count
            updatedBefore = outcome.updated.count
            deleted = outcome.deleted.count
            self.objects = objects
            self.keys = keys
        }

        /// Makes the record of `outcome` with every object of the last `UPDATE` updated.
        func make(after outcome: WriteOutcome, by pipeline: SavePipeline, reservedKeys: [ObjectIdentifier: Int64]) {
            let changes = pipeline.savedChanges(outcome: outcome, reservedKeys: reservedKeys, alsoUpdated: (objects, keys))
            self.changes = changes
            encoded = try? ChangeLog.encode(changes)
        }

        /// Whether it is the record of `outcome`: no conflict, the last `UPDATE` wrote
        /// every one of its objects, in order (with `keys`, which `writeUpdates` gives them
        /// all), and no later write changed the keys of an update
        /// (`WriteOutcome.updatedKeysWidened`).
        func fits(_ outcome: WriteOutcome) -> Bool {
            guard changes != nil, encoded != nil, outcome.conflicts.isEmpty, !outcome.updatedKeysWidened,
                outcome.inserted.count == inserted, outcome.merged.count == merged, outcome.deleted.count == deleted,
                outcome.updated.count == updatedBefore + objects.count
            else { return false }
            // (Read in place: a copy of each entry would retain its object and keys.)
            for offset in objects.indices where outcome.updated[updatedBefore + offset].object !== objects[offset] {
                return false
            }
            return true
        }
    }

    /// Whether a save's last `UPDATE` makes its change record while it runs: when nothing
    /// that changes the outcome follows it (no deletes; no changed many-to-many sets,
    /// whose join rows are written after the updates and add their names to the updated
    /// objects' keys).
    func makesRecordAhead(_ plan: SavePlan) -> Bool {
        guard plan.deletes.isEmpty, !plan.updates.isEmpty else { return false }
        return context.coordinator.model.joinTables.isEmpty
            || !(context.changedSet.contains(where: \.hasJoinChanges) || context.insertedSet.contains(where: \.hasJoinChanges))
    }

    /// Has `connection` make the record of the outcome in which `objects` (the last
    /// update group, changing `changedKeys`) are all updated, while its next statement
    /// runs; the caller clears the work after that statement (`doWhileWaiting(nil)`).
    func makeRecordAhead(
        after outcome: WriteOutcome, updating objects: [ManagedObject], changedKeys: Set<String>,
        reservedKeys: [ObjectIdentifier: Int64], on connection: Connection
    ) -> RecordAhead {
        let ahead = RecordAhead(after: outcome, updating: objects, keys: changedKeys)
        connection.doWhileWaiting { [self] in ahead.make(after: outcome, by: self, reservedKeys: reservedKeys) }
        return ahead
    }
}
