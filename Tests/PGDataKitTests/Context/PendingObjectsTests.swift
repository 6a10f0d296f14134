import Foundation
import Testing

@testable import PGDataKit

@Suite("Pending objects: one list, each object's kinds of change on the object")
struct PendingObjectsTests {
    /// Every listed object is where its position says, and has some kind of change.
    private func checkInvariants(_ pending: PendingObjects, sourceLocation: SourceLocation = #_sourceLocation) {
        for (position, object) in pending.list.enumerated() {
            #expect(Int(object.pendingSlot.position) == position, sourceLocation: sourceLocation)
            #expect(!object.pendingSlot.membership.isEmpty, sourceLocation: sourceLocation)
        }
        for kind in [PendingMembership.inserted, .changed, .deleted] {
            #expect(pending.count(of: kind) == pending.list.filter { $0.pendingSlot.membership.contains(kind) }.count, sourceLocation: sourceLocation)
        }
    }

    @Test func anObjectIsListedOnceWhateverItsKindsOfChange() {
        var pending = PendingObjects()
        let (a, b) = (ManagedObject(), ManagedObject())
        let first = pending.insert(a, into: .changed)
        let again = pending.insert(a, into: .changed)
        #expect(first && !again, "the second time it was already changed")
        let deleted = pending.insert(a, into: .deleted)
        let inserted = pending.insert(b, into: .inserted)
        #expect(deleted && inserted)
        #expect(pending.count == 2)
        #expect(pending.view(.changed).contains(a) && pending.view(.deleted).contains(a) && !pending.view(.inserted).contains(a))
        #expect(Array(pending.view(.inserted)) == [b])
        checkInvariants(pending)

        let removed = pending.remove(a, from: .changed)
        let removedAgain = pending.remove(a, from: .changed)
        #expect(removed === a && removedAgain == nil, "the second time it was no longer changed")
        #expect(pending.count == 2, "still deleted: still listed")
        let undeleted = pending.remove(a, from: .deleted)
        #expect(undeleted === a)
        #expect(pending.list.map(ObjectIdentifier.init) == [ObjectIdentifier(b)], "the last object took its place")
        #expect(a.pendingSlot.membership.isEmpty)
        checkInvariants(pending)
    }

    @Test func anObjectLeavingTheContextLosesEveryKindAtOnce() {
        var pending = PendingObjects()
        let (a, b, c) = (ManagedObject(), ManagedObject(), ManagedObject())
        pending.insert(a, into: .changed)
        pending.insert(a, into: .deleted)
        pending.insert(b, into: .inserted)
        pending.insert(c, into: .changed)
        pending.remove(a)
        pending.remove(a)  // (no longer listed: nothing happens)
        #expect(a.pendingSlot.membership.isEmpty && pending.count == 2)
        #expect(pending.count(of: .changed) == 1 && pending.count(of: .deleted) == 0 && pending.count(of: .inserted) == 1)
        checkInvariants(pending)
    }

    @Test func removalsKeepPositionsTrueAndOtherKinds() {
        var pending = PendingObjects()
        let objects = (0..<50).map { _ in ManagedObject() }
        for (index, object) in objects.enumerated() {
            pending.insert(object, into: index.isMultiple(of: 3) ? .inserted : .changed)
            if index.isMultiple(of: 5) { pending.insert(object, into: .deleted) }
        }
        checkInvariants(pending)
        for object in objects.enumerated().filter({ $0.offset.isMultiple(of: 4) }).map(\.element) {
            pending.remove(object, from: .changed)
        }
        checkInvariants(pending)
        pending.removeAll(.changed) { ObjectIdentifier($0).hashValue.isMultiple(of: 2) }
        checkInvariants(pending)
        pending.removeAll(.deleted)
        #expect(pending.view(.deleted).isEmpty && pending.count(of: .deleted) == 0)
        #expect(pending.count(of: .inserted) == 17, "inserted objects untouched")
        checkInvariants(pending)
        pending.removeAll(keepingCapacity: true)
        #expect(pending.count == 0 && objects.allSatisfy { $0.pendingSlot.membership.isEmpty })
    }

    @Test func iterationSkipsObjectsThatLeftAfterTheViewWasTaken() {
        var pending = PendingObjects()
        let objects = (0..<6).map { _ in ManagedObject() }
        for object in objects { pending.insert(object, into: .changed) }
        var visited: [ManagedObject] = []
        for object in pending.view(.changed) {
            visited.append(object)
            if object === objects[0] { pending.remove(objects[3], from: .changed) }  // not reached yet
        }
        #expect(visited.count == 5 && !visited.contains { $0 === objects[3] })
        #expect(pending.view(.changed).first === objects[0])
        #expect(pending.view(.changed).union(pending.view(.inserted)).count == 5)
    }
}
