/// The bookkeeping of one pipeline, without I/O: which results belong to which statement,
/// what a failure does to the results after it, and how the pipeline ended.
///
/// `Connection` tells it what it sent (`attempted(parse:)`, `queued()`,
/// `pipelineSynced(_:)`) and each result libpq hands back (`received(_:)`,
/// `resultsEnded(connectionBroken:)`), and does what it answers; the libpq calls stay in
/// the connection. For example, two statements, the first one failing:
///
/// ```swift
/// var machine = PipelineStateMachine<String>(statementCount: 2, streamsResults: false)
/// machine.attempted(parse: nil); _ = machine.queued()
/// machine.attempted(parse: nil); _ = machine.queued()
/// machine.pipelineSynced(true)                       // .statementResults(statement: 0)
/// machine.received(.failed)                           // .recordFailure(statement: 0, inParse: false)
/// machine.resultsEnded(connectionBroken: false)       // .statementResults(statement: 1)
/// machine.received(.pipelineAborted)                  // .discard
/// machine.resultsEnded(connectionBroken: false)       // .syncPoint
/// machine.received(.pipelineSync)                     // .endOfPipeline
/// machine.outcome(exited: true)                       // .failed
/// ```
struct PipelineStateMachine<ParseKey: Hashable> {
    /// What `PQresultStatus` said of a result, as far as a pipeline cares.
    enum ResultStatus: Equatable {
        case commandOK, tuplesOK, emptyQuery, pipelineAborted, pipelineSync
        /// An error, or any other status (one the pipeline does not expect).
        case failed
    }

    /// What to read next.
    enum Step: Equatable {
        /// The results of the `Parse` sent before a statement, up to a NULL.
        case parseResults(statement: Int)
        /// A statement's results, up to a NULL.
        case statementResults(statement: Int)
        /// The results up to the sync point, if the connection is still good.
        case syncPoint
        /// Nothing more to read: leave pipeline mode.
        case exit
    }

    /// What to do with one result.
    enum ResultAction: Equatable {
        /// A statement's result: keep it, and hand it to the result handler if `deliver`.
        case keep(statement: Int, deliver: Bool)
        /// Clear it.
        case discard
        /// The pipeline's first failure: make the error from it (a failed `Parse` when
        /// `inParse`), then clear it.
        case recordFailure(statement: Int, inParse: Bool)
        /// The sync point: clear it and stop reading.
        case endOfPipeline
    }

    /// How the pipeline ended, once pipeline mode is left.
    enum Outcome: Equatable {
        /// Every statement was sent and gave a result.
        case succeeded
        /// A statement failed: throw its error.
        case failed
        /// Something went wrong on the way (the connection, most likely).
        case lost
    }

    /// How many statements the pipeline has.
    let statementCount: Int
    /// Whether each result is asked for as soon as it is ready (the caller streams them).
    let streamsResults: Bool
    /// How many statements at the start (a transaction's opening: `BEGIN` and its
    /// settings) are sent without a flush request even when streaming: nobody waits for
    /// their results, and each flush is a packet the client wakes up for.
    let opening: Int
    /// Per statement tried, the key of the `Parse` sent before it, if any.
    private(set) var parses: [ParseKey?] = []
    /// The keys of `Parse`s not known to have succeeded: not prepared on the server.
    private(set) var unconfirmed: Set<ParseKey> = []
    /// How many statements were queued.
    private(set) var sent = 0
    /// Whether the sync point was queued.
    private(set) var synced = false
    /// How many statement results were kept.
    private(set) var kept = 0
    /// The first statement that failed (in its `Parse` or its execution).
    private(set) var failedStatement: Int?
    /// What is being read.
    private(set) var step = Step.exit

    /// A pipeline of `statementCount` statements; `streamsResults` when the caller wants
    /// each result as soon as it is read (after the first `opening` statements, whose
    /// results come with the next one's).
    init(statementCount: Int, streamsResults: Bool, opening: Int = 0) {
        self.statementCount = statementCount
        self.streamsResults = streamsResults
        self.opening = opening
        // (Room for every statement at once: grown step by step, it was a few allocations
        // of every save.)
        parses.reserveCapacity(statementCount)
    }

    /// A statement is about to be sent, after a `Parse` of `parse` if not `nil`. Called
    /// for the statement whose sending failed too.
    mutating func attempted(parse: ParseKey?) {
        parses.append(parse)
        if let parse { unconfirmed.insert(parse) }
    }

    /// The statement last attempted was queued. Returns whether to send a flush request
    /// after it (so that its results come back before the end of the pipeline): when
    /// streaming, after every statement but the opening ones and the last (the sync point
    /// flushes that one).
    mutating func queued() -> Bool {
        sent += 1
        return streamsResults && sent > opening && sent < statementCount
    }

    /// Sending is over; the sync point was queued if `synced`. Returns what to read first.
    @discardableResult
    mutating func pipelineSynced(_ synced: Bool) -> Step {
        self.synced = synced
        step = firstStep(from: 0)
        return step
    }

    /// Reading statement `index`'s results (or its `Parse`'s) comes next, if it was tried.
    private func firstStep(from index: Int) -> Step {
        guard index < parses.count else { return synced ? .syncPoint : .exit }
        if parses[index] != nil { return .parseResults(statement: index) }
        return index < sent ? .statementResults(statement: index) : (synced ? .syncPoint : .exit)
    }

    /// A result arrived for the current step.
    mutating func received(_ status: ResultStatus) -> ResultAction {
        switch step {
        case .parseResults(let index):
            switch status {
            case .commandOK:
                if let parse = parses[index] { unconfirmed.remove(parse) }
                return .discard
            case .pipelineAborted:
                return .discard
            default:
                return fail(index, inParse: true)
            }
        case .statementResults(let index):
            switch status {
            case .commandOK, .tuplesOK, .emptyQuery:
                kept += 1
                return .keep(statement: index, deliver: failedStatement == nil)
            case .pipelineAborted:
                return .discard
            default:
                return fail(index, inParse: false)
            }
        case .syncPoint:
            if status == .pipelineSync {
                step = .exit
                return .endOfPipeline
            }
            return .discard
        case .exit:
            return .discard
        }
    }

    /// Records a failure if it is the first one.
    private mutating func fail(_ index: Int, inParse: Bool) -> ResultAction {
        guard failedStatement == nil else { return .discard }
        failedStatement = index
        return .recordFailure(statement: index, inParse: inParse)
    }

    /// The current step's results ended (libpq returned NULL); `connectionBroken` when the
    /// connection is gone, which ends the reading of statements. Returns what to read next.
    mutating func resultsEnded(connectionBroken: Bool) -> Step {
        switch step {
        case .parseResults(let index):
            if connectionBroken || index >= sent {
                step = synced ? .syncPoint : .exit
            } else {
                step = .statementResults(statement: index)
            }
        case .statementResults(let index):
            step = connectionBroken ? (synced ? .syncPoint : .exit) : firstStep(from: index + 1)
        case .syncPoint, .exit:
            step = .exit
        }
        return step
    }

    /// How the pipeline ended, once pipeline mode was left (`exited` when libpq agreed).
    func outcome(exited: Bool) -> Outcome {
        if failedStatement != nil { return .failed }
        guard sent == statementCount, synced, exited, kept == statementCount else { return .lost }
        return .succeeded
    }
}
