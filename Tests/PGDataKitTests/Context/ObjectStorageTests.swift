import Foundation
import Testing

@testable import PGDataKit

private final class Gauge: ManagedObject {
    @Attribute var name: String = ""
    @Attribute var reading: Int = 0
    @Attribute var note: String?
    @Attribute var limit: Double = 0
    @Relationship(inverse: "gauges") var panel: Panel?
}

private final class Panel: ManagedObject {
    @Attribute var title: String = ""
    @Relationship(inverse: "panel") var gauges: Set<Gauge>
}

/// `ObjectStorage`, the one owner of an object's state, without a server: what each
/// write reports, the change facts against a plain comparison, commits and undo.
@Suite("Object storage")
struct ObjectStorageTests {
    let entity: EntityDescription

    init() throws {
        let model = try Model(entities: [Gauge.self, Panel.self])
        entity = try #require(model.entity(for: Gauge.self))
    }

    /// Storage as a fetch leaves it: values equal to the committed ones.
    private func fetched(_ values: [StoredValue]? = nil) -> ObjectStorage {
        var storage = ObjectStorage()
        storage.prepare(for: entity)
        storage.applyFetched(version: 3, values: values.map(AttributeValues.init) ?? storage.runValues)
        return storage
    }

    /// The changed attributes by plain comparison with the committed values.
    private func naiveChanges(_ storage: ObjectStorage) -> [Int] {
        guard let snapshot = storage.snapshot else { return Array(entity.attributes.indices) }
        return entity.attributes.indices.filter { snapshot[$0] != storage.runValues[$0] }
    }

    @Test func preparingMakesAValuePerAttributeAndAReferencePerRelationshipOnce() {
        var storage = ObjectStorage()
        #expect(!storage.isPrepared(for: entity))
        let made = storage.prepare(for: entity)
        #expect(made, "references made")
        #expect(storage.isPrepared(for: entity) && Array(storage.runValues) == entity.defaultValues)
        storage.initialize(.string("kept"), at: 0)
        let madeAgain = storage.prepare(for: entity)
        #expect(!madeAgain, "nothing made twice")
        #expect(storage.runValues[0] == .string("kept"))
    }

    @Test func writesSayWhetherTheContextHasToHear() {
        var new = ObjectStorage()
        new.prepare(for: entity)
        let effect1 = new.write(.string("a"), at: 0).effect
        #expect(effect1 == .untracked, "never saved nor fetched")
        let effect2 = new.write(.string("a"), at: 0).effect
        #expect(effect2 == .untracked)

        var storage = fetched()
        let effect3 = storage.write(.string(""), at: 0).effect
        #expect(effect3 == .unchanged, "the committed value again")
        let effect4 = storage.write(.string("b"), at: 0).effect
        #expect(effect4 == .firstChange)
        let effect5 = storage.write(.int(4), at: 1).effect
        #expect(effect5 == .changedAgain)
        let effect6 = storage.write(.string(""), at: 0).effect
        #expect(effect6 == .changedAgain, "back to the committed value")
        let fact1 = storage.changedAttributeIndexes(entity)
        #expect(fact1 == [1])
        storage.commit(entity)
        let effect7 = storage.write(.int(5), at: 1).effect
        #expect(effect7 == .firstChange, "told again after a commit")
    }

    @Test func aWriteToUnpreparedStorageWritesNothingAndSaysSo() {
        var bare = ObjectStorage()
        let unprepared = bare.write(.string("a"), at: 0)
        #expect(unprepared.effect == .unprepared && bare.runValues.isEmpty)
        var keyed = fetched()
        keyed.markKeyedInsert(attribute: 1, keepsExisting: false)
        keyed.setMissingFromStore(true)
        let result = keyed.write(.int(3), at: 1)
        #expect(result.effect == .firstChange && result.isKey && result.isMissingFromStore)
        let other = keyed.write(.string("x"), at: 0)
        #expect(!other.isKey)
    }

