import Foundation

/// The members of a controller in order, each with its sort key, and the diff one batch
/// of changes makes: which old indexes left, which new indexes entered, which members
/// were updated, and which of those moved.
///
/// Keys are totally ordered (ties only for the same member: the primary key
/// breaks them), so a member's index is found by binary search on the key it was placed
/// with — also after its object's values changed, which is what a change set is about.
/// Keys and IDs are concrete types so that the searches compile to direct comparisons.
struct OrderedMembers<Element: AnyObject> {
    typealias ID = ObjectID
    typealias Key = ControllerSortKey

    /// A member: its identity, object and key.
    struct Entry {
        var id: ID
        var element: Element
        var key: Key
    }

    /// The members in order.
    private(set) var elements: [Element] = []
    /// Their keys, in the same order.
    private(set) var keys: [Key] = []
    private var byID: [ID: (element: Element, key: Key)] = [:]
    /// The IDs of the members the last `apply` removed, by ascending old index.
    private(set) var lastDeleted: [ID] = []

    init() {}

    @inline(__always)
    private func compare(_ a: Key, _ b: Key) -> Int { ControllerSortKey.compare(a, b) }

    var count: Int { elements.count }

    /// The member with an ID: its object and the key it is placed with.
    func member(_ id: ID) -> (element: Element, key: Key)? { byID[id] }

    /// Replaces every member, in key order (the entries are sorted when they are not
    /// already; a later duplicate ID is dropped).
    mutating func reset(_ entries: [Entry]) {
        var unique: [Entry] = []
        unique.reserveCapacity(entries.count)
        byID = [:]
        byID.reserveCapacity(entries.count)
        for entry in entries where byID[entry.id] == nil {
            byID[entry.id] = (entry.element, entry.key)
            unique.append(entry)
        }
        var sorted = true
        for index in unique.indices.dropFirst() where compare(unique[index - 1].key, unique[index].key) > 0 {
            sorted = false
            break
        }
        if !sorted { unique.sort { compare($0.key, $1.key) < 0 } }
        elements = unique.map(\.element)
        keys = unique.map(\.key)
    }

    /// Files a member under a new ID (an object's temporary ID became permanent).
    mutating func rekey(from old: ID, to new: ID) {
        guard let member = byID.removeValue(forKey: old) else { return }
        byID[new] = member
    }

    /// The index of a member: a binary search on its key, checked by identity.
    func index(of id: ID) -> Int? {
        guard let (element, key) = byID[id] else { return nil }
        let candidate = lowerBound(key)
        if candidate < elements.count && elements[candidate] === element { return candidate }
        return elements.firstIndex { $0 === element }
    }

