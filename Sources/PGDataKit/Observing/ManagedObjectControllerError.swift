/// A controller cannot do what was asked.
public enum ManagedObjectControllerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The controller was stopped (`stop()`), or its coordinator (manager) was closed.
    case stopped
    /// `sectionNameKeyPath` must be the key of the first sort descriptor (compared
    /// case-sensitively), so that each section is one run of the sorted objects.
    case sectionKeyPathNotSorted(sectionNameKeyPath: String, firstSortKey: String?)
    /// `ManagedObjectController(objects:)` needs objects of one context; the object
    /// with this ID belongs to none (or to another than the first's).
    case objectOutsideContext(ObjectID)
    /// `ManagedObjectController(objects:)` was given no objects and no context.
    case noObjects
    /// A paging controller's page size must be at least 1.
    case invalidPageSize(Int)

    /// What went wrong and what to do.
    public var description: String {
        switch self {
        case .stopped:
            return "the controller was stopped or its manager closed; create a new controller"
        case .sectionKeyPathNotSorted(let keyPath, let first):
            return "sectionNameKeyPath \(keyPath) must be the key of the first sort descriptor "
                + "(case-sensitive); the first is \(first ?? "missing")"
        case .objectOutsideContext(let id):
            return "\(id) does not belong to the context of the controller's other objects"
        case .noObjects:
            return "a controller of given objects needs at least one object, or a context"
        case .invalidPageSize(let size):
            return "page size \(size) must be at least 1"
        }
    }
}
