import Foundation

// How a model of `ManagedObject` subclasses is built, and how the context makes objects of
// an entity. The Model layer reads entity classes through `EntityObject` and names no type
// of this layer.

extension Model {
    /// Describes the given `ManagedObject` subclasses.
    ///
    /// For example:
    ///
    /// ```swift
    /// let model = try Model(entities: [User.self, Post.self])
    /// print(model.entity(for: User.self)?.tableName ?? "")  // users
    /// ```
    ///
    /// - Throws: `ModelError` listing every problem found.
    public convenience init(entities classes: [ManagedObject.Type]) throws {
        try self.init(describing: classes)
    }
}

extension EntityDescription {
    /// A new object of the entity's class, in no context.
    ///
    /// Every entity a context makes objects of is described from a `ManagedObject`
    /// subclass: `Model(entities:)` takes only those, and building the model refuses a
    /// relationship whose destination is not one of its entities; so the cast cannot fail.
    @inline(__always)
    func makeObject() -> ManagedObject {
        guard let object = objectClass.init() as? ManagedObject else {
            preconditionFailure("entity \(name): its class is not a ManagedObject subclass")
        }
        return object
    }
}
