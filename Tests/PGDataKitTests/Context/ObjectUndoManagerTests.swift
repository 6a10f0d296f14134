import Foundation
import Testing

@testable import PGDataKit

private final class Dial: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "dials") var knobs: Set<Knob>
}

private final class Knob: ManagedObject {
    @Attribute var label: String = ""
    @Relationship(inverse: "knobs") var dials: Set<Dial>
}

/// The undo manager's bookkeeping that needs no context, and the complete checkpoints it
/// keeps of an object's storage (what it records and puts back is tested against a
/// server in `UndoManagerTests`).
@Suite("Object undo manager")
struct ObjectUndoManagerTests {
    @Test func withoutAContextOrGroupsEveryCallIsANoOp() {
        let undo = ObjectUndoManager()
        #expect(undo.levelsOfUndo == 0)
        #expect(!undo.canUndo && !undo.canRedo)
        #expect(!undo.undo() && !undo.redo())
        undo.endUndoGrouping()
        #expect(undo.groupingLevel == 0, "an end without a begin does nothing")
        undo.beginUndoGrouping()
        undo.beginUndoGrouping()
        #expect(undo.groupingLevel == 2)
        undo.endUndoGrouping()
        undo.endUndoGrouping()
        #expect(undo.groupingLevel == 0)
        let value = undo.group { undo.groupingLevel }
        #expect(value == 1)
        undo.levelsOfUndo = -3
        undo.removeAllActions()
        #expect(!undo.canUndo)
    }

    @Test func aCompleteCheckpointPutsBackJoinChangesAndTheDeletionMarkButNotTheStoredSet() throws {
        let model = try Model(entities: [Dial.self, Knob.self])
        let entity = try #require(model.entity(for: Dial.self))
        let (first, second) = (Knob(), Knob())
        var storage = ObjectStorage()
        storage.prepare(for: entity)
        storage.setJoinMembers(JoinMembers(stored: [7], added: [ObjectIdentifier(first): first]), at: 0)
        let checkpoint = storage.checkpoint(complete: true)
        #expect(checkpoint.deleted == false)

        storage.updateJoinMembers(at: 0) { members in
            members.added = [ObjectIdentifier(second): second]
            members.removed = [ObjectIdentifier(first): first]
            members.stored = [7, 8]  // (a load meanwhile)
        }
        storage.setDeleted(true)
        storage.restore(checkpoint)
        let members = try #require(storage.joinMembers(at: 0))
        #expect(members.added.keys.sorted() == [ObjectIdentifier(first)])
        #expect(members.removed.isEmpty)
        #expect(members.stored == [7, 8], "what was loaded stays")
        #expect(!storage.deletedFlag)

        // A relationship without changes when the checkpoint was taken has none after it.
        var empty = ObjectStorage()
        storage.restore(empty.checkpoint(complete: true))
        #expect(storage.joinMembers(at: 0)?.hasChanges == false)
        // An import's checkpoint leaves both alone.
        storage.updateJoinMembers(at: 0) { $0.added = [ObjectIdentifier(second): second] }
        storage.setDeleted(true)
        storage.restore(empty.checkpoint())
        #expect(storage.joinMembers(at: 0)?.hasChanges == true && storage.deletedFlag)
    }
}