    @Test func changeFactsMatchAPlainComparison() {
        // Random writes (some back to committed values, some behind the hints' back) on
        // fetched storage: the mask and the indexes agree with comparing every attribute.
        var generator = SystemRandomNumberGenerator()
        let choices: [[StoredValue]] = [
            [.string(""), .string("x"), .string("y")], [.int(0), .int(1), .int(2)],
            [.null, .string("n")], [.double(0), .double(1.5)],
        ]
        for _ in 0..<500 {
            var storage = fetched()
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                let slot = Int.random(in: 0..<choices.count, using: &generator)
                let value = choices[slot].randomElement(using: &generator) ?? .null
                if Bool.random(using: &generator) {
                    _ = storage.write(value, at: slot).effect
                } else {
                    storage.initialize(value, at: slot)  // (the hints forget what they knew)
                }
            }
            let expected = naiveChanges(storage)
            let fact2 = storage.changedAttributeIndexes(entity)
            #expect(fact2 == expected)
            let fact3 = storage.changedAttributeMask(entity)
            #expect(fact3 == expected.reduce(0) { $0 | 1 << UInt64($1) })
            let fact4 = storage.hasChangedAttributes(entity)
            #expect(fact4 == !expected.isEmpty)
        }
    }

    @Test func neverCommittedStorageHasEveryAttributeChanged() {
        var storage = ObjectStorage()
        storage.prepare(for: entity)
        let fact5 = storage.changedAttributeIndexes(entity)
        #expect(fact5 == Array(entity.attributes.indices))
        let fact6 = storage.changedAttributeMask(entity)
        #expect(fact6 == (1 << UInt64(entity.attributes.count)) - 1)
    }

    @Test func aCommitMakesTheValuesAndKeysTheCommittedOnes() {
        var storage = fetched()
        _ = storage.write(.string("new"), at: 0)
        storage.setReference(.key(12), at: 0)
        storage.setSnapshotTemporaryTargets([0: ObjectID(temporaryFor: "Panel")])
        storage.commit(entity)
        #expect(storage.snapshot == storage.runValues && storage.changeHints.isKnown)
        #expect(storage.snapshotKeys == [12])
        #expect(storage.snapshotTemporaryTargets == nil)
        let fact7 = storage.hasChangedAttributes(entity)
        #expect(!fact7)
    }

    @Test func aCheckpointPutsBackValuesAndReferences() {
        var storage = fetched()
        let checkpoint = storage.checkpoint()
        _ = storage.write(.string("changed"), at: 0)
        storage.setReference(.key(4), at: 0)
        storage.restore(checkpoint)
        #expect(Array(storage.runValues) == entity.defaultValues)
        #expect(storage.referencedKey(at: 0) == nil)
        let fact8 = storage.hasChangedAttributes(entity)
        #expect(!fact8)
    }

    @Test func aKeyedInsertMarkRoundTrips() {
        var storage = ObjectStorage()
        #expect(storage.upsertAttributeIndex == nil && !storage.upsertKeepsExisting)
        storage.markKeyedInsert(attribute: 2, keepsExisting: true)
        #expect(storage.upsertAttributeIndex == 2 && storage.upsertKeepsExisting)
        storage.markKeyedInsert(attribute: nil, keepsExisting: true)
        #expect(storage.upsertAttributeIndex == nil && !storage.upsertKeepsExisting, "no keeping without a key")
    }

    @Test func adoptingAStoredRowTakesItsStateAndDropsTheKeyedInsert() {
        var imported = ObjectStorage()
        imported.prepare(for: entity)
        imported.markKeyedInsert(attribute: 0, keepsExisting: false)
        var row = fetched()
        row.setReference(.key(8), at: 0)
        row.commit(entity)
        row.setVersion(9)
        imported.adoptStoredRow(of: &row)
        #expect(imported.runValues == row.runValues && imported.snapshot == row.snapshot)
        #expect(imported.snapshotKeys == [8] && imported.version == 9 && imported.upsertAttributeIndex == nil)
        let fact9 = imported.hasChangedAttributes(entity)
        #expect(!fact9)
    }
}
