import Synchronization
import Tracing

/// A coordinator's spans (swift-distributed-tracing; names in `PGDataKitTracing`).
///
/// The tracer is looked up once, when the coordinator is made, as metrics are: with the
/// default (no tracer bootstrapped, `NoOpTracer`) `tracer` is `nil`, and every traced
/// operation costs a load and a test of `isEnabled` — no attribute, string, span or
/// task-local binding is made. Bootstrap `InstrumentationSystem` before making the
/// coordinator. (A tracer bound with `withTracer(_:_:)` to a task is not seen: the work
/// runs on the contexts' queues, and a lookup per operation would cost every save when
/// tracing is off.)
///
/// A class: the coordinator holds one, and asking it `isEnabled` reads one stored flag
/// (a struct holding the existential tracer was copied out of the coordinator at each
/// test, 150 instructions a time — 1% of a one-object save).
final class StoreTracing: Sendable {
    /// The bootstrapped tracer; `nil` when it is the no-op tracer.
    let tracer: (any Tracer)?
    /// Whether spans are made (`tracer` is not `nil`).
    let isEnabled: Bool
    /// What every span carries: system, database, server (made once).
    private let common: SpanAttributes

    /// Looks up the bootstrapped tracer; reads the database and server of `configuration`
    /// only when there is one.
    convenience init(configuration: ConnectionConfiguration) {
        self.init(tracer: InstrumentationSystem.tracer, configuration: configuration)
    }

    /// Traces through `tracer`, unless it is the no-op tracer.
    init(tracer: any Tracer, configuration: ConnectionConfiguration) {
        guard !(tracer is NoOpTracer) else {
            self.tracer = nil
            self.isEnabled = false
            self.common = [:]
            return
        }
        self.tracer = tracer
        self.isEnabled = true
        var common: SpanAttributes = [:]
        common.set(PGDataKitTracing.system, value: .string(PGDataKitTracing.postgresql))
        common.set(PGDataKitTracing.systemName, value: .string(PGDataKitTracing.postgresql))
        if let parameters = configuration.parameters() {
            if let database = parameters["dbname"] ?? parameters["user"] {
                common.set(PGDataKitTracing.namespace, value: .string(database))
            }
            // One host and one port only: a multi-host list names no one server.
            if let host = parameters["host"] ?? parameters["hostaddr"], !host.isEmpty, !host.contains(",") {
                common.set(PGDataKitTracing.serverAddress, value: .string(host))
            }
            if let port = Int64(parameters["port"] ?? "5432") {
                common.set(PGDataKitTracing.serverPort, value: .int64(port))
            }
        }
        self.common = common
    }

    /// Runs `body` in a span of kind `.client` named `operation` (and `table`, when
    /// given), with `ServiceContext.current` the span's context so that spans inside nest
    /// under it, and counting the statements sent inside. Without a tracer it only runs
    /// `body` with `nil`.
    ///
    /// An error `body` throws ends the span with status `.error`, `error.type` and a
    /// `TracedError` (type and SQLSTATE, no message: server messages may quote values).
    @inline(__always)
    func withSpan<T>(
        _ operation: String, table: @autoclosure () -> String? = nil, entity: @autoclosure () -> String? = nil,
        _ body: (TraceSpan?) throws -> T
    ) rethrows -> T {
        guard isEnabled, let tracer else { return try body(nil) }
        return try traced(tracer, operation, table: table(), entity: entity(), body)
    }

    private func traced<T>(
        _ tracer: any Tracer, _ operation: String, table: String?, entity: String?, _ body: (TraceSpan?) throws -> T
    ) rethrows -> T {
        let name = table.map { operation + " " + $0 } ?? operation
        let span = tracer.startSpan(name, context: ServiceContext.current ?? .topLevel, ofKind: .client)
        var attributes = common
        attributes.set(PGDataKitTracing.operationName, value: .string(operation))
        if let table { attributes.set(PGDataKitTracing.collectionName, value: .string(table)) }
        if let entity { attributes.set(PGDataKitTracing.entity, value: .string(entity)) }
        span.attributes = attributes
        let traced = TraceSpan(span, operation: operation, tally: StatementTally(parent: StatementTally.current))
        defer {
            traced.finish()
            span.end()
        }
        do {
            return try ServiceContext.withValue(span.context) {
                try StatementTally.$current.withValue(traced.tally) { try body(traced) }
            }
        } catch {
            traced.failed(error)
            throw error
        }
    }
}

