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
        // task's status) while the task is alive and blocked in that call.
        let task: UnsafeCurrentTask
        let scope: StatementCancellation
    }

    private struct State {
        var watched: [Int: Watched] = [:]
        var nextID = 0
        /// Whether a timer tick is scheduled.
        var ticking = false
    }

    /// The watch every connection uses.
    static let shared = TaskStatementWatch()

    /// How often running statements' tasks are asked whether they were cancelled.
    static let interval = DispatchTimeInterval.milliseconds(20)

    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "pgdatakit.task-statement-watch")

    /// Runs `body`, one statement of `connection`, watched for `task`'s cancellation.
    ///
    /// - Throws: `CancellationError` when `task` was cancelled before (nothing is sent);
    ///   `PostgresError` with SQLSTATE `57014` (`query_canceled`) when it was cancelled
    ///   while the statement ran and the server stopped it (as for an async `perform`'s
    ///   statements, which that maps to `CancellationError`); otherwise what `body` throws.
    func run<T>(_ connection: Connection, in task: UnsafeCurrentTask, _ body: () throws -> T) throws -> T {
        if task.isCancelled { throw CancellationError() }
        let scope = StatementCancellation()
        let id = add(Watched(task: task, scope: scope))
        defer { remove(id) }
        return try StatementCancellation.run(scope) {
            try scope.enter(connection)
            defer { scope.leave() }
            return try body()
        }
    }

    private func add(_ watched: Watched) -> Int {
        let (id, starts) = state.withLock { state in
            let id = state.nextID
            state.nextID &+= 1
            state.watched[id] = watched
            let starts = !state.ticking
            state.ticking = true
            return (id, starts)
        }
        if starts { schedule() }
        return id
    }

    private func remove(_ id: Int) {
        state.withLock { _ = $0.watched.removeValue(forKey: id) }
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
