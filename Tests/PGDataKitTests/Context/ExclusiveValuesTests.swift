import Foundation
import Testing

@testable import PGDataKit

private final class Meter: ManagedObject {
    @Attribute var label: String = ""
    @Attribute var count: Int = 0
    @Attribute var note: String?
}

/// An object's values written in place in a shared block (`ValueArena`, the storage's
/// exclusive run): one copy on the first write, none after, and no other holder of the
/// values — a snapshot, a checkpoint, a shared copy, another object — ever sees a write.
@Suite("Exclusive values")
struct ExclusiveValuesTests {
    let entity: EntityDescription

    init() throws {
        let model = try Model(entities: [Meter.self])
        entity = try #require(model.entity(for: Meter.self))
    }

    /// Storages as a fetch leaves them: their runs side by side in one shared block.
    private func fetched(_ count: Int) -> [ObjectStorage] {
        var filler = ValueBlockFiller(runLength: 3, expectedRuns: count)
        return (0..<count).map { index in
            var storage = ObjectStorage()
            storage.prepare(for: entity)
            storage.applyFetched(version: 1, values: filler.run { [.string("m\(index)"), .int(index), .null][$0] })
            return storage
        }
    }

    private func block(_ values: AttributeValues) -> ObjectIdentifier? { values.block.map(ObjectIdentifier.init) }

    @Test func theFirstWriteCopiesIntoTheArenaAndLaterOnesWriteInPlace() {
        let arena = ValueArena()
        var storages = fetched(3)
        let fetchedBlock = block(storages[0].runValues)
        _ = storages[0].write(.string("new"), at: 0, arena: arena)
        let copied = (block(storages[0].runValues), storages[0].runValues.start)
        #expect(copied.0 != fetchedBlock, "the fetched run is shared with the snapshot: copied")
        _ = storages[0].write(.int(42), at: 1, arena: arena)
        _ = storages[0].write(.string("note"), at: 2, arena: arena)
        #expect(block(storages[0].runValues) == copied.0 && storages[0].runValues.start == copied.1, "in place")
        #expect(Array(storages[0].runValues) == [.string("new"), .int(42), .string("note")])
        #expect(storages[0].snapshot.map(Array.init) == [.string("m0"), .int(0), .null])

        // Another object's first write lands in the same block: no allocation of its own.
        _ = storages[1].write(.int(7), at: 1, arena: arena)
        #expect(block(storages[1].runValues) == copied.0)
        #expect(Array(storages[1].runValues) == [.string("m1"), .int(7), .null])
        #expect(Array(storages[0].runValues) == [.string("new"), .int(42), .string("note")])
        #expect(Array(storages[2].runValues) == [.string("m2"), .int(2), .null], "an unwritten neighbour is untouched")
    }

    @Test func anUnchangedWriteCopiesNothing() {
        var storage = fetched(1)[0]
        let before = block(storage.runValues)
        let effect = storage.write(.string("m0"), at: 0, arena: ValueArena()).effect
        #expect(effect == .unchanged && block(storage.runValues) == before)
    }

    @Test func everyWayOfSharingTheValuesKeepsTheSharedCopy() {
        let arena = ValueArena()
        func written() -> ObjectStorage {
            var storage = fetched(1)[0]
            _ = storage.write(.int(1), at: 1, arena: arena)
            return storage
        }
        let before: [StoredValue] = [.string("m0"), .int(1), .null]

        var committed = written()
        committed.commit(entity)
        _ = committed.write(.int(2), at: 1, arena: arena)
        #expect(committed.snapshot.map(Array.init) == before, "the snapshot of a commit")

        var checkpointed = written()
        let checkpoint = checkpointed.checkpoint()
        _ = checkpointed.write(.int(2), at: 1, arena: arena)
        #expect(Array(checkpoint.values) == before, "an undo's checkpoint")
        checkpointed.restore(checkpoint)
        _ = checkpointed.write(.int(3), at: 1, arena: arena)
        #expect(Array(checkpoint.values) == before, "a checkpoint restored and written again")

        var shared = written()
        let copy = shared.sharedValues()
        _ = shared.write(.int(2), at: 1, arena: arena)
        #expect(Array(copy) == before, "a shared copy (a child's state, a statement's values)")

        var source = written()
        var adopter = ObjectStorage()
        adopter.prepare(for: entity)
        adopter.adoptStoredRow(of: &source)
        _ = source.write(.int(2), at: 1, arena: arena)
        #expect(Array(adopter.runValues) == before, "another storage that took the row")
        _ = adopter.write(.int(5), at: 1, arena: arena)
        #expect(Array(source.runValues) == [.string("m0"), .int(2), .null])
    }