    /// The first index whose key is not below `key`.
    func lowerBound(_ key: Key) -> Int {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if compare(keys[middle], key) < 0 { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The first index at or after `start` whose key differs from `keys[start]` by
    /// `sameGroup` (an exponential then binary search: runs of one group are found in
    /// logarithmic time).
    func endOfRun(from start: Int, sameGroup: (Key, Key) -> Bool) -> Int {
        let first = keys[start]
        var step = 1
        var low = start
        var high = start + 1
        while high < keys.count && sameGroup(first, keys[high]) {
            low = high
            step *= 2
            high = Swift.min(keys.count, high + step)
        }
        // keys[low] is in the group; keys[high] (if any) is not.
        var lower = low + 1
        var upper = high
        while lower < upper {
            let middle = (lower + upper) / 2
            if sameGroup(first, keys[middle]) { lower = middle + 1 } else { upper = middle }
        }
        return lower
    }

    /// Applies one batch: `leaving` members go, `staying` members take their new key
    /// (and object, when it was replaced), `entering` objects come in at their key.
    /// Unknown leaving or staying IDs and entering IDs that are members already are
    /// ignored.
    ///
    /// The diff reads like a table view's batch update: remove the `deleted` and the
    /// `moved` sources from the old order, then put the `inserted` and the `moved`
    /// destinations at their new indexes; the other members keep their relative order.
    /// `updated` holds the new index of every staying member, moved or not.
    mutating func apply(leaving: [ID], staying: [Entry], entering: [Entry]) -> MembershipDiff {
        var diff = MembershipDiff()
        var removals: [Int] = []
        var gone = Set<ID>()
        var deleted: [(index: Int, id: ID)] = []
        for id in leaving where gone.insert(id).inserted {
            guard let index = index(of: id) else { continue }
            removals.append(index)
            diff.deleted.insert(index)
            deleted.append((index, id))
            byID.removeValue(forKey: id)
        }
        lastDeleted = deleted.sorted { $0.index < $1.index }.map(\.id)
        var insertions: [(entry: Entry, oldIndex: Int?)] = []
        var unmoved: [ID] = []
        var seen = Set<ID>()
        for entry in staying where !gone.contains(entry.id) && seen.insert(entry.id).inserted {
            guard let index = index(of: entry.id), let placed = byID[entry.id] else { continue }
            if compare(placed.key, entry.key) != 0 {
                removals.append(index)
                insertions.append((entry, index))
            } else {
                if placed.element !== entry.element { elements[index] = entry.element }
                byID[entry.id] = (entry.element, placed.key)
                unmoved.append(entry.id)
            }
        }
        for entry in entering where byID[entry.id] == nil && seen.insert(entry.id).inserted {
            insertions.append((entry, nil))
        }
        guard !removals.isEmpty || !insertions.isEmpty else {
            for id in unmoved { if let index = index(of: id) { diff.updated.insert(index) } }
            return diff
        }
        removals = Array(Set(removals)).sorted()  // distinct, whatever the IDs say
        insertions.sort { compare($0.entry.key, $1.entry.key) < 0 }
        let newIndexes = rearrange(removing: removals, inserting: insertions.map(\.entry))
        for insertion in insertions { byID[insertion.entry.id] = (insertion.entry.element, insertion.entry.key) }

        // Moves: a staying member whose key changed keeps its place (and is only
        // updated) when it sits between the same unchanged members before and after,
        // alone among the repositioned ones there; otherwise it moved.
        var movers: [(oldIndex: Int, newIndex: Int, oldGap: Int, newGap: Int)] = []
        var oldGaps: [Int: Int] = [:]
        var newGaps: [Int: Int] = [:]
        var removedBefore = 0
        var removalPosition: [Int: Int] = [:]
        for removal in removals {
            removalPosition[removal] = removedBefore
            removedBefore += 1
        }
        for (position, insertion) in insertions.enumerated() {
            let newIndex = newIndexes[position]
            guard let oldIndex = insertion.oldIndex else {
                diff.inserted.insert(newIndex)
                continue
            }
            let oldGap = oldIndex - (removalPosition[oldIndex] ?? 0)
            let newGap = newIndex - position
            oldGaps[oldGap, default: 0] += 1
            newGaps[newGap, default: 0] += 1
            movers.append((oldIndex, newIndex, oldGap, newGap))
        }
        for mover in movers {
            diff.updated.insert(mover.newIndex)
            if mover.oldGap != mover.newGap || oldGaps[mover.oldGap] != 1 || newGaps[mover.newGap] != 1 {
                diff.moved.append(ControllerMove(from: mover.oldIndex, to: mover.newIndex))
            }
        }
        for id in unmoved { if let index = index(of: id) { diff.updated.insert(index) } }
        diff.moved.sort { $0.to < $1.to }
        return diff
    }

    /// Removes the members at `removals` (ascending old indexes) and inserts `insertions`
    /// (ascending keys); returns the new index of each insertion. Every other member is
    /// moved at most twice (memory moves, no retains), whatever the batch's size.
    private mutating func rearrange(removing removals: [Int], inserting insertions: [Entry]) -> [Int] {
        Self.remove(at: removals, from: &elements)
        Self.remove(at: removals, from: &keys)
        var positions: [Int] = []
        positions.reserveCapacity(insertions.count)
        var floor = 0
        for (offset, entry) in insertions.enumerated() {
            floor = Swift.max(floor, lowerBound(entry.key))  // ascending, so the moves below stay in bounds
            positions.append(floor + offset)
        }
        Self.insert(insertions.map(\.element), at: positions, into: &elements)
        Self.insert(insertions.map(\.key), at: positions, into: &keys)
        return positions
    }

    /// Removes the values at ascending, distinct `indexes`: the values between them move
    /// left once, the removed ones go to the end and are released there.
    private static func remove<Value>(at indexes: [Int], from array: inout [Value]) {
        guard !indexes.isEmpty else { return }
        let count = array.count
        // Unsafe: `indexes` are distinct, ascending and below `count` (`apply` sorts a set of
        // member indexes), so each value moves out once and every gap is filled again before
        // the closure ends: all `count` slots are initialized then, none twice.
        array.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            // Unsafe: scratch for the removed values, all moved back into the array before
            // the `defer` deallocates it, so it frees uninitialized memory only.
            let removed = UnsafeMutablePointer<Value>.allocate(capacity: indexes.count)
            defer { removed.deallocate() }
            var write = indexes[0]
            for (position, index) in indexes.enumerated() {
                (removed + position).moveInitialize(from: base + index, count: 1)
                let end = position + 1 < indexes.count ? indexes[position + 1] : count
                let length = end - (index + 1)
                if length > 0 { (base + write).moveInitialize(from: base + index + 1, count: length) }
                write += Swift.max(0, length)
            }
            (base + write).moveInitialize(from: removed, count: indexes.count)
        }
        array.removeLast(indexes.count)
    }

    /// Inserts `values` so that value `j` ends at `positions[j]` (ascending final
    /// indexes): the values already there move right once, from the end.
    private static func insert<Value>(_ values: [Value], at positions: [Int], into array: inout [Value]) {
        guard !values.isEmpty else { return }
        let count = array.count
        array.append(contentsOf: values)
        // Unsafe: `positions` ascend and each `positions[j] - j` lies in `0...count`
        // (`rearrange` takes them from `lowerBound`), so each old value moves once, into a
        // free slot, and every slot is initialized again when the closure ends.
        array.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            // Unsafe: scratch for the appended values, each moved back into the array before
            // the `defer` deallocates it, so it frees uninitialized memory only.
            let incoming = UnsafeMutablePointer<Value>.allocate(capacity: values.count)
            defer { incoming.deallocate() }
            incoming.moveInitialize(from: base + count, count: values.count)
            var segmentEnd = count
            for position in stride(from: values.count - 1, through: 0, by: -1) {
                let start = positions[position] - position  // where it goes among the old values
                let length = segmentEnd - start
                if length > 0 { (base + start + position + 1).moveInitialize(from: base + start, count: length) }
                (base + positions[position]).moveInitialize(from: incoming + position, count: 1)
                segmentEnd = start
            }
        }
    }
}

/// How one batch rearranged a controller's members (see `OrderedMembers.apply`).
struct MembershipDiff: Equatable {
    /// Old indexes of members that left.
    var deleted = IndexSet()
    /// New indexes of members that entered.
    var inserted = IndexSet()
    /// New indexes of staying members that changed (moved ones included).
    var updated = IndexSet()
    /// Staying members whose place among the others changed.
    var moved: [ControllerMove] = []

    /// Whether nothing changed.
    var isEmpty: Bool { deleted.isEmpty && inserted.isEmpty && updated.isEmpty && moved.isEmpty }
}
