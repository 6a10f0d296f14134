internal import CLibPQ
import Dispatch
import Foundation
import Synchronization

/// A request, from another thread, to stop the statements one piece of work sends: how a
/// cancelled task reaches PostgreSQL.
///
/// The work runs with the scope as its thread's (`run(_:_:)`); every statement a
/// `Connection` sends on that thread enters it first. Once `cancel()` is called, a
/// statement not sent yet is refused with `CancellationError` (nothing reaches the
/// server), and the one running is asked to stop with libpq's cancel request, sent over a
/// connection of its own; the server then fails it with SQLSTATE `57014`
/// (`query_canceled`), which aborts its transaction. A `ROLLBACK` is never refused.
///
/// A cancel request that reaches the server before the statement does is dropped by the
/// server, so it is sent again every 250 ms for as long as the same statement still runs
/// (up to 5 s). A request that arrives as the statement ends may, in rare cases, stop the
/// session's next statement instead; the library's next statement on that session is a
/// `ROLLBACK` or comes after the scope ended.
package final class StatementCancellation: Sendable {
    private struct State {
        var isCancelled = false
        /// The connection whose statement runs under this scope, if any.
        var running: Connection?
        /// How deeply statements nest (a `COPY` runs its start as a statement of its own).
        var depth = 0
        /// Counts the outermost statements, so a repeated request goes only to the one
        /// that was running when it was made.
        var serial = 0
    }

    private let state = Mutex(State())

    /// A scope not cancelled yet.
    package init() {}

    /// Whether `cancel()` was called.
    package var isCancelled: Bool { state.withLock { $0.isCancelled } }

    /// Refuses the statements not sent yet and asks the server to stop the running one.
    /// Any thread may call it, any number of times.
    package func cancel() {
        let target: (connection: Connection, serial: Int)? = state.withLock { state in
            state.isCancelled = true
            return state.running.map { ($0, state.serial) }
        }
        guard let target else { return }
        target.connection.requestCancel()
        requestAgain(serial: target.serial, attemptsLeft: 20)
    }

    /// Sends the cancel request again after 250 ms while the statement `serial` still runs.
    private func requestAgain(serial: Int, attemptsLeft: Int) {
        guard attemptsLeft > 0 else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(250)) { [self] in
            let connection = state.withLock { $0.serial == serial ? $0.running : nil }
            guard let connection else { return }
            connection.requestCancel()
            requestAgain(serial: serial, attemptsLeft: attemptsLeft - 1)
        }
    }

    /// A statement of `connection` starts under this scope.
    ///
    /// - Throws: `CancellationError` when the scope was cancelled (the statement is not
    ///   sent).
    func enter(_ connection: Connection) throws {
        try state.withLock { state in
            if state.isCancelled { throw CancellationError() }
            state.depth += 1
            if state.depth == 1 {
                state.running = connection
                state.serial &+= 1
            }
        }
    }

    /// The statement that `enter(_:)` started has ended.
    func leave() {
        state.withLock { state in
            state.depth -= 1
            if state.depth == 0 { state.running = nil }
        }
    }

    // MARK: - The current thread's scope

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// What the current thread's slot says about the statements it sends.
    enum Slot {
        /// Nothing was set: a statement sent from a task's own thread is watched for the
        /// task's cancellation (`TaskStatementWatch`); elsewhere it runs as it is.
        case unset
        /// `run(nil, …)`: statements that must run whatever happened (a rollback).
        case uncancellable
        /// The scope of the work the thread runs.
        case scope(StatementCancellation)
    }

    /// What `run(nil, …)` puts in the slot; never cancelled, never released.
    private static let uncancellableMarker = StatementCancellation()
    /// What stands for "no task to watch" (`Connection.cancellable`); never used as a scope.
    static let notWatched = uncancellableMarker
    /// `uncancellableMarker` as the slot holds it. (`nonisolated(unsafe)`: a constant,
    /// only ever compared.)
    // Unsafe: the marker is a static constant, alive for the whole process.
    nonisolated(unsafe) private static let uncancellablePointer = Unmanaged.passUnretained(uncancellableMarker).toOpaque()

    /// The current thread's slot.
    static var slot: Slot {
        guard let pointer = pthread_getspecific(key) else { return .unset }
        if pointer == uncancellablePointer { return .uncancellable }
        // Unsafe: the slot holds an unretained scope only while `run` keeps it alive.
        return .scope(Unmanaged<StatementCancellation>.fromOpaque(pointer).takeUnretainedValue())
    }

    /// Runs `body` with `scope` as the current thread's (`nil`: with none, for statements
    /// that must run whatever happened, such as a rollback, even on a cancelled task's
    /// thread); the previous one afterwards.
    package static func run<T>(_ scope: StatementCancellation?, _ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(key)
        // Unsafe: `scope` is kept alive until `body` returns (withExtendedLifetime), and
        // the slot is set back before that; the marker lives as long as the process.
        pthread_setspecific(key, scope.map { Unmanaged.passUnretained($0).toOpaque() } ?? uncancellablePointer)
        defer { pthread_setspecific(key, previous) }
        return try withExtendedLifetime(scope) { try body() }
    }
}

