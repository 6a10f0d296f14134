import Foundation

extension ManagedObject {
    /// A new object of the same entity in the same context (RHManagedObject's `clone`):
    /// the attribute values copied, except unique ones, which keep a new object's
    /// defaults (a copy would only fail the save); the to-one relationships of
    /// many-to-one kind copied too (the copy joins the same owners). To-many,
    /// many-to-many and one-to-one relationships are not copied: they would move the
    /// related objects, or take the partner, away from this object.
    ///
    /// For example:
    ///
    /// ```swift
    /// let copy = try post.clone()
    /// copy.postID = "p2"           // unique: not copied
    /// try context.save()
    /// ```
    ///
    /// - Throws: `ManagedObjectError.objectDeleted` when this object's row is gone.
    public func clone() throws -> Self {
        checkQueue()
        if isMissingFromStore { throw ManagedObjectError.objectDeleted(objectID) }
        let copy = Self()
        managedObjectContext?.insert(copy)
        for attribute in entity.attributes where !attribute.isUnique {
            try copy.setValue(try value(forKey: attribute.name), forKey: attribute.name)
        }
        for relationship in entity.relationships
        where !relationship.isToMany && !relationship.isOneToOne && relationship.columnName != nil {
            try copy.setValue(try value(forKey: relationship.name), forKey: relationship.name)
        }
        return copy
    }
}
