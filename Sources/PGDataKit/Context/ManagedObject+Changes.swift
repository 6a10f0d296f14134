import Foundation

/// What changed in an object since its snapshot (the values last saved or fetched).
extension ManagedObject {
    /// Whether any attribute or to-one relationship differs from the committed values.
    var hasPersistentChangedValues: Bool { hasChangedAttributes || !changedToOneIndexes.isEmpty }

    /// Whether any attribute differs from its committed value (stops at the first).
    var hasChangedAttributes: Bool {
        prepareStorage()
        guard let snapshot else { return !values.isEmpty }
        let attributes = entity.attributes
        if let (certain, maybe) = changeHints.masks(count: attributes.count) {
            if certain != 0 { return true }
            for index in attributes.indices where maybe & (1 << index) != 0 {
                if snapshot[index] != values[index] { return true }
            }
            return false
        }
        for index in attributes.indices where snapshot[index] != values[index] { return true }
        return false
    }

    /// `changedAttributeIndexes` as a bit mask (bit `i` for attribute `i`), without an
    /// array; `nil` for an entity of more than 64 attributes.
    var changedAttributeMask: UInt64? {
        let attributes = entity.attributes
        guard attributes.count <= 64 else { return nil }
        if values.count != attributes.count { prepareStorage() }
        guard let snapshot else { return attributes.count == 64 ? .max : (1 << UInt64(attributes.count)) - 1 }
        let hints = changeHints.masks(count: attributes.count)
        // Unsafe: both are read inside the closures only, and hold one value per attribute:
        // `values` as prepared above, a snapshot as committed `values` or a decoded row.
        return snapshot.withUnsafeBufferPointer { old in
            values.withUnsafeBufferPointer { new -> UInt64 in
                guard let old = old.baseAddress, let new = new.baseAddress else { return 0 }
                var mask: UInt64 = 0
                // Only the attributes set since the snapshot can differ; those set once
                // from their committed value do.
                let (certain, candidates) = hints.map { ($0.certain, $0.maybe & ~$0.certain) } ?? (0, .max)
                for index in attributes.indices where candidates & (1 << UInt64(index)) != 0 {
                    if old[index] != new[index] { mask |= 1 << UInt64(index) }
                }
                return mask | certain
            }
        }
    }

    var changedAttributeIndexes: [Int] {
        prepareStorage()
        guard let snapshot else { return Array(entity.attributes.indices) }
        let attributes = entity.attributes
        var changed: [Int] = []
        changed.reserveCapacity(attributes.count)
        let hints = changeHints.masks(count: attributes.count)
        // Unsafe: both are read inside the closures only, and hold one value per attribute:
        // `values` as prepared above, a snapshot as committed `values` or a decoded row.
        snapshot.withUnsafeBufferPointer { old in
            values.withUnsafeBufferPointer { new in
                guard let old = old.baseAddress, let new = new.baseAddress else { return }
                if let (certain, maybe) = hints {
                    // Only the attributes set since the snapshot can differ; those set once
                    // from their committed value do.
                    for index in attributes.indices where maybe & (1 << index) != 0 {
                        if certain & (1 << index) != 0 || old[index] != new[index] {
                            changed.append(index)
                        }
                    }
                    return
                }
                for index in attributes.indices where old[index] != new[index] {
                    changed.append(index)
                }
            }
        }
        return changed
    }

    var changedToOneIndexes: [Int] {
        let indexes = entity.toOneIndexes
        guard !indexes.isEmpty else { return [] }
        prepareStorage()
        return indexes.filter { index in
            // (A reference to an unsaved object is a change, unless a child context read
            // it so from its parent.)
            if case .object(let object) = toOne[index], object.objectID.isTemporaryID {
                return snapshotTemporaryTargets?[index] != object.objectID
            }
            if let temporary = snapshotTemporaryTargets, temporary[index] != nil { return true }
            let committed = snapshotKeys.count > index ? snapshotKeys[index] : nil
            return referencedKey(at: index) != committed
        }
    }

    /// The attributes, to-one and many-to-many relationships changed since the last save
    /// or fetch, with their new values (`nil` for `NULL`/none; a many-to-many
    /// relationship's objects as `[ManagedObject]`).
    public func changedValues() -> [String: Any?] {
        checkQueue()
        var changes: [String: Any?] = [:]
        for index in changedAttributeIndexes {
            changes[entity.attributes[index].name] = .some(values[index].anyValue)
        }
        for index in changedToOneIndexes {
            changes[entity.relationships[index].name] = .some(relatedObjects(at: index).first)
        }
        for (index, state) in joinMembers where state.hasChanges {
            changes[entity.relationships[index].name] = .some(relatedObjects(at: index))
        }
        return changes
    }

    /// The last saved or fetched values of the given keys (all attributes if `nil`);
    /// a to-one relationship's value is the related row's primary key.
    public func committedValues(forKeys keys: [String]?) -> [String: Any?] {
        checkQueue()
        prepareStorage()
        var result: [String: Any?] = [:]
        let wanted = keys.map(Set.init)
        for attribute in entity.attributes where wanted?.contains(attribute.name) ?? true {
            result[attribute.name] = .some(snapshot?[attribute.index].anyValue)
        }
        for relationship in entity.toOneRelationships where wanted?.contains(relationship.name) ?? false {
            result[relationship.name] = .some(snapshotKeys.count > relationship.index ? snapshotKeys[relationship.index] : nil)
        }
        return result
    }

    /// Makes the current values the committed ones (after a save or a fetch).
    func commitSnapshot() {
        let entity = self.entity
        if values.count != entity.defaultValues.count || toOne.count != entity.relationships.count { prepareStorage() }
        snapshot = values
        changeHints = .clean
        snapshotKeys =
            entity.relationships.isEmpty
            ? [] : entity.relationships.map { $0.columnName == nil ? nil : referencedKey(at: $0.index) }
        snapshotTemporaryTargets = nil
    }
}

/// What an object knows about which of its attributes differ from its snapshot, so a
/// save need not compare every attribute of every changed object: set when the values
/// and the snapshot are made equal (fetch, save), kept up to date by
/// `setStoredValue(_:at:)`, and forgotten (`unknown`) by any other write. Attributes
/// past the 64th are always compared.
struct ChangeHints {
    /// Nothing known: compare every attribute.
    static let unknown = ChangeHints(isKnown: false, maybe: 0, certain: 0)
    /// The values are the snapshot.
    static let clean = ChangeHints(isKnown: true, maybe: 0, certain: 0)

    let isKnown: Bool
    /// Attributes set since the snapshot (the others equal it).
    let maybe: UInt64
    /// Attributes set exactly once since the snapshot, to a value other than the
    /// committed one: they differ for sure.
    let certain: UInt64

    /// The masks, when they describe every attribute of an entity with `count` of them.
    @inline(__always)
    func masks(count: Int) -> (certain: UInt64, maybe: UInt64)? {
        isKnown && count <= 64 ? (certain, maybe) : nil
    }

    /// The hints after attribute `slot` is set to a value other than its current one.
    @inline(__always)
    func changing(_ slot: Int) -> ChangeHints {
        guard isKnown, slot < 64 else { return .unknown }
        let bit: UInt64 = 1 << UInt64(slot)
        // Untouched until now: it held the committed value, so the new one differs. Set
        // again: it may be back at the committed value.
        let certain = maybe & bit == 0 ? self.certain | bit : self.certain & ~bit
        return ChangeHints(isKnown: true, maybe: maybe | bit, certain: certain)
    }
}
