/// The registered objects of one entity by the owner their to-one relationship (the
/// inverse of a one-to-many) points at: an object held (`byObject`), or a primary key
/// not loaded yet (`byKey`). See `ManagedObjectContext.members(of:relationship:)`.
struct MembersIndex {
    /// An entity and the index of its to-one relationship.
    struct Key: Hashable {
        let entity: String
        let relationship: Int
    }

    /// `ContextReference.membershipGeneration` when built.
    var generation = 0
    /// Members whose to-one holds the owner object.
    var byObject: [ObjectIdentifier: [ManagedObject]] = [:]
    /// Members whose to-one holds the owner's primary key.
    var byKey: [Int64: [ManagedObject]] = [:]
}
