internal import CLibPQ
import Foundation

extension Connection {
    /// Runs statements in one round trip (libpq's pipeline mode): all are sent, then all
    /// results are read. When one fails, PostgreSQL skips the ones after it and its error
    /// is thrown; an open transaction is then failed (roll it back). For short sequences
    /// whose results are small (a save's change record and its `COMMIT`): the statements
    /// are sent before any result is read.
    ///
    /// - Parameters:
    ///   - streamsResults: whether the server is asked for each statement's result as
    ///     soon as it is ready (a flush request after every statement but the last), so
    ///     that it reaches the client before the statements after it run — what a
    ///     `COMMIT` needs of the statement before it (the transaction's id, should the
    ///     connection break during the commit). Each such result is a packet the client
    ///     wakes up for; without it the server sends every result at the end. A
    ///     transaction's opening (`BEGIN` and its settings, when the connection sends it
    ///     with the pipeline) is never flushed on its own.
    ///   - onResult: called with each statement's index and result as soon as it is
    ///     read, before the results of the statements after it. Not escaping: what it
    ///     captures stays on the caller's stack.
    /// - Returns: each statement's result, in order.
    /// - Throws: `PostgresError` (the first failing statement's, or `.connectionLost`),
    ///   `PostgresValueError` when a parameter cannot be encoded (then nothing is sent).
    package func executePipeline(
        _ statements: [(sql: String, parameters: [(any PostgresEncodable)?])], streamsResults: Bool = false,
        onResult: (Int, QueryResult) -> Void = { _, _ in }
    ) throws -> [QueryResult] {
        try cancellable(.pipeline) { try sendPipeline(statements, streamsResults: streamsResults, onResult: onResult) }
    }

    /// `executePipeline(_:streamsResults:onResult:)` inside the cancellation scope.
    private func sendPipeline(
        _ statements: [(sql: String, parameters: [(any PostgresEncodable)?])], streamsResults: Bool,
        onResult: (Int, QueryResult) -> Void
    ) throws -> [QueryResult] {
        // (Room for every statement at once, and for a transaction's opening: arrays grown
        // step by step were a few allocations of every save.)
        var encoded: [PipelineStatement] = []
        encoded.reserveCapacity(statements.count + 2)
        var storages: [UnsafeMutableRawPointer?] = []
        storages.reserveCapacity(statements.count)
        defer { storages.forEach { free($0) } }
        for statement in statements {
            let (parameters, storage) = try Connection.encode(statement.parameters)
            storages.append(storage)
            encoded.append(PipelineStatement(sql: statement.sql, encoded: parameters, parameters: statement.parameters, reusesPlan: true))
        }
        lock.lock()
        defer { lock.unlock() }
        let handle = try requireHandle()
        if let begin = pendingBegin {
            pendingBegin = nil
            let opening = beginStatements(begin)
            encoded.insert(contentsOf: opening, at: 0)
            var results = try runPipeline(handle, encoded, streamsResults: streamsResults, opening: opening.count) {
                onResult($0 - opening.count, $1)
            }
            results.removeFirst(Swift.min(opening.count, results.count))
            return results
        }
        return try runPipeline(handle, encoded, streamsResults: streamsResults, onResult: onResult)
    }

    /// A statement of a pipeline: its SQL and its parameters as libpq takes them (their
    /// bytes owned by the caller), the parameters themselves for error messages, and
    /// whether it may be prepared by name (its plan then kept; see `execute(_:_:reusesPlan:)`).
    struct PipelineStatement {
        var sql: String
        var encoded = EncodedParameters()
        var parameters: [(any PostgresEncodable)?] = []
        var reusesPlan = true

        /// The parameters' type OIDs.
        var types: [UInt32] { encoded.types }
    }

    /// Runs `work` once, on the calling thread, right after the next pipeline of
    /// statements is sent and before its results are read, so that client work (such as
    /// releasing a context's previous objects) overlaps the server's; `nil` cancels it.
    /// A statement with parameters that is not prepared by name is sent as a pipeline of
    /// one then; a prepared one (`PQexecPrepared`) does not run the work, which waits for
    /// the next.
    package func doWhileWaiting(_ work: (() -> Void)?) {
        lock.lock()
        defer { lock.unlock() }
        workWhileWaiting = work
    }

