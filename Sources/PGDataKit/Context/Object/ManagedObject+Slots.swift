import Foundation

/// Where a typed property's value lives: the storage position of the property behind a
/// property wrapper, found once per entity and key path.
extension ManagedObject {
    /// The storage position of the property behind a wrapper's storage key path:
    /// cached per entity by key-path identity (`cachedSlot(for:)`, one call that is not
    /// generic, inlined into the property's accessor); on a miss, found by marking the
    /// wrapper and looking for the mark through reflection (`findSlot(of:_:)`).
    @inlinable
    static func slot<Object: ManagedObject, Wrapper: SlotHolder>(
        of object: Object, _ keyPath: ReferenceWritableKeyPath<Object, Wrapper>
    ) -> Int {
        let cached = object.cachedSlot(for: keyPath)
        return cached >= 0 ? cached : findSlot(of: object, keyPath)
    }

    /// The cached storage position of the property behind a storage key path, `-1` when
    /// the entity has not cached it yet.
    @usableFromInline
    final func cachedSlot(for keyPath: AnyKeyPath) -> Int {
        entity.cachedSlot(for: keyPath) ?? -1
    }

    /// `slot(of:_:)` on a cache miss: the property found through reflection, then cached.
    @usableFromInline @inline(never)
    static func findSlot<Object: ManagedObject, Wrapper: SlotHolder>(
        of object: Object, _ keyPath: ReferenceWritableKeyPath<Object, Wrapper>
    ) -> Int {
        let entity = object.entity
        if let cached = entity.cachedSlot(for: keyPath) { return cached }
        let marker = SlotMarker.next()
        object[keyPath: keyPath].slot = marker
        defer { object[keyPath: keyPath].slot = -1 }
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            for child in current.children {
                guard let label = child.label, label.hasPrefix("_"), let holder = child.value as? any SlotHolder,
                    holder.slot == marker
                else { continue }
                let name = String(label.dropFirst())
                let index = Wrapper.isAttribute ? entity.attribute(named: name)?.index : entity.relationship(named: name)?.index
                guard let index else { break }
                entity.cacheSlot(index, for: keyPath)
                return index
            }
            mirror = current.superclassMirror
        }
        preconditionFailure("property wrapper of \(Object.self) not found by reflection")
    }
}