    @Test func anObjectAdoptingItsOwnRowKeepsItsValuesAndDropsTheKeyedInsert() {
        let meter = Meter()
        meter.label = "own"
        meter.storage.markKeyedInsert(attribute: 0, keepsExisting: true)
        meter.adoptStoredRow(of: meter)
        #expect(meter.label == "own" && meter.storage.upsertAttributeIndex == nil)
        meter.count = 3
        #expect(meter.label == "own" && meter.count == 3)
    }

    @Test func aRunHeldAloneIsWrittenInPlaceWithoutAnArena() {
        var storage = ObjectStorage()
        storage.replaceValues([.string("a"), .int(1), .null])
        let own = block(storage.runValues)
        _ = storage.write(.int(2), at: 1)
        #expect(block(storage.runValues) == own, "its block is its own: no copy")
        var fetchedStorage = fetched(2)[0]
        _ = fetchedStorage.write(.int(2), at: 1)
        #expect(Array(fetchedStorage.runValues) == [.string("m0"), .int(2), .null])
        #expect(fetchedStorage.runValues.start == 0, "without an arena, a block of its own")
    }

    @Test func theArenaStartsBlocksAndGivesLongRunsTheirOwn() {
        let arena = ValueArena()
        let run = AttributeValues([StoredValue](repeating: .int(1), count: 3))
        let copies = (0..<(ValueArena.blockValues / 3 + 1)).map { _ in arena.copy(run) }
        #expect(Set(copies.compactMap { block($0) }).count == 2, "a full block, then another")
        #expect(copies.allSatisfy { Array($0) == [.int(1), .int(1), .int(1)] })
        let long = AttributeValues([StoredValue](repeating: .int(2), count: ValueArena.blockValues))
        let longCopy = arena.copy(long)
        #expect(longCopy.start == 0 && Array(longCopy) == Array(long) && block(longCopy) != block(copies.last ?? run))
        #expect(arena.copy(AttributeValues()).isEmpty)
    }

    /// Random writes, commits, checkpoints, restores, shared copies and adoptions on a few
    /// storages with one arena, against plain arrays: every holder keeps its own values.
    @Test(arguments: [1, 2, 3, 4])
    func randomOperationsMatchPlainArrays(seed: UInt64) {
        var generator = FuzzGenerator(state: seed)
        let arena = ValueArena()
        var storages = fetched(4)
        var current = (0..<4).map { [StoredValue.string("m\($0)"), .int($0), .null] }
        var committed = current
        var kept: [(AttributeValues, [StoredValue])] = []
        var checkpoints: [(index: Int, checkpoint: ObjectStorage.Checkpoint, values: [StoredValue])] = []
        for step in 0..<2_000 {
            let index = Int.random(in: 0..<4, using: &generator)
            switch Int.random(in: 0..<12, using: &generator) {
            case 0:
                storages[index].commit(entity)
                committed[index] = current[index]
            case 1:
                checkpoints.append((index, storages[index].checkpoint(), current[index]))
            case 2:
                guard let taken = checkpoints.randomElement(using: &generator), taken.index == index else { continue }
                storages[index].restore(taken.checkpoint)
                current[index] = taken.values
            case 3:
                kept.append((storages[index].sharedValues(), current[index]))
            case 4:
                let other = (index + 1) % 4
                var source = storages[other]
                storages[index].adoptStoredRow(of: &source)
                storages[other] = source
                current[index] = current[other]
                committed[index] = committed[other]
            default:
                let slot = Int.random(in: 0..<3, using: &generator)
                let value: StoredValue = slot == 1 ? .int(step) : .string("s\(step)")
                _ = storages[index].write(value, at: slot, arena: Bool.random(using: &generator) ? arena : nil)
                current[index][slot] = value
            }
            for (storage, values) in zip(storages, current) where Array(storage.runValues) != values {
                Issue.record("step \(step): values \(Array(storage.runValues)), expected \(values)")
                return
            }
            for (storage, values) in zip(storages, committed) where storage.snapshot.map(Array.init) != values {
                Issue.record("step \(step): snapshot changed")
                return
            }
            for (copy, values) in kept where Array(copy) != values {
                Issue.record("step \(step): a shared copy changed")
                return
            }
            for taken in checkpoints where Array(taken.checkpoint.values) != taken.values {
                Issue.record("step \(step): a checkpoint changed")
                return
            }
        }
    }
}
