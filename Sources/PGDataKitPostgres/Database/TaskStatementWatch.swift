import Dispatch
import Synchronization

/// Stops a statement that a task sends synchronously, from its own thread, when the task
/// is cancelled: how `connection.execute(…)` called directly in async code (a request
/// handler, a test) reaches PostgreSQL's cancel without an async form.
///
/// Swift offers no cancellation handler to synchronous code, so the statements such
/// tasks run are polled: every 20 ms while at least one runs, a timer asks each task
/// whether it was cancelled and, when it was, cancels the statement's scope
/// (`StatementCancellation.cancel()`: libpq's cancel request, repeated until the
/// statement ends; the server fails it with SQLSTATE `57014`, which aborts its
/// transaction). A statement sent from a task already cancelled is refused
/// (`CancellationError`, nothing sent) — except under `StatementCancellation.run(nil, …)`,
/// as `Connection.rollback()` runs. Work on other threads (Dispatch queues, the
/// library's own threads) is not watched: async `perform` blocks have scopes of their own.
final class TaskStatementWatch: Sendable {
    /// A task whose thread is blocked in a statement, and that statement's scope.
    private struct Watched: @unchecked Sendable {
        // Safe to send to the timer's queue: the entry is removed before the statement's
        // call returns, so `task` is read (only `isCancelled`, an atomic load of the
        // task's status) while the task is alive and its thread blocked in that call;
        // the reference itself is a strong one.
        let task: UnsafeCurrentTask
        let scope: StatementCancellation
    }

    private struct State {
        /// By the statement's scope.
        var watched: [ObjectIdentifier: Watched] = [:]
        /// Whether a timer tick is scheduled.
        var ticking = false
    }

    /// The watch every connection uses.
    static let shared = TaskStatementWatch()

    /// How often running statements' tasks are asked whether they were cancelled.
    static let interval = DispatchTimeInterval.milliseconds(20)

    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "pgdatakit.task-statement-watch")

    /// Starts watching `task` for the statement its thread is about to send: returns the
    /// statement's scope, cancelled when the task is; `end(_:)` stops the watch. The
    /// caller runs the statement in that scope while the task's thread waits for it.
    ///
    /// - Throws: `CancellationError` when `task` was cancelled already (nothing is to be
    ///   sent). A statement the scope stops fails with SQLSTATE `57014`
    ///   (`query_canceled`), as an async `perform`'s do (which that maps to
    ///   `CancellationError`).
    func begin(_ task: UnsafeCurrentTask) throws -> StatementCancellation {
        if task.isCancelled { throw CancellationError() }
        let scope = StatementCancellation()
        let starts = state.withLock { state in
            state.watched[ObjectIdentifier(scope)] = Watched(task: task, scope: scope)
            let starts = !state.ticking
            state.ticking = true
            return starts
        }
        if starts { schedule() }
        return scope
    }

    /// Stops watching for the statement of `scope` (it has ended).
    func end(_ scope: StatementCancellation) {
        state.withLock { _ = $0.watched.removeValue(forKey: ObjectIdentifier(scope)) }
    }

    private func schedule() {
        queue.asyncAfter(deadline: .now() + Self.interval) { [self] in tick() }
    }

    /// Cancels the scopes of cancelled tasks; goes on ticking while statements run.
    private func tick() {
        let (cancelled, goesOn) = state.withLock { state in
            var cancelled: [StatementCancellation] = []
            for (id, watched) in state.watched where watched.task.isCancelled {
                cancelled.append(watched.scope)
                state.watched[id] = nil
            }
            state.ticking = !state.watched.isEmpty
            return (cancelled, state.ticking)
        }
        cancelled.forEach { $0.cancel() }
        if goesOn { schedule() }
    }
}
