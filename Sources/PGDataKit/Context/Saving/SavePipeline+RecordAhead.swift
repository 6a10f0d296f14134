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
        /// The objects of the outcome it was made for, in order: inserted, merged,
        /// updated, deleted (the outcome's arrays are appended to, never reordered).
        private let inserted: Int
        private let merged: Int
        private let updated: [(object: ObjectIdentifier, keys: Set<String>)]
        private let deleted: Int
        /// What the save changed, in that outcome.
        private(set) var changes: ContextChanges?
        /// The change record's text (`nil` when encoding it failed: the commit then
        /// encodes it again and reports the error).
        private(set) var encoded: String?

        /// A record to make for `outcome` once `objects` are updated too (with
        /// `changedKeys`).
        init(after outcome: WriteOutcome, updating objects: [ManagedObject], changedKeys: Set<String>) {
            inserted = outcome.inserted.count
            merged = outcome.merged.count
            var updated = outcome.updated.map { (ObjectIdentifier($0.object), $0.keys) }
            updated.reserveCapacity(updated.count + objects.count)
            for object in objects { updated.append((ObjectIdentifier(object), changedKeys)) }
            self.updated = updated
            deleted = outcome.deleted.count
        }

        /// Makes the record: `expected` is the outcome with every object updated.
        func make(_ expected: WriteOutcome, by pipeline: SavePipeline, reservedKeys: [ObjectIdentifier: Int64]) {
            let changes = pipeline.savedChanges(outcome: expected, reservedKeys: reservedKeys)
            self.changes = changes
            encoded = try? ChangeLog.encode(changes)
        }

        /// Whether it is the record of `outcome`: the same objects written with the same
        /// keys (the updates' sets of keys are shared by shape: compared by identity
        /// first), no conflict.
        func fits(_ outcome: WriteOutcome) -> Bool {
            guard changes != nil, encoded != nil, outcome.conflicts.isEmpty, outcome.inserted.count == inserted,
                outcome.merged.count == merged, outcome.deleted.count == deleted, outcome.updated.count == updated.count
            else { return false }
            for (position, entry) in outcome.updated.enumerated() {
                let expected = updated[position]
                guard ObjectIdentifier(entry.object) == expected.object, entry.keys == expected.keys else { return false }
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
        let ahead = RecordAhead(after: outcome, updating: objects, changedKeys: changedKeys)
        connection.doWhileWaiting { [self] in
            var expected = outcome
            expected.updated.reserveCapacity(outcome.updated.count + objects.count)
            for object in objects { expected.updated.append((object, changedKeys, 0)) }
            ahead.make(expected, by: self, reservedKeys: reservedKeys)
        }
        return ahead
    }
}