    /// Sends the statements in pipeline mode and reads every result. Call under `lock`.
    ///
    /// The bookkeeping (which result belongs to which statement, what a failure skips,
    /// how the pipeline ended) is `PipelineStateMachine`'s; the libpq calls are here.
    ///
    /// With `streamsResults`, each statement's result after the first `opening` ones is
    /// asked for as soon as it is ready (a flush request after it); every result is
    /// handed to `onResult` as soon as it is read.
    func runPipeline(
        _ handle: OpaquePointer, _ statements: [PipelineStatement], streamsResults: Bool = false, opening: Int = 0,
        onResult: (Int, QueryResult) -> Void = { _, _ in }
    ) throws -> [QueryResult] {
        func lost() -> PostgresError {
            PostgresError(
                kind: PQstatus(handle) == CONNECTION_BAD ? .connectionLost : .client,
                message: String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines),
                statement: statements.last?.sql)
        }
        // Before pipeline mode: libpq refuses its synchronous DEALLOCATEs inside it.
        dropEvictedStatements(handle)
        guard PQenterPipelineMode(handle) == 1 else { throw lost() }
        var machine = PipelineStateMachine<PreparedStatementCache.Key>(
            statementCount: statements.count, streamsResults: streamsResults, opening: opening)
        sendPipeline(handle, statements, &machine)
        executedStatements += machine.sent
        let synced = PQpipelineSync(handle) == 1
        if synced, let work = workWhileWaiting {
            workWhileWaiting = nil
            _ = PQflush(handle)
            work()
        }
        defer {
            // A statement whose `Parse` did not succeed is not prepared.
            for key in machine.unconfirmed { preparedStatements.remove(key) }
        }
        // Every result must be read before the pipeline can end: per statement its
        // results up to a NULL, then the sync point.
        var results: [QueryResult] = []
        results.reserveCapacity(statements.count)
        let failure = readPipeline(handle, statements, &machine, synced: synced, into: &results, onResult: onResult)
        let exited = PQexitPipelineMode(handle) == 1
        switch machine.outcome(exited: exited) {
        case .succeeded: return results
        case .failed: throw failure ?? lost()
        case .lost: throw lost()
        }
    }

    /// Queues the statements (each after its `Parse` when not prepared yet), stopping at
    /// the first libpq refuses. Call under `lock`.
    private func sendPipeline(
        _ handle: OpaquePointer, _ statements: [PipelineStatement],
        _ machine: inout PipelineStateMachine<PreparedStatementCache.Key>
    ) {
        sending: for statement in statements {
            var parse: PreparedStatementCache.Key?
            defer { machine.attempted(parse: parse) }
            var name: String?
            if statement.reusesPlan, !statement.types.isEmpty {
                let key = PreparedStatementCache.Key(sql: statement.sql, types: statement.types)
                name = preparedStatements.name(for: key)
                if name == nil, let fresh = preparedStatements.add(key) {
                    parse = key
                    guard PQsendPrepare(handle, fresh, statement.sql, Int32(statement.types.count), statement.types) == 1
                    else { break sending }
                    name = fresh
                }
            }
            // (`withCString`, not a `String` passed as the pointer: that copies the text
            // into a new array at every call.)
            let queued = statement.encoded.withArguments { values, lengths, formats in
                if let name {
                    name.withCString { PQsendQueryPrepared(handle, $0, statement.encoded.count, values, lengths, formats, 0) }
                } else {
                    statement.sql.withCString {
                        PQsendQueryParams(
                            handle, $0, statement.encoded.count, statement.encoded.types, values, lengths, formats, 0)
                    }
                }
            }
            guard queued == 1 else { break }
            // With a result handler, each result is asked for as soon as it is ready
            // (the server otherwise holds the results until the end of the pipeline).
            if machine.queued() { _ = PQsendFlushRequest(handle) }
        }
    }

    /// Reads every result of a sent pipeline, doing what `machine` says with each, and
    /// returns the first failing statement's error. Call under `lock`.
    private func readPipeline(
        _ handle: OpaquePointer, _ statements: [PipelineStatement],
        _ machine: inout PipelineStateMachine<PreparedStatementCache.Key>, synced: Bool,
        into results: inout [QueryResult], onResult: (Int, QueryResult) -> Void
    ) -> PostgresError? {
        var failure: PostgresError?
        var step = machine.pipelineSynced(synced)
        while true {
            switch step {
            case .parseResults, .statementResults:
                while let result = PQgetResult(handle) {
                    switch machine.received(Connection.pipelineStatus(result)) {
                    case .keep(let index, let deliver):
                        let read = QueryResult(handle: result)
                        results.append(read)
                        if deliver { onResult(index, read) }
                    case .recordFailure(let index, let inParse):
                        var error = Connection.serverError(result, handle: handle, statement: statements[index].sql)
                        error.parameterDescriptions = Connection.describe(statements[index].parameters)
                        if !inParse && !statements[index].types.isEmpty {
                            _ = forgetPreparedStatement(
                                PreparedStatementCache.Key(sql: statements[index].sql, types: statements[index].types),
                                after: error)
                        }
                        failure = error
                        PQclear(result)
                    case .discard, .endOfPipeline:
                        PQclear(result)
                    }
                }
                step = machine.resultsEnded(connectionBroken: PQstatus(handle) == CONNECTION_BAD)
            case .syncPoint:
                guard PQstatus(handle) != CONNECTION_BAD else { return failure }
                while let result = PQgetResult(handle) {
                    let action = machine.received(Connection.pipelineStatus(result))
                    PQclear(result)
                    if case .endOfPipeline = action { break }
                }
                return failure
            case .exit:
                return failure
            }
        }
    }

    /// A result's status as the pipeline's bookkeeping sees it.
    private static func pipelineStatus(
        _ result: OpaquePointer
    ) -> PipelineStateMachine<PreparedStatementCache.Key>.ResultStatus {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK: .commandOK
        case PGRES_TUPLES_OK: .tuplesOK
        case PGRES_EMPTY_QUERY: .emptyQuery
        case PGRES_PIPELINE_ABORTED: .pipelineAborted
        case PGRES_PIPELINE_SYNC: .pipelineSync
        default: .failed
        }
    }
}
