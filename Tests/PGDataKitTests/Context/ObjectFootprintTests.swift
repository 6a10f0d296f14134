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
        // 216 bytes before the rarely used fields moved to `ObjectExtras`, 168 before the
        // values and the snapshot became runs in shared blocks (`AttributeValues`, two
        // words each where an array reference was one; a fetched object has no values
        // array of its own since: 32 bytes and an allocation less). A field added to
        // every object shows here.
        #expect(!ManagedObject().storage.hasExtras)
        let base = Self.allocatedBytes { ManagedObject() }
        #expect(base <= 184, "ManagedObject takes \(base) bytes")
        // Each attribute's wrapper is stored in the object (the default, the column name,
        // the slot marker).
        let note = Self.allocatedBytes { FootprintNote() }
        #expect(note <= base + 2 * MemoryLayout<Attribute<String>>.stride, "a two-attribute object takes \(note) bytes")
    }

    @Test func extrasAreAllocatedOnFirstWriteAndReadAsDefaultsBefore() {
        var storage = ObjectStorage()
        #expect(storage.loadedToMany.isEmpty && storage.joinMembers.isEmpty)
        #expect(storage.snapshotTemporaryTargets == nil && storage.jsonKeeper == nil && storage.lastAccess == nil)
        storage.setSnapshotTemporaryTargets(nil)
        storage.setJoinMembers(nil, at: 2)
        storage.setLastAccess(nil)
        storage.setLoaded(2, false)
        storage.forgetLoaded()
        storage.forgetJoinMembers()
        let updated = storage.updateJoinMember(at: 2) { $0.stored.insert(1) }
        #expect(updated == nil, "no members to change")
        #expect(!storage.hasExtras, "reads and clearing writes allocate nothing")

        storage.setLoaded(2, true)
        storage.updateJoinMembers(at: 2) { $0.stored.insert(7) }
        storage.updateJoinMember(at: 2) { $0.stored.insert(8) }
        #expect(storage.hasExtras)
        #expect(storage.loadedToMany == [2] && storage.isLoaded(2) && !storage.isLoaded(3))
        #expect(storage.joinMembers(at: 2)?.stored == [7, 8], "in-place changes reach the extras")
        storage.setLastAccess((true, 1))
        #expect(storage.lastAccess?.index == 1)
    }
}
