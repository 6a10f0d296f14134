import Testing

@testable import PGDataKitPostgres

/// The pipeline's bookkeeping, event by event, with no server: each test plays what libpq
/// would report and checks what the machine answers.
@Suite("PipelineStateMachine without a server")
struct PipelineStateMachineTests {
    typealias Machine = PipelineStateMachine<String>

    /// A machine for `count` statements, all queued, none needing a `Parse`, synced.
    func sentMachine(_ count: Int, streaming: Bool = false) -> Machine {
        var machine = Machine(statementCount: count, streamsResults: streaming)
        for _ in 0..<count {
            machine.attempted(parse: nil)
            _ = machine.queued()
        }
        return machine
    }

    @Test func everyStatementSucceeds() {
        var machine = sentMachine(2)
        #expect(machine.pipelineSynced(true) == .statementResults(statement: 0))
        #expect(machine.received(.commandOK) == .keep(statement: 0, deliver: true))
        #expect(machine.resultsEnded(connectionBroken: false) == .statementResults(statement: 1))
        #expect(machine.received(.tuplesOK) == .keep(statement: 1, deliver: true))
        #expect(machine.resultsEnded(connectionBroken: false) == .syncPoint)
        #expect(machine.received(.pipelineSync) == .endOfPipeline)
        #expect(machine.step == .exit)
        #expect(machine.outcome(exited: true) == .succeeded)
    }

    @Test(arguments: [
        (Machine.ResultStatus.commandOK, true), (.tuplesOK, true), (.emptyQuery, true),
        (.pipelineAborted, false), (.pipelineSync, false), (.failed, false),
    ])
    func aStatementResultIsKeptOnlyWhenItSucceeded(status: Machine.ResultStatus, kept: Bool) {
        var machine = sentMachine(1)
        machine.pipelineSynced(true)
        let action = machine.received(status)
        #expect((action == .keep(statement: 0, deliver: true)) == kept)
        #expect(machine.kept == (kept ? 1 : 0))
    }

    @Test func aFailureIsRecordedOnceAndTheRestIsSkipped() {
        var machine = sentMachine(3)
        machine.pipelineSynced(true)
        #expect(machine.received(.failed) == .recordFailure(statement: 0, inParse: false))
        #expect(machine.resultsEnded(connectionBroken: false) == .statementResults(statement: 1))
        #expect(machine.received(.pipelineAborted) == .discard)
        #expect(machine.received(.failed) == .discard)  // only the first failure counts
        #expect(machine.resultsEnded(connectionBroken: false) == .statementResults(statement: 2))
        // A result after the failure is kept (libpq owns it) but not handed out.
        #expect(machine.received(.commandOK) == .keep(statement: 2, deliver: false))
        #expect(machine.resultsEnded(connectionBroken: false) == .syncPoint)
        #expect(machine.received(.pipelineSync) == .endOfPipeline)
        #expect(machine.failedStatement == 0)
        #expect(machine.outcome(exited: true) == .failed)
    }

    @Test func aConfirmedParseIsPreparedAndItsStatementReadAfterIt() {
        var machine = Machine(statementCount: 2, streamsResults: false)
        machine.attempted(parse: "s1")
        _ = machine.queued()
        machine.attempted(parse: nil)
        _ = machine.queued()
        #expect(machine.unconfirmed == ["s1"])
        #expect(machine.pipelineSynced(true) == .parseResults(statement: 0))
        #expect(machine.received(.commandOK) == .discard)
        #expect(machine.unconfirmed.isEmpty)
        #expect(machine.resultsEnded(connectionBroken: false) == .statementResults(statement: 0))
        #expect(machine.received(.tuplesOK) == .keep(statement: 0, deliver: true))
        #expect(machine.resultsEnded(connectionBroken: false) == .statementResults(statement: 1))
        #expect(machine.received(.commandOK) == .keep(statement: 1, deliver: true))
        #expect(machine.resultsEnded(connectionBroken: false) == .syncPoint)
        #expect(machine.received(.pipelineSync) == .endOfPipeline)
        #expect(machine.outcome(exited: true) == .succeeded)
    }

    @Test func aFailedParseStaysUnconfirmedAndFailsThePipeline() {
        var machine = Machine(statementCount: 1, streamsResults: false)
        machine.attempted(parse: "s1")
        _ = machine.queued()
        machine.pipelineSynced(true)
        #expect(machine.received(.failed) == .recordFailure(statement: 0, inParse: true))
        #expect(machine.resultsEnded(connectionBroken: false) == .statementResults(statement: 0))
        #expect(machine.received(.pipelineAborted) == .discard)
        #expect(machine.resultsEnded(connectionBroken: false) == .syncPoint)
        #expect(machine.unconfirmed == ["s1"])
        #expect(machine.outcome(exited: true) == .failed)
    }

