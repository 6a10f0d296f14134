/// A child context could not do what was asked (see
/// `ManagedObjectContext.newChildContext(name:)`).
///
/// For example, a child's save after its parent deleted an object the child changed:
///
/// ```swift
/// do {
///     try child.save()
/// } catch let error as ChildContextError {
///     print(error)   // save(): User/42 is no longer in the parent context (deleted there, …)
/// }
/// ```
public enum ChildContextError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call needs the database directly (it writes and commits, streams rows through
    /// a cursor, or follows the store's saves), so a child context refuses it rather than
    /// go around its parent. `advice` says what to do instead.
    case unsupported(call: String, advice: String)
    /// `call` names an object the parent context no longer has: deleted there (saved or
    /// not), or forgotten by its `reset()` or `rollback()` since the child read it.
    /// Nothing was changed in the parent.
    case objectGoneFromParent(ObjectID, call: String)

    /// Names the call, the object and what to do.
    public var description: String {
        switch self {
        case .unsupported(let call, let advice):
            return "\(call) is not available in a child context: \(advice)"
        case .objectGoneFromParent(let id, let call):
            return "\(call): \(id) is no longer in the parent context (deleted there, or forgotten by its reset "
                + "or rollback); the parent was left as it was: roll the child back or re-read the object"
        }
    }
}
