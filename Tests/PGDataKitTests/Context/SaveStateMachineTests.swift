import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// `SaveStateMachine`, the decisions of `save()`, one transition at a time: no server.
@Suite("Save state machine")
struct SaveStateMachineTests {
    typealias Machine = SaveStateMachine

    private let serialization = Machine.Failure.transient(.serialization, lockTimeout: false, connectionLost: false)
    private let lockTimeout = Machine.Failure.transient(.lockTimeout, lockTimeout: true, connectionLost: false)
    private let connectionLost = Machine.Failure.transient(.connectionLost, lockTimeout: false, connectionLost: true)

    /// A machine past `start`, on the own transaction's path.
    private func writing() -> Machine {
        var machine = Machine()
        _ = machine.start(hasChanges: true, oneRow: false)
        return machine
    }

    /// A machine past `start`, on the one-row path.
    private func oneRow() -> Machine {
        var machine = Machine()
        _ = machine.start(hasChanges: true, oneRow: true)
        return machine
    }

    /// A machine in its first redo.
    private func redoing() -> Machine {
        var machine = writing()
        _ = machine.written(conflicts: true)
        return machine
    }

    @Test func nothingToSaveWritesNothing() {
        var machine = Machine()
        #expect(machine.start(hasChanges: false, oneRow: false) == Machine.Step(.finishWithoutWriting))
    }

    @Test func oneChangedRowGoesInOneRoundTrip() {
        var machine = Machine()
        #expect(machine.start(hasChanges: true, oneRow: true).action == .saveOneRow)
        #expect(machine.committed() == Machine.Step(.finished))
    }

    @Test func otherChangesGoInTheOwnTransactionThenCommit() {
        var machine = Machine()
        #expect(machine.start(hasChanges: true, oneRow: false).action == .writeInOwnTransaction)
        #expect(machine.written(conflicts: false) == Machine.Step(.commit))
        #expect(machine.committed().action == .finished)
    }

    @Test func conflictsInTheOwnTransactionAreResolvedInARedo() {
        var machine = writing()
        #expect(machine.written(conflicts: true) == Machine.Step(.resolveConflicts(attempt: 1), failure: .conflict))
        #expect(machine.committed().action == .finished)
    }

    @Test func aVersionMissOfTheOneRowSaveIsResolvedInARedo() {
        var machine = oneRow()
        #expect(machine.versionMissed() == Machine.Step(.resolveConflicts(attempt: 1), failure: .conflict))
    }

    @Test func aTransientFailureWhileWritingIsRedoneButALockTimeoutIsNot() {
        var redone = writing()
        #expect(redone.failed(serialization) == Machine.Step(.resolveConflicts(attempt: 1), failure: .serialization))
        var thrown = writing()
        #expect(thrown.failed(lockTimeout) == Machine.Step(.throwError, failure: .lockTimeout))
        var lost = writing()
        #expect(lost.failed(connectionLost).action == .resolveConflicts(attempt: 1), "nothing was committing")
        var uncounted = writing()
        let unnamed = Machine.Failure.transient(nil, lockTimeout: false, connectionLost: false)
        #expect(uncounted.failed(unnamed) == Machine.Step(.resolveConflicts(attempt: 1), failure: nil))
    }

    @Test func aConnectionLostAtTheOneRowCommitIsTheSavesNotRedone() {
        var machine = oneRow()
        #expect(machine.failed(connectionLost) == Machine.Step(.throwError, failure: .connectionLost))
        var transient = oneRow()
        #expect(transient.failed(serialization).action == .resolveConflicts(attempt: 1))
    }

    @Test func otherFailuresEndTheSave() {
        var machine = writing()
        #expect(machine.failed(.other(cause: nil)) == Machine.Step(.throwError))
        var committing = writing()
        _ = committing.written(conflicts: false)
        #expect(committing.failed(serialization) == Machine.Step(.throwError), "a failed commit is the save's, uncounted")
    }

    @Test func keyedInsertsThatMetUnlockedRowsRedoUpToThreeTimes() {
        var machine = writing()
        #expect(machine.failed(.metUnlockedRows) == Machine.Step(.resolveConflicts(attempt: 1), failure: .rowHeld))
        #expect(machine.failed(.metUnlockedRows) == Machine.Step(.resolveConflicts(attempt: 2), failure: .rowHeld))
        #expect(machine.failed(.metUnlockedRows) == Machine.Step(.resolveConflicts(attempt: 3), failure: .rowHeld))
        #expect(machine.failed(.metUnlockedRows) == Machine.Step(.throwLockError, failure: .rowHeld))
    }

