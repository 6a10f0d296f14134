import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The controller's diff engine, without a database: random batches of leaving, staying
/// (re-keyed) and entering members, checked against sorting from scratch and against
/// replaying the reported index sets on the old order.
@Suite("Controller diff engine")
struct OrderedMembersTests {
    final class Box {
        let id: Int
        init(_ id: Int) { self.id = id }
    }

    /// SplitMix64: the same sequence for a seed on every platform.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Keys are (value, id): ties broken by id, as primary keys break them.
    static func key(_ value: Int, _ id: Int) -> ControllerSortKey {
        var builder = ControllerSortKeyBuilder()
        builder.append(value, ascending: true, caseInsensitive: false)
        builder.appendTiebreak(primaryKey: Int64(id))
        return builder.key
    }
    static func id(_ number: Int) -> ObjectID { ObjectID(entityName: "Box", primaryKey: Int64(number)) }
    static func compare(_ a: (Int, Int), _ b: (Int, Int)) -> Int {
        if a.0 != b.0 { return a.0 < b.0 ? -1 : 1 }
        return a.1 == b.1 ? 0 : (a.1 < b.1 ? -1 : 1)
    }
    typealias Members = OrderedMembers<Box>

    /// Replays a diff on the old order as a list view would and returns the result.
    static func replay(_ diff: MembershipDiff, old: [Box], new: [Box]) -> [Box] {
        var array = old
        let removed = diff.deleted.union(IndexSet(diff.moved.map(\.from)))
        for index in removed.reversed() { array.remove(at: index) }
        let added = diff.inserted.union(IndexSet(diff.moved.map(\.to)))
        for index in added { array.insert(new[index], at: index) }
        return array
    }

    @Test(arguments: 0..<40)
    func randomBatchesMatchSortingFromScratchAndReplay(seed: Int) {
        var random = SeededGenerator(state: UInt64(seed) &* 7919 &+ 17)
        var members = Members()
        var values: [Int: Int] = [:]
        var boxes: [Int: Box] = [:]
        var nextID = 0
        let initial = Int.random(in: 0...(seed % 3 == 0 ? 200 : 30), using: &random)
        let range = seed % 2 == 0 ? 0...5 : 0...1000  // many ties, or few
        var entries: [Members.Entry] = []
        for _ in 0..<initial {
            let box = Box(nextID)
            let value = Int.random(in: range, using: &random)
            values[nextID] = value
            boxes[nextID] = box
            entries.append(.init(id: Self.id(nextID), element: box, key: Self.key(value, nextID)))
            nextID += 1
        }
        members.reset(entries.shuffled(using: &random))
        for _ in 0..<25 {
            let old = members.elements
            var leaving: [ObjectID] = []
            var staying: [Members.Entry] = []
            var entering: [Members.Entry] = []
            var stayingIDs = Set<Int>()
            for box in old.shuffled(using: &random).prefix(Int.random(in: 0...40, using: &random)) {
                switch Int.random(in: 0..<3, using: &random) {
                case 0:
                    leaving.append(Self.id(box.id))
                    values.removeValue(forKey: box.id)
                case 1:
                    stayingIDs.insert(box.id)
                    staying.append(.init(id: Self.id(box.id), element: box, key: Self.key(values[box.id] ?? 0, box.id)))
                default:
                    let value = Int.random(in: range, using: &random)
                    values[box.id] = value
                    stayingIDs.insert(box.id)
                    staying.append(.init(id: Self.id(box.id), element: box, key: Self.key(value, box.id)))
                }
            }
            for _ in 0..<Int.random(in: 0...30, using: &random) {
                let box = Box(nextID)
                let value = Int.random(in: range, using: &random)
                values[nextID] = value
                boxes[nextID] = box
                entering.append(.init(id: Self.id(nextID), element: box, key: Self.key(value, nextID)))
                nextID += 1
            }
            let diff = members.apply(leaving: leaving, staying: staying, entering: entering)
            let expected = values.sorted { Self.compare(($0.value, $0.key), ($1.value, $1.key)) < 0 }.map { $0.key }
            #expect(members.elements.map(\.id) == expected, "seed \(seed)")
            #expect(Self.replay(diff, old: old, new: members.elements).map(\.id) == expected, "seed \(seed): \(diff)")
            let newIndex = Dictionary(uniqueKeysWithValues: members.elements.enumerated().map { ($0.element.id, $0.offset) })
            #expect(diff.updated == IndexSet(stayingIDs.compactMap { newIndex[$0] }))
            #expect(diff.inserted == IndexSet(entering.compactMap { newIndex[Int($0.id.primaryKey ?? -1)] }))
            #expect(diff.moved.allSatisfy { diff.updated.contains($0.to) })
            #expect(diff.deleted.count == leaving.count)
            for id in values.keys { #expect(members.index(of: Self.id(id)) == newIndex[id]) }
            let oldIndex = Dictionary(uniqueKeysWithValues: old.enumerated().map { ($0.element.id, $0.offset) })
            let leavingInOrder = leaving.compactMap(\.primaryKey).map { Int($0) }.sorted { (oldIndex[$0] ?? 0) < (oldIndex[$1] ?? 0) }
            #expect(members.lastDeleted.compactMap(\.primaryKey).map { Int($0) } == leavingInOrder)
        }
    }

    @Test func aKeyChangeThatPassesNobodyIsAnUpdateNotAMove() {
        var members = Members()
        let boxes = (0..<3).map(Box.init)
        members.reset(boxes.map { .init(id: Self.id($0.id), element: $0, key: Self.key($0.id * 10, $0.id)) })
        let small = members.apply(leaving: [], staying: [.init(id: Self.id(1), element: boxes[1], key: Self.key(11, 1))], entering: [])
        #expect(small.moved.isEmpty)
        #expect(small.updated == [1])
        let past = members.apply(leaving: [], staying: [.init(id: Self.id(0), element: boxes[0], key: Self.key(25, 0))], entering: [])
        #expect(past.moved == [ControllerMove(from: 0, to: 2)])
        #expect(past.updated == [2])
        #expect(members.elements.map(\.id) == [1, 2, 0])
    }

    @Test func runsOfEqualFirstValuesAreFoundByExponentialSearch() {
        var members = Members()
        let values = [1, 1, 1, 2, 3, 3, 3, 3, 3, 3, 3, 9]
        members.reset(values.enumerated().map { .init(id: Self.id($0.offset), element: Box($0.offset), key: Self.key($0.element, $0.offset)) })
        var runs: [Range<Int>] = []
        var start = 0
        while start < members.count {
            let end = members.endOfRun(from: start, sameGroup: ControllerSortKey.sameFirstTerm)
            runs.append(start..<end)
            start = end
        }
        #expect(runs == [0..<3, 3..<4, 4..<11, 11..<12])
    }
}
