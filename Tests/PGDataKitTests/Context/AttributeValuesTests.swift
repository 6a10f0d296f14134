import Foundation
import Testing

@testable import PGDataKit

/// `AttributeValues`, `ValueBlock` and `ValueBlockFiller`: the value runs objects share a
/// block with (a fetch's rows) behave as arrays do — a write never shows through another
/// run or a snapshot, every value is released once.
@Suite struct AttributeValuesTests {
    @Test func anArrayReadsBackIndexByIndex() {
        let values = AttributeValues([.string("a"), .int(2), .null])
        #expect(values.count == 3)
        #expect(Array(values) == [.string("a"), .int(2), .null])
        #expect(values[1] == .int(2))
        #expect(AttributeValues([]).isEmpty)
        #expect(AttributeValues().count == 0)
        #expect(AttributeValues([]) == AttributeValues())
        let read = values.withUnsafeBufferPointer { Array($0) }
        #expect(read == [.string("a"), .int(2), .null])
    }

    @Test func runsOfOneBlockAreIndexedFromZeroAndWrittenApart() throws {
        var filler = ValueBlockFiller(runLength: 2, expectedRuns: 3)
        var runs: [AttributeValues] = []
        for row in 0..<3 {
            runs.append(filler.run { index in .int(row * 10 + index) })
        }
        // One block for the three runs.
        let first = try #require(runs[0].block)
        #expect(runs.allSatisfy { $0.block === first })
        #expect(runs.map { Array($0) } == [[.int(0), .int(1)], [.int(10), .int(11)], [.int(20), .int(21)]])
        // A write to one run copies it out of the shared block; the others are untouched.
        var written = runs[1]
        written[0] = .string("new")
        #expect(written.block !== first)
        #expect(Array(written) == [.string("new"), .int(11)])
        #expect(Array(runs[1]) == [.int(10), .int(11)], "the run it was copied from")
        #expect(Array(runs[0]) == [.int(0), .int(1)] && Array(runs[2]) == [.int(20), .int(21)])
        // A run of its own is written in place.
        // (Compared by identity: holding the block here would share it.)
        let own = written.block.map(ObjectIdentifier.init)
        written[1] = .int(5)
        #expect(written.block.map(ObjectIdentifier.init) == own)
        #expect(Array(written) == [.string("new"), .int(5)])
    }

    @Test func aSnapshotSharingTheRunKeepsItsValues() {
        var storage = ObjectStorage()
        var filler = ValueBlockFiller(runLength: 2, expectedRuns: 1)
        storage.applyFetched(version: 1, values: filler.run { .int($0) })
        _ = storage.write(.int(7), at: 1)
        #expect(Array(storage.runValues) == [.int(0), .int(7)])
        #expect(storage.snapshot.map(Array.init) == [.int(0), .int(1)])
    }

    @Test func aFillerStartsAnotherBlockWhenOneIsFull() {
        // ~4 KiB a block: with 100 values a run, one run per block.
        var big = ValueBlockFiller(runLength: 100, expectedRuns: 5)
        let a = big.run { _ in .null }
        let b = big.run { _ in .null }
        #expect(a.block !== b.block)
        // Small runs: at most 64 a block.
        var small = ValueBlockFiller(runLength: 1, expectedRuns: 200)
        let runs = (0..<130).map { row in small.run { _ in .int(row) } }
        #expect(Set(runs.compactMap { $0.block.map(ObjectIdentifier.init) }).count == 3)
        #expect(runs.enumerated().allSatisfy { $0.element[0] == .int($0.offset) })
        // An empty run needs no block.
        var none = ValueBlockFiller(runLength: 0, expectedRuns: 3)
        #expect(none.run { _ in .null }.block == nil)
    }

    @Test func everyValueIsReleasedOnceWithItsLastRun() throws {
        weak var watched: ValueBlock?
        var copy: AttributeValues?
        do {
            var filler = ValueBlockFiller(runLength: 2, expectedRuns: 2)
            let text = String(repeating: "x", count: 40)  // a heap string, counted
            let first = filler.run { _ in .string(text) }
            var second = filler.run { _ in .int(1) }
            watched = first.block
            second[0] = .int(2)  // copied out
            copy = second
            #expect(watched != nil)
        }
        // The filler and both runs of the shared block are gone: the block with them.
        #expect(watched == nil)
        #expect(copy.map(Array.init) == [.int(2), .int(1)])
    }

    @Test func aThrowingValueLeavesTheBlockWhole() throws {
        struct Refused: Error {}
        var filler = ValueBlockFiller(runLength: 3, expectedRuns: 4)
        let kept = filler.run { .int($0) }
        #expect(throws: Refused.self) {
            _ = try filler.run { index in
                if index == 2 { throw Refused() }
                return .string(String(repeating: "y", count: 30))
            }
        }
        // The next run starts after the abandoned values; the earlier run is intact.
        let next = filler.run { .int(100 + $0) }
        #expect(Array(kept) == [.int(0), .int(1), .int(2)])
        #expect(Array(next) == [.int(100), .int(101), .int(102)])
        #expect(next.block === kept.block)
        #expect(next.block?.count == 8, "3 + 2 abandoned + 3")
    }

    @Test func aRunTakesTwoWordsOptionalOrNot() {
        #expect(MemoryLayout<AttributeValues>.size == 16)
        #expect(MemoryLayout<AttributeValues?>.size == 16, "nil in the block reference's spare values")
    }

    @Test func equalValuesAreEqualWhateverTheirBlocks() {
        var filler = ValueBlockFiller(runLength: 2, expectedRuns: 2)
        let shared = filler.run { _ in .string("s") }
        let own = AttributeValues([.string("s"), .string("s")])
        #expect(shared == own)
        #expect(shared != AttributeValues([.string("s")]))
        #expect(shared != AttributeValues([.string("s"), .null]))
    }
}
