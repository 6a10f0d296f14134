/// A child context could not do what was asked (see
/// `ManagedObjectContext.newChildContext(name:)`).
///
/// For example, a child's save after its parent deleted an object the child changed:
///
/// ```swift
/// do {
///     try child.save()
/// } catch let error as ChildContextError where error.code == .objectGoneFromParent {
///     print(error)   // save(): User/42 is no longer in the parent context (deleted there, …)
/// }
/// ```
public struct ChildContextError: Error, Sendable, Equatable, DescribedError {
    /// What went wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ChildContextError.Code.unsupported { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case unsupported, objectGoneFromParent
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The call needs the database directly (it writes and commits, streams rows
        /// through a cursor, or follows the store's saves), so a child context refuses it
        /// rather than go around its parent. `advice` says what to do instead.
        public static let unsupported = Code(.unsupported)
        /// `call` names an object (`objectID`) the parent context no longer has: deleted
        /// there (saved or not), or forgotten by its `reset()` or `rollback()` since the
        /// child read it. Nothing was changed in the parent.
        public static let objectGoneFromParent = Code(.objectGoneFromParent)

        /// The code's name, such as `unsupported`.
        public var description: String { base.rawValue }
    }

    /// What went wrong, broadly.
    public let code: Code
    /// Names the call, the object and what to do.
    public let message: String
    /// The call that was refused or failed, such as `save()`.
    public let call: String
    /// What to do instead (`unsupported`).
    public private(set) var advice: String?
    /// The object the parent no longer has (`objectGoneFromParent`).
    public private(set) var objectID: ObjectID?

    package var contextFields: [ErrorContextField?] {
        [.name("call", call), .name("advice", advice), .name("objectID", objectID)]
    }

    /// The call needs the database directly, so a child context refuses it.
    public static func unsupported(call: String, advice: String) -> ChildContextError {
        ChildContextError(
            code: .unsupported, message: "\(call) is not available in a child context: \(advice)", call: call,
            advice: advice)
    }

    /// `call` names an object the parent context no longer has.
    public static func objectGoneFromParent(_ id: ObjectID, call: String) -> ChildContextError {
        ChildContextError(
            code: .objectGoneFromParent,
            message: "\(call): \(id) is no longer in the parent context (deleted there, or forgotten by its reset "
                + "or rollback); the parent was left as it was: roll the child back or re-read the object",
            call: call, objectID: id)
    }
}
