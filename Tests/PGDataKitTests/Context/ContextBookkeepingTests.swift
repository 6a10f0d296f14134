import Foundation
import Testing

@testable import PGDataKit

/// `ContextBookkeeping`, the one owner of a context's registry and pending changes,
/// without a server.
@Suite("Context bookkeeping")
struct ContextBookkeepingTests {
    private func id(_ key: Int64) -> ObjectID { ObjectID(entityName: "Thing", primaryKey: key) }

    private func index(_ bookkeeping: ContextBookkeeping, generation: Int = 0) -> MembersIndex {
        bookkeeping.membersIndex(MembersIndex.Key(entity: "Thing", relationship: 0), generation: { generation }) { _ in
            MembersIndex()
        }
    }

    @Test func registeringAndUnregisteringAnswerByID() {
        let bookkeeping = ContextBookkeeping()
        let object = ManagedObject()
        bookkeeping.register(object, as: id(1))
        #expect(bookkeeping.object(for: id(1)) === object && bookkeeping.registeredCount == 1)
        #expect(bookkeeping.unregister(id(2)) == nil, "nothing there")
        #expect(bookkeeping.unregister(id(1)) === object)
        #expect(bookkeeping.object(for: id(1)) == nil && bookkeeping.registeredCount == 0)
    }

    @Test func rekeyingMovesAnObjectToItsPermanentID() {
        let bookkeeping = ContextBookkeeping()
        let object = ManagedObject()
        let temporary = ObjectID(temporaryFor: "Thing")
        bookkeeping.register(object, as: temporary)
        _ = index(bookkeeping)
        bookkeeping.rekey(object, from: temporary, to: id(3), keepingTemporary: false)
        #expect(bookkeeping.object(for: temporary) == nil && bookkeeping.object(for: id(3)) === object)
        #expect(bookkeeping.registeredCount == 1)
        _ = index(bookkeeping)
        #expect(bookkeeping.membersIndexBuilds == 2, "a re-key drops the indexes")
    }

    @Test func aMembersIndexIsKeptUntilTheRegistryOrTheGenerationChanges() {
        let bookkeeping = ContextBookkeeping()
        bookkeeping.register(ManagedObject(), as: id(1))
        _ = index(bookkeeping)
        _ = index(bookkeeping)
        #expect(bookkeeping.membersIndexBuilds == 1, "kept")
        _ = index(bookkeeping, generation: 1)
        #expect(bookkeeping.membersIndexBuilds == 2, "another generation")
        bookkeeping.register(ManagedObject(), as: id(2))
        _ = index(bookkeeping, generation: 1)
        #expect(bookkeeping.membersIndexBuilds == 3, "a registration drops it")
        bookkeeping.unregister(id(2))
        _ = index(bookkeeping, generation: 1)
        #expect(bookkeeping.membersIndexBuilds == 4, "so does a removal")
    }

    @Test func theRegistryMovedOutAndBackUnchangedKeepsTheIndexes() {
        let bookkeeping = ContextBookkeeping()
        bookkeeping.register(ManagedObject(), as: id(1))
        _ = index(bookkeeping)
        let seen = bookkeeping.withRegistry { registry in
            #expect(bookkeeping.registeredCount == 0, "moved out meanwhile")
            return registry.count
        }
        #expect(seen == 1 && bookkeeping.registeredCount == 1)
        _ = index(bookkeeping)
        #expect(bookkeeping.membersIndexBuilds == 1)
        bookkeeping.withRegistry { registry in registry[id(2)] = ManagedObject() }
        #expect(bookkeeping.object(for: id(2)) != nil)
        _ = index(bookkeeping)
        #expect(bookkeeping.membersIndexBuilds == 2, "objects added while moved out drop it")
    }

    @Test func aResetForgetsObjectsAndChangesAndRetiresWithinTheBound() {
        let bookkeeping = ContextBookkeeping()
        let object = ManagedObject()
        bookkeeping.register(object, as: id(1))
        bookkeeping.pending.insert(object, into: .changed)
        bookkeeping.noteKeyedInsertKeyChanged()
        bookkeeping.reset(retiring: true, keepBound: 10)
        #expect(bookkeeping.registeredCount == 0 && bookkeeping.pending.count == 0)
        #expect(!bookkeeping.keyedInsertKeysChanged && object.pendingSlot.membership.isEmpty)
        #expect(bookkeeping.holdsRetired)
        bookkeeping.releaseRetired()
        #expect(!bookkeeping.holdsRetired)

        bookkeeping.register(ManagedObject(), as: id(1))
        bookkeeping.register(ManagedObject(), as: id(2))
        bookkeeping.reset(retiring: true, keepBound: 1)
        #expect(!bookkeeping.holdsRetired, "more than the bound go at once")
    }

    @Test func savedIDsAnswerForTemporaryOnesUntilForgotten() {
        let bookkeeping = ContextBookkeeping()
        let temporary = ObjectID(temporaryFor: "Thing")
        #expect(bookkeeping.permanentID(forTemporary: temporary) == nil)
        bookkeeping.noteSavedID(id(5), forTemporary: temporary)
        #expect(bookkeeping.permanentID(forTemporary: temporary) == id(5))
        bookkeeping.forgetSavedIDs()
        #expect(bookkeeping.permanentID(forTemporary: temporary) == nil)
    }
}
