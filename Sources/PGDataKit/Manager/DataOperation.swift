import Foundation
import Synchronization

/// A unit of work as a Foundation `Operation` with a private context of its own
/// (SQKDataKit's `SQKCoreDataOperation`): subclass it and override `perform(in:)`, or
/// give it a closure. The work ends with `completeAndSave()`; errors are collected in
/// `errors`, and the operation finishes in every case — also when the work throws or
/// the save fails.
///
/// For example:
///
/// ```swift
/// let operation = DataOperation(manager: manager) { operation, context in
///     let user = try User.insertOrFetch(key: "userID", value: "u1", in: context)
///     user.name = "Ada"
///     operation.completeAndSave()
/// }
/// queue.addOperations([operation], waitUntilFinished: true)
/// if !operation.errors.isEmpty { print(operation.errors) }
///
/// final class RenameUsers: DataOperation {
///     override func perform(in context: ManagedObjectContext) throws {
///         for user in try User.fetchAll(in: context) { user.name = user.name?.uppercased() }
///         completeAndSave()
///     }
/// }
/// ```
///
/// The work runs synchronously on the context's queue inside `main()`: do it there, not
/// in callbacks that run later. A work that ends without `completeAndSave()` (or
/// `complete()`) saves nothing: its changes are rolled back. The context's saves are
/// merged into the manager's main context.
open class DataOperation: Operation, @unchecked Sendable {
    // Sendable: the manager and the work are immutable; the mutable state sits in a Mutex;
    // the context is used only on its queue.
    private struct State {
        var context: ManagedObjectContext?
        var errors: [any Error] = []
        var completed = false
        var saved = false
    }

    /// The manager whose private context the work gets.
    public let manager: ContextManager
    private let work: (@Sendable (DataOperation, ManagedObjectContext) throws -> Void)?
    private let state = Mutex(State())

    /// An operation whose work is `perform(in:)` of a subclass.
    public init(manager: ContextManager) {
        self.manager = manager
        self.work = nil
        super.init()
    }

    /// An operation whose work is a closure, called with the operation (to call
    /// `completeAndSave()` and `addError(_:)`) and its private context.
    public init(manager: ContextManager, work: @escaping @Sendable (DataOperation, ManagedObjectContext) throws -> Void) {
        self.manager = manager
        self.work = work
        super.init()
    }

    /// The work, on the private context's queue. Subclasses override it (without calling
    /// `super`); by default it calls the closure given at creation. A thrown error is
    /// collected in `errors`.
    open func perform(in context: ManagedObjectContext) throws {
        try work?(self, context)
    }

    /// Saves the private context and completes the operation; a failed save is collected
    /// in `errors` (the context's changes are then rolled back). Call it from the work.
    ///
    /// A save whose connection broke at the `COMMIT` counts as saved when it committed
    /// (see `ManagedObjectContext.save()`); a transient error in `errors` means nothing
    /// was committed, so the operation may be run again; a `SaveOutcomeUnknownError`
    /// means it may have been.
    public func completeAndSave() {
        guard let context = state.withLock({ $0.completed ? nil : $0.context }) else { return }
        do {
            try context.save()
            state.withLock {
                $0.completed = true
                $0.saved = true
            }
        } catch {
            context.rollback()
            state.withLock {
                $0.completed = true
                $0.errors.append(error)
            }
        }
    }

    /// Completes the operation without saving (the changes are rolled back).
    public func complete() {
        guard let context = state.withLock({ $0.completed ? nil : $0.context }) else { return }
        context.rollback()
        state.withLock { $0.completed = true }
    }

    /// Collects an error; the operation still finishes.
    public func addError(_ error: any Error) {
        state.withLock { $0.errors.append(error) }
    }

    /// The errors collected: thrown by the work, added with `addError(_:)`, or from the
    /// save.
    public var errors: [any Error] { state.withLock { $0.errors } }

    /// Whether `completeAndSave()` saved.
    public var didSave: Bool { state.withLock { $0.saved } }

    /// Makes the private context and runs the work on its queue (called by the queue or
    /// `start()`).
    open override func main() {
        guard !isCancelled else { return }
        let context = manager.newPrivateContext(name: name ?? "operation")
        state.withLock { $0.context = context }
        context.performAndWait {
            do {
                try perform(in: context)
            } catch {
                addError(error)
            }
            if !state.withLock({ $0.completed }) {
                if context.hasChanges {
                    manager.logger.debug("\(name ?? "operation") ended without completeAndSave(): its changes are rolled back")
                }
                complete()
            }
        }
        state.withLock { $0.context = nil }
    }
}