extension Connection {
    /// Runs one statement's exchange with the server (a statement, a pipeline, a `COPY`)
    /// inside the current thread's cancellation scope, if any; on a task's own thread with
    /// no scope set, watched for the task's cancellation (`TaskStatementWatch`). Records
    /// its duration as `kind` when metrics are on.
    ///
    /// - Throws: `CancellationError` when the scope or task was cancelled before the
    ///   statement was sent; what `body` throws (SQLSTATE `57014` once the server
    ///   stopped it).
    func cancellable<T>(_ kind: StatementMetrics.Kind, _ body: () throws -> T) throws -> T {
        guard let statementMetrics else { return try inCancellationScope(body) }
        let start = ContinuousClock.now
        defer { statementMetrics.record(kind, since: start) }
        return try inCancellationScope(body)
    }

    /// `cancellable(_:_:)` without the timer.
    @inline(__always)
    private func inCancellationScope<T>(_ body: () throws -> T) throws -> T {
        switch StatementCancellation.slot {
        case .scope(let scope):
            try scope.enter(self)
            defer { scope.leave() }
            return try body()
        case .uncancellable:
            return try body()
        case .unset:
            // Only the scope comes out of the closure, so the statement runs outside the
            // generic, unspecialised `withUnsafeCurrentTask` (its result a class, not `T`).
            // Unsafe: the watch reads the task reference only until `end`, while this call
            // runs on the task's thread, which keeps the task alive (`TaskStatementWatch`).
            let scope = try withUnsafeCurrentTask { task -> StatementCancellation in
                guard let task else { return StatementCancellation.notWatched }
                return try TaskStatementWatch.shared.begin(task)
            }
            if scope === StatementCancellation.notWatched { return try body() }
            defer { TaskStatementWatch.shared.end(scope) }
            return try StatementCancellation.run(scope) {
                try scope.enter(self)
                defer { scope.leave() }
                return try body()
            }
        }
    }

    /// Asks the server to stop the statement this session runs (libpq's `PQcancel`, over
    /// a connection of its own). It neither waits for the statement nor takes the
    /// session's lock, so any thread may call it while another runs a statement;
    /// without a statement running, the server ignores it.
    package func requestCancel() {
        cancelLock.lock()
        defer { cancelLock.unlock() }
        guard let cancelKey else { return }
        var message = [CChar](repeating: 0, count: 256)
        if PQcancel(cancelKey, &message, Int32(message.count)) == 0 {
            let text = message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            logger.debug("the cancel request failed: \(String(decoding: text, as: UTF8.self))")
        }
    }

    /// Keeps the key that cancel requests for the session `handle` carry (libpq's
    /// `PGcancel`), freeing the previous one; `nil` frees it.
    func setCancelKey(for handle: OpaquePointer?) {
        cancelLock.lock()
        defer { cancelLock.unlock() }
        if let cancelKey { PQfreeCancel(cancelKey) }
        cancelKey = handle.flatMap { PQgetCancel($0) }
    }
}
