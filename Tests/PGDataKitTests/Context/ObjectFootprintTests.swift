import Foundation
import Testing

@testable import PGDataKit

/// glibc's `malloc_usable_size` (declared in `<malloc.h>`, which the Glibc module does
/// not export).
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer) -> Int

private final class FootprintNote: ManagedObject {
    @Attribute var title: String = ""
    @Attribute var rank: Int?
}

@Suite("Object footprint")
struct ObjectFootprintTests {
    /// The bytes malloc gives an object of this class: its instance size rounded up to
    /// malloc's bin. The smallest of several, as malloc may hand out a chunk a little
    /// larger than asked for when it splits a free one.
    static func allocatedBytes(_ make: () -> AnyObject) -> Int {
        let objects = (0..<16).map { _ in make() }
        return objects.map { mallocUsableSize(Unmanaged.passUnretained($0).toOpaque()) }.min() ?? 0
    }

    @Test func anObjectWithoutExtrasIsSmall() {
        // 216 bytes before the rarely used fields moved to `ObjectExtras`; a field added
        // to every object shows here.
        #expect(ManagedObject().extras == nil)
        let base = Self.allocatedBytes { ManagedObject() }
        #expect(base <= 168, "ManagedObject takes \(base) bytes")
        // Each attribute's wrapper is stored in the object (the default, the column name,
        // the slot marker).
        let note = Self.allocatedBytes { FootprintNote() }
        #expect(note <= base + 2 * MemoryLayout<Attribute<String>>.stride, "a two-attribute object takes \(note) bytes")
    }

    @Test func extrasAreAllocatedOnFirstWriteAndReadAsDefaultsBefore() {
        let object = ManagedObject()
        #expect(object.loadedToMany.isEmpty && object.joinMembers.isEmpty)
        #expect(object.snapshotTemporaryTargets == nil && object.jsonKeeper == nil && object.lastAccess == nil)
        object.snapshotTemporaryTargets = nil
        #expect(object.extras == nil, "reads and clearing writes allocate nothing")

        object.loadedToMany.insert(2)
        object.joinMembers[2, default: JoinMembers()].stored.insert(7)
        object.joinMembers[2]?.stored.insert(8)
        #expect(object.extras != nil)
        #expect(object.loadedToMany == [2])
        #expect(object.joinMembers[2]?.stored == [7, 8], "in-place mutations reach the extras")
        object.lastAccess = (true, 1)
        #expect(object.lastAccess?.index == 1)
    }
}