    @Test func aFailedRedoEndsTheSaveCountingItsCause() {
        var conflict = redoing()
        #expect(conflict.failed(.mergeConflict) == Machine.Step(.throwError, failure: .conflict))
        var transient = redoing()
        #expect(transient.failed(serialization) == Machine.Step(.throwError, failure: .serialization))
    }

    /// A machine that started in the redo's mode (contended entities).
    private func lockedFirst() -> Machine {
        var machine = Machine()
        _ = machine.start(hasChanges: true, oneRow: false, contended: true)
        return machine
    }

    @Test func aSaveOfContendedEntitiesStartsInTheRedosModeCountingNothing() {
        var machine = Machine()
        #expect(machine.start(hasChanges: true, oneRow: false, contended: true) == Machine.Step(.resolveConflictsFirst))
        #expect(machine.committed() == Machine.Step(.finished))
    }

    @Test func aOneRowSaveKeepsItsRoundTripAndNothingToSaveWritesNothingWhenContended() {
        var oneRow = Machine()
        #expect(oneRow.start(hasChanges: true, oneRow: true, contended: true) == Machine.Step(.saveOneRow))
        var nothing = Machine()
        #expect(nothing.start(hasChanges: false, oneRow: false, contended: true) == Machine.Step(.finishWithoutWriting))
    }

    @Test func aMergeConflictOfASaveStartedInTheRedosModeIsThrownAtOnce() {
        var machine = lockedFirst()
        #expect(machine.failed(.mergeConflict) == Machine.Step(.throwError, failure: .conflict), "no redo: it read the rows")
    }

    /// Started in the redo's mode, the save is the redo's first attempt: two more when its
    /// keyed inserts meet rows held elsewhere, then the lock error.
    @Test func aSaveStartedInTheRedosModeMeetingUnlockedRowsHasTwoMoreAttempts() {
        var machine = lockedFirst()
        #expect(machine.failed(.metUnlockedRows) == Machine.Step(.resolveConflicts(attempt: 2), failure: .rowHeld))
        #expect(machine.failed(.metUnlockedRows) == Machine.Step(.resolveConflicts(attempt: 3), failure: .rowHeld))
        #expect(machine.failed(.metUnlockedRows) == Machine.Step(.throwLockError, failure: .rowHeld))
    }

    @Test func aTransientFailureOfASaveStartedInTheRedosModeIsRedoneButALockTimeoutOrLostConnectionIsNot() {
        var redone = lockedFirst()
        #expect(redone.failed(serialization) == Machine.Step(.resolveConflicts(attempt: 2), failure: .serialization))
        #expect(redone.committed().action == .finished)
        var timedOut = lockedFirst()
        #expect(timedOut.failed(lockTimeout) == Machine.Step(.throwError, failure: .lockTimeout))
        var lost = lockedFirst()
        #expect(lost.failed(connectionLost) == Machine.Step(.throwError, failure: .connectionLost), "the Store settled it")
        var other = lockedFirst()
        #expect(other.failed(.other(cause: nil)) == Machine.Step(.throwError))
    }

    @Test func errorsAreClassified() {
        let lock = PostgresError(kind: .server, sqlState: .lockNotAvailable, message: "lock")
        #expect(Machine.Failure.of(KeyedInsertsMetUnlockedRows(entity: "E", lockError: lock)) == .metUnlockedRows)
        #expect(Machine.Failure.of(MergeConflictError(conflicts: [])) == .mergeConflict)
        #expect(Machine.Failure.of(lock) == .transient(.lockTimeout, lockTimeout: true, connectionLost: false))
        #expect(Machine.Failure.of(PostgresError(kind: .server, sqlState: .uniqueViolation, message: "dup")) == .other(cause: nil))
        #expect(Machine.Failure.of(CancellationError()) == .other(cause: nil))
        let lost = PostgresError(kind: .connectionLost, message: "gone").notCommitted()
        #expect(Machine.Failure.of(lost) == .transient(.connectionLost, lockTimeout: false, connectionLost: true))
    }
}
