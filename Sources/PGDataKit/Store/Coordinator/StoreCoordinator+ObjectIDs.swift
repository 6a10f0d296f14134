import Foundation

extension StoreCoordinator {
    /// The object ID a URI names, if it names an entity of this coordinator's model
    /// (Core Data's `managedObjectID(forURIRepresentation:)`); `nil` otherwise. Nothing
    /// is read: whether the row still exists is for `existingObject(with:)` to say.
    ///
    /// For example:
    ///
    /// ```swift
    /// // A message from another process carried `user.objectID.uriRepresentation`:
    /// if let id = manager.coordinator.objectID(forURIRepresentation: url) {
    ///     let user = try context.existingObject(with: id) as? User
    /// }
    /// ```
    public func objectID(forURIRepresentation uri: URL) -> ObjectID? {
        guard let id = ObjectID(uriRepresentation: uri), model.entity(named: id.entityName) != nil else { return nil }
        return id
    }
}
