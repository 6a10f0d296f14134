import Foundation

/// How a save of a root context goes, decided without I/O: which transaction it tries
/// first, when a failure or a conflict means redoing it in a read-committed transaction
/// that locks its rows and resolves conflicts, how often keyed inserts that met rows
/// held elsewhere start that redo over, and which failures and retries the metrics
/// count. `SavePipeline.run()` (what `ManagedObjectContext.save()` runs) is the shell:
/// it asks, runs the statements, and tells what happened.
///
/// The paths:
/// - nothing to save: the transaction ends, nothing is written;
/// - one changed object (attributes, foreign keys), one new object, or one deleted object:
///   one round trip (`updateOneRowAndCommit`, `insertOneRowAndCommit`,
///   `deleteOneRowAndCommit`); a version miss or a transient failure redoes the save;
/// - otherwise the context's own transaction writes; conflicts, or a transient failure
///   while writing, redo the save; a failure at the commit is the save's;
/// - the redo: up to three attempts, each starting over only when keyed inserts met
///   rows it had not locked (then the third's lock error is thrown);
/// - a save whose entities are contended (`SaveContention`: saves of them met other
///   transactions' work within the coordinator's `contentionWindow`), other than a
///   one-row save, starts in the redo's mode instead of failing into it: it is the
///   first of those three attempts, and counts no retry; a transient failure of it
///   (but a lock timeout or a lost connection) is redone once more in that mode.
struct SaveStateMachine {
    /// What a failed attempt's error means to the save.
    enum Failure: Equatable {
        /// Keyed inserts met rows the attempt had not locked (`KeyedInsertsMetUnlockedRows`).
        case metUnlockedRows
        /// A database failure a new transaction may not meet (`PostgresError.isTransient`),
        /// of this cause if the metrics name one; a lock timeout (`55P03`) is one, and so
        /// is a lost connection.
        case transient(TransientCause?, lockTimeout: Bool, connectionLost: Bool)
        /// A merge conflict the merge policy leaves to the caller.
        case mergeConflict
        /// Anything else; `cause` is what the metrics count (if anything).
        case other(cause: TransientCause?)

        /// The failure an error is.
        static func of(_ error: any Error) -> Failure {
            if error is KeyedInsertsMetUnlockedRows { return .metUnlockedRows }
            if error is MergeConflictError { return .mergeConflict }
            guard let failure = error as? PostgresError, failure.isTransient else {
                return .other(cause: TransientCause(error))
            }
            return .transient(
                TransientCause(error), lockTimeout: failure.sqlState == .lockNotAvailable, connectionLost: failure.isConnectionError)
        }
    }

    /// What the shell does next.
    enum Action: Equatable {
        /// Nothing to save: end the transaction, write nothing.
        case finishWithoutWriting
        /// Write the one row (changed, new or deleted) and commit in one round trip.
        case saveOneRow
        /// Write the changes in the context's own transaction.
        case writeInOwnTransaction
        /// Write from the start in a read-committed transaction that locks the rows and
        /// resolves conflicts (the redo's mode, as the first attempt: the save's entities
        /// are contended).
        case resolveConflictsFirst
        /// Commit the own transaction's writes.
        case commit
        /// Redo the save in a read-committed transaction that locks the rows and resolves
        /// conflicts (attempt 1 to 3).
        case resolveConflicts(attempt: Int)
        /// The save committed.
        case finished
        /// The save fails with the error that ended the attempt.
        case throwError
        /// The save fails with the lock error of the rows the last redo met unlocked.
        case throwLockError
    }

    /// An answer: what to do, and what the metrics count first.
    struct Step: Equatable {
        let action: Action
        /// The failure's cause to count (`StoreMetrics.transientFailure`, which counts
        /// nothing for `nil`). A `resolveConflicts` step is also a retry of that cause
        /// (`StoreMetrics.retry`, where `nil` counts as `other`).
        let failure: TransientCause?

        init(_ action: Action, failure: TransientCause? = nil) {
            self.action = action
            self.failure = failure
        }
    }

    private enum Phase: Equatable {
        case idle, oneRow, writing, committing, lockedFirst, redo(attempt: Int), ended
    }

    /// How many read-committed attempts a save makes at most.
    static let redoAttempts = 3

    private var phase = Phase.idle

