import Foundation

/// Told what a `ManagedObjectController` fetched and how saves changed its objects
/// (SQKDataKit's `SQKManagedObjectControllerDelegate`). Every method has an empty default;
/// implement those you need. The controller calls them on its context's queue, each one
/// before the matching closure (`onFetched`, `onUpdated`, …) when both are set.
///
/// For example:
///
/// ```swift
/// final class UserList: ManagedObjectControllerDelegate {
///     func controller(_ controller: ManagedObjectController<User>, didInsertObjectsAt indexes: IndexSet) {
///         print("new users at \(Array(indexes))")
///     }
/// }
/// let list = UserList()
/// controller.delegate = list   // held weakly
/// ```
public protocol ManagedObjectControllerDelegate<Object>: AnyObject {
    /// The entity the controller manages.
    associatedtype Object: ManagedObject

    /// `performFetch()` loaded the objects; `indexes` are all of them.
    func controller(_ controller: ManagedObjectController<Object>, didFetchObjectsAt indexes: IndexSet)
    /// Objects were saved and stayed; `indexes` are in the new `objects`.
    func controller(_ controller: ManagedObjectController<Object>, didUpdateObjectsAt indexes: IndexSet)
    /// Objects entered; `indexes` are in the new `objects`.
    func controller(_ controller: ManagedObjectController<Object>, didInsertObjectsAt indexes: IndexSet)
    /// Objects left; `indexes` are in the old `objects`.
    func controller(_ controller: ManagedObjectController<Object>, didDeleteObjectsAt indexes: IndexSet)
    /// The whole change set (moves, sections, the large-change flag), after the calls
    /// above.
    func controller(_ controller: ManagedObjectController<Object>, didChange changes: ControllerChanges)
    /// Asking the database about a change set failed; the objects stay as they were
    /// (deleted ones left) until the next change set or `performFetch()`.
    func controller(_ controller: ManagedObjectController<Object>, didFailWith error: any Error)
}

extension ManagedObjectControllerDelegate {
    /// Does nothing.
    public func controller(_ controller: ManagedObjectController<Object>, didFetchObjectsAt indexes: IndexSet) {}
    /// Does nothing.
    public func controller(_ controller: ManagedObjectController<Object>, didUpdateObjectsAt indexes: IndexSet) {}
    /// Does nothing.
    public func controller(_ controller: ManagedObjectController<Object>, didInsertObjectsAt indexes: IndexSet) {}
    /// Does nothing.
    public func controller(_ controller: ManagedObjectController<Object>, didDeleteObjectsAt indexes: IndexSet) {}
    /// Does nothing.
    public func controller(_ controller: ManagedObjectController<Object>, didChange changes: ControllerChanges) {}
    /// Does nothing.
    public func controller(_ controller: ManagedObjectController<Object>, didFailWith error: any Error) {}
}
