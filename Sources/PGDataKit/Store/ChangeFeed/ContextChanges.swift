import Foundation

/// What a save or a merge changed: the IDs of inserted, updated and deleted objects and
/// the keys changed on each updated object (Core Data's did-save / objects-did-change
/// notification contents).
public struct ContextChanges: Sendable, Equatable {
    /// Objects inserted.
    public var inserted: Set<ObjectID> = []
    /// Objects updated.
    public var updated: Set<ObjectID> = []
    /// Objects deleted.
    public var deleted: Set<ObjectID> = []
    /// For each updated object, the attributes and relationships that changed.
    public var changedKeys: [ObjectID: Set<String>] = [:]

    /// An empty change set.
    public init() {}

    /// Whether nothing changed.
    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
}
