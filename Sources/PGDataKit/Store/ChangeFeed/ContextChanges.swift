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
    /// The concrete entity of each changed object of a sub-entity, by ID: the IDs of an
    /// entity hierarchy name its root (an `Article`'s is `Content/42`), so this says
    /// which kind each is (`"Article"`). Empty outside hierarchies. Change records carry
    /// it, so merges in other processes and the history have it too.
    public var entityNames: [ObjectID: String] = [:]

    /// The concrete entity of a changed object: `entityNames[id]`, else the entity its
    /// ID names.
    public func entityName(of id: ObjectID) -> String { entityNames[id] ?? id.entityName }

    /// An empty change set.
    public init() {}

    /// Whether nothing changed.
    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
}