    /// The save starts: whether there is anything to save, whether it is one row (one
    /// changed object's attributes and foreign keys, one new object or one deleted
    /// object), and whether its entities are contended (`SaveContention`).
    mutating func start(hasChanges: Bool, oneRow: Bool, contended: Bool = false) -> Step {
        precondition(phase == .idle, "a save's state machine starts once")
        guard hasChanges else {
            phase = .ended
            return Step(.finishWithoutWriting)
        }
        if oneRow {
            phase = .oneRow
            return Step(.saveOneRow)
        }
        phase = contended ? .lockedFirst : .writing
        return Step(contended ? .resolveConflictsFirst : .writeInOwnTransaction)
    }

    /// The own transaction's writes are done; `conflicts` when rows had changed
    /// elsewhere since they were read.
    mutating func written(conflicts: Bool) -> Step {
        precondition(phase == .writing, "written(conflicts:) after the own transaction's writes only")
        guard conflicts else {
            phase = .committing
            return Step(.commit)
        }
        return redo(counting: .conflict)
    }

    /// The one-row save found the row at another version (changed elsewhere) or gone.
    mutating func versionMissed() -> Step {
        precondition(phase == .oneRow, "versionMissed() after a one-row save only")
        return redo(counting: .conflict)
    }

    /// The attempt committed.
    mutating func committed() -> Step {
        switch phase {
        case .oneRow, .committing, .lockedFirst, .redo: phase = .ended
        default: preconditionFailure("committed() while no commit was asked for")
        }
        return Step(.finished)
    }

    /// The attempt failed.
    mutating func failed(_ failure: Failure) -> Step {
        switch phase {
        case .oneRow: return firstAttemptFailed(failure, committing: true)
        case .writing: return firstAttemptFailed(failure, committing: false)
        case .committing:
            phase = .ended
            return Step(.throwError)
        case .lockedFirst:
            return lockedFirstAttemptFailed(failure)
        case .redo(let attempt):
            if case .metUnlockedRows = failure {
                guard attempt < Self.redoAttempts else {
                    phase = .ended
                    return Step(.throwLockError, failure: .rowHeld)
                }
                phase = .redo(attempt: attempt + 1)
                return Step(.resolveConflicts(attempt: attempt + 1), failure: .rowHeld)
            }
            phase = .ended
            return Step(.throwError, failure: failure == .mergeConflict ? .conflict : Self.counted(failure))
        case .idle, .ended:
            preconditionFailure("failed(_:) while no attempt runs")
        }
    }

    /// The first attempt (one-row or own transaction) failed: keyed inserts that met
    /// unlocked rows and transient failures are redone, except a lock timeout (the
    /// caller's `lock_timeout` said how long to wait) and a connection lost at a commit
    /// (the Store settled that one).
    private mutating func firstAttemptFailed(_ failure: Failure, committing: Bool) -> Step {
        switch failure {
        case .metUnlockedRows:
            return redo(counting: .rowHeld)
        case .transient(let cause, let lockTimeout, let connectionLost) where !lockTimeout && !(committing && connectionLost):
            return redo(counting: cause)
        default:
            phase = .ended
            return Step(.throwError, failure: Self.counted(failure))
        }
    }

    /// The first attempt, started in the redo's mode, failed: it was the redo's first
    /// attempt, so keyed inserts that met unlocked rows start the second; a transient
    /// failure other than a lock timeout or a lost connection (which a redo throws) is
    /// redone once in that mode (the second attempt too).
    private mutating func lockedFirstAttemptFailed(_ failure: Failure) -> Step {
        switch failure {
        case .metUnlockedRows:
            phase = .redo(attempt: 2)
            return Step(.resolveConflicts(attempt: 2), failure: .rowHeld)
        case .transient(let cause, let lockTimeout, let connectionLost) where !lockTimeout && !connectionLost:
            phase = .redo(attempt: 2)
            return Step(.resolveConflicts(attempt: 2), failure: cause)
        default:
            phase = .ended
            return Step(.throwError, failure: failure == .mergeConflict ? .conflict : Self.counted(failure))
        }
    }

    private mutating func redo(counting cause: TransientCause?) -> Step {
        phase = .redo(attempt: 1)
        return Step(.resolveConflicts(attempt: 1), failure: cause)
    }

    /// What the metrics count of a failure that ends the save (a merge conflict only
    /// where the redo met it).
    private static func counted(_ failure: Failure) -> TransientCause? {
        switch failure {
        case .metUnlockedRows: .rowHeld
        case .transient(let cause, _, _): cause
        case .mergeConflict: nil
        case .other(let cause): cause
        }
    }
}