/// One span of the library, as its operation fills it in: attributes, retries, the
/// error. Used on the thread of the operation only.
final class TraceSpan: Sendable {
    let span: any Span
    /// The operation (`db.operation.name`).
    let operation: String
    /// The statements sent inside the span.
    let tally: StatementTally
    private let retryCount = Atomic<Int>(0)

    init(_ span: any Span, operation: String, tally: StatementTally) {
        self.span = span
        self.operation = operation
        self.tally = tally
    }

    /// Sets attributes (names from `PGDataKitTracing`).
    func set(_ values: KeyValuePairs<String, SpanAttribute>) {
        span.updateAttributes { attributes in
            for (key, value) in values { attributes.set(key, value: value) }
        }
    }

    /// Notes a redo and its cause (a `retry` event).
    func retried(_ cause: TransientCause?) {
        retryCount.add(1, ordering: .relaxed)
        var attributes: SpanAttributes = [:]
        attributes.set(PGDataKitTracing.cause, value: .string((cause ?? .other).rawValue))
        span.addEvent(SpanEvent(name: PGDataKitTracing.retryEvent, attributes: attributes))
    }

    /// Notes how many objects of each kind the operation wrote or merged, and which
    /// entities (one: `db.collection.name` too, and the table in the span's name;
    /// several: `pgdatakit.entities`).
    func setObjects(inserted: Int, updated: Int, deleted: Int, entities: [EntityDescription]) {
        set([
            PGDataKitTracing.inserted: .int64(Int64(inserted)), PGDataKitTracing.updated: .int64(Int64(updated)),
            PGDataKitTracing.deleted: .int64(Int64(deleted)),
        ])
        let distinct = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        if distinct.count == 1, let entity = distinct.values.first {
            set([PGDataKitTracing.entity: .string(entity.name), PGDataKitTracing.collectionName: .string(entity.tableName)])
            span.operationName = operation + " " + entity.tableName
        } else if distinct.count > 1 {
            set([PGDataKitTracing.entities: .string(distinct.keys.sorted().joined(separator: ","))])
        }
    }

    /// Marks the span failed: status `.error`, `error.type` and the SQLSTATE, and the
    /// error as a `TracedError` (never its message, which may quote values).
    func failed(_ error: any Error) {
        let traced = TracedError(error)
        set([PGDataKitTracing.errorType: .string(traced.type)])
        if let sqlState = traced.sqlState { set([PGDataKitTracing.statusCode: .string(sqlState)]) }
        span.recordError(traced)
        span.setStatus(SpanStatus(code: .error))
    }

    /// Sets the counts the span gathered (statements, retries).
    func finish() {
        set([
            PGDataKitTracing.statements: .int64(Int64(tally.count)),
            PGDataKitTracing.retries: .int64(Int64(retryCount.load(ordering: .relaxed))),
        ])
    }
}

/// The statements sent inside a span (and its enclosing spans), counted by the
/// coordinator where it counts `statementCount` while a tracer is bootstrapped.
final class StatementTally: Sendable {
    /// The tally of the innermost span on this thread or task.
    @TaskLocal static var current: StatementTally?

    private let counter = Atomic<Int>(0)
    private let parent: StatementTally?

    init(parent: StatementTally?) { self.parent = parent }

    var count: Int { counter.load(ordering: .relaxed) }

    /// Adds `statements` here and to the enclosing spans' tallies.
    func add(_ statements: Int) {
        var tally: StatementTally? = self
        while let current = tally {
            current.counter.add(statements, ordering: .relaxed)
            tally = current.parent
        }
    }
}

/// What a span records of an error: its type and SQLSTATE, never its message or detail
/// (a server's message can quote the values of a row, `Key (email)=(…) already exists`).
struct TracedError: Error, CustomStringConvertible {
    /// `error.type`: the SQLSTATE of a database error, or the Swift type of the error.
    let type: String
    /// The SQLSTATE of a database error.
    let sqlState: String?
    /// The Swift type of the error.
    let swiftType: String

    init(_ error: any Error) {
        swiftType = String(reflecting: Swift.type(of: error))
        if let error = error as? PostgresError {
            sqlState = error.sqlState?.rawValue
            type = error.sqlState?.rawValue ?? "PostgresError." + error.code.description
        } else {
            sqlState = nil
            type = swiftType
        }
    }

    var description: String {
        if let sqlState { return "\(swiftType) (SQLSTATE \(sqlState))" }
        return swiftType
    }
}