    @Test func aParseThatCouldNotBeSentIsReadButNotItsStatement() {
        var machine = Machine(statementCount: 2, streamsResults: false)
        machine.attempted(parse: nil)
        _ = machine.queued()
        machine.attempted(parse: "s2")  // PQsendPrepare failed: sending stops
        #expect(machine.sent == 1)
        machine.pipelineSynced(true)
        #expect(machine.received(.commandOK) == .keep(statement: 0, deliver: true))
        #expect(machine.resultsEnded(connectionBroken: false) == .parseResults(statement: 1))
        #expect(machine.resultsEnded(connectionBroken: false) == .syncPoint)
        #expect(machine.unconfirmed == ["s2"])
        #expect(machine.outcome(exited: true) == .lost)
    }

    @Test func readingStopsAtTheLastStatementSent() {
        var machine = Machine(statementCount: 3, streamsResults: false)
        machine.attempted(parse: nil)
        _ = machine.queued()
        machine.attempted(parse: nil)  // PQsendQueryParams failed
        #expect(machine.pipelineSynced(true) == .statementResults(statement: 0))
        #expect(machine.received(.commandOK) == .keep(statement: 0, deliver: true))
        #expect(machine.resultsEnded(connectionBroken: false) == .syncPoint)
        #expect(machine.outcome(exited: true) == .lost)
    }

    @Test func aBrokenConnectionEndsTheReadingOfStatements() {
        var machine = sentMachine(3)
        machine.pipelineSynced(true)
        #expect(machine.resultsEnded(connectionBroken: true) == .syncPoint)
        #expect(machine.outcome(exited: false) == .lost)

        var parsing = Machine(statementCount: 1, streamsResults: false)
        parsing.attempted(parse: "s1")
        _ = parsing.queued()
        parsing.pipelineSynced(false)
        #expect(parsing.resultsEnded(connectionBroken: true) == .exit)
        #expect(parsing.outcome(exited: true) == .lost)
    }

    @Test func withoutASyncPointThereIsNothingToReadAfterTheStatements() {
        var machine = sentMachine(1)
        #expect(machine.pipelineSynced(false) == .statementResults(statement: 0))
        #expect(machine.received(.commandOK) == .keep(statement: 0, deliver: true))
        #expect(machine.resultsEnded(connectionBroken: false) == .exit)
        #expect(machine.outcome(exited: true) == .lost)
    }

    @Test func theSyncPointDiscardsWhatComesBeforeIt() {
        var machine = sentMachine(1)
        machine.pipelineSynced(true)
        _ = machine.received(.commandOK)
        #expect(machine.resultsEnded(connectionBroken: false) == .syncPoint)
        #expect(machine.received(.commandOK) == .discard)
        #expect(machine.received(.pipelineSync) == .endOfPipeline)
        #expect(machine.resultsEnded(connectionBroken: false) == .exit)
    }

    @Test func leavingPipelineModeMustSucceed() {
        var machine = sentMachine(1)
        machine.pipelineSynced(true)
        _ = machine.received(.commandOK)
        _ = machine.resultsEnded(connectionBroken: false)
        #expect(machine.outcome(exited: false) == .lost)
        #expect(machine.outcome(exited: true) == .succeeded)
    }

    @Test func anEmptyPipelineOnlyReadsItsSyncPoint() {
        var machine = Machine(statementCount: 0, streamsResults: false)
        #expect(machine.pipelineSynced(true) == .syncPoint)
        #expect(machine.received(.pipelineSync) == .endOfPipeline)
        #expect(machine.outcome(exited: true) == .succeeded)
    }

    @Test func streamingAsksForAFlushAfterEveryStatementButTheLast() {
        var streaming = Machine(statementCount: 3, streamsResults: true)
        var flushes: [Bool] = []
        for _ in 0..<3 {
            streaming.attempted(parse: nil)
            flushes.append(streaming.queued())
        }
        #expect(flushes == [true, true, false])

        var batch = Machine(statementCount: 2, streamsResults: false)
        batch.attempted(parse: nil)
        #expect(batch.queued() == false)
    }

    /// A transaction's opening sent with the statements (`BEGIN`, its settings) is not
    /// flushed on its own: nobody waits for its result, and each flush is a packet the
    /// client wakes up for (a one-row save woke three times, now twice).
    @Test func streamingDoesNotFlushTheTransactionsOpening() {
        var save = Machine(statementCount: 4, streamsResults: true, opening: 2)
        var flushes: [Bool] = []
        for _ in 0..<4 {
            save.attempted(parse: nil)
            flushes.append(save.queued())
        }
        #expect(flushes == [false, false, true, false])

        var onlyOpening = Machine(statementCount: 2, streamsResults: true, opening: 1)
        onlyOpening.attempted(parse: nil)
        #expect(onlyOpening.queued() == false)
        onlyOpening.attempted(parse: nil)
        #expect(onlyOpening.queued() == false)
    }
}
