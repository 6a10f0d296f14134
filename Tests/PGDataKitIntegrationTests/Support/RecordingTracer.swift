import Foundation
import PGDataKit
import Synchronization
import Tracing

/// A tracer that keeps spans in memory, bootstrapped once for the test process
/// (`InstrumentationSystem.bootstrap` may be called only once).
///
/// Tests run in parallel in one process, and every coordinator made after the bootstrap
/// traces into this tracer: a span is kept only when the context it starts in carries a
/// test's key (`RecordingTracer.Trace`), and a test reads only its own. The key travels
/// in the `ServiceContext`, so a span that a test's work starts on a context's queue is
/// kept only if the test's context crossed the queue hop.
final class RecordingTracer: Tracer, Sendable {
    typealias Span = RecordedSpan

    /// The tracer, bootstrapped on first use: read it before making the coordinator a
    /// test traces (the coordinator looks the tracer up when it is made).
    static let shared: RecordingTracer = {
        let tracer = RecordingTracer()
        InstrumentationSystem.bootstrap(tracer)  // once, before the first ContextManager
        return tracer
    }()

    /// The test a span belongs to.
    enum TestKey: ServiceContextKey {
        typealias Value = Int
    }

    /// The recorded span a context is in.
    enum SpanKey: ServiceContextKey {
        typealias Value = Int
    }

    private let spans = Mutex<[Int: [RecordedSpan]]>([:])
    /// Merge spans made under no test's key (other processes' saves, merged from the
    /// listener), by database (`db.namespace`), kept when they end.
    private let unkeyedMerges = Mutex<[String: [RecordedSpan]]>([:])
    private let lastID = Atomic<Int>(0)

    /// A tracer of its own, not bootstrapped (for a `StoreTracing` made with it).
    init() {}

    /// A new test's trace in the bootstrapped tracer: its own key, its own spans.
    static func trace() -> Trace { shared.trace() }

    /// A new test's trace in this tracer.
    func trace() -> Trace { Trace(tracer: self, test: nextID()) }

    func nextID() -> Int { lastID.add(1, ordering: .relaxed).newValue }

    func spans(of test: Int) -> [RecordedSpan] { spans.withLock { $0[test] ?? [] } }

    /// The merge spans made under no test's key in the database `name`.
    func unkeyedMerges(in name: String) -> [RecordedSpan] { unkeyedMerges.withLock { $0[name] ?? [] } }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> RecordedSpan {
        var context = context()
        let parent = context[SpanKey.self]
        let id = nextID()
        context[SpanKey.self] = id
        guard let test = context[TestKey.self] else {
            return RecordedSpan(name: operationName, kind: kind, id: id, parent: parent, context: context) { [weak self] span in
                guard span.string(PGDataKitTracing.operationName) == PGDataKitTracing.merge,
                    let database = span.string(PGDataKitTracing.namespace)
                else { return }
                self?.unkeyedMerges.withLock { $0[database, default: []].append(span) }
            }
        }
        let span = RecordedSpan(name: operationName, kind: kind, id: id, parent: parent, context: context)
        spans.withLock { $0[test, default: []].append(span) }
        return span
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(
        _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
    ) where Inject.Carrier == Carrier {}

    func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
    ) where Extract.Carrier == Carrier {}

    /// One test's view of the tracer.
    struct Trace: Sendable {
        let tracer: RecordingTracer
        let test: Int

        /// A `ServiceContext` that carries the test's key.
        var context: ServiceContext {
            var context = ServiceContext.topLevel
            context[TestKey.self] = test
            return context
        }

        /// The test's spans, in the order they started.
        var spans: [RecordedSpan] { tracer.spans(of: test) }

        /// The test's spans of one operation (`db.operation.name`), in order.
        func spans(_ operation: String) -> [RecordedSpan] {
            spans.filter { $0.string(PGDataKitTracing.operationName) == operation }
        }

        /// Runs `body` in a span `name` of the test (a request's span, say).
        func withRequestSpan<T>(
            _ name: String, _ body: (RecordedSpan) async throws -> T
        ) async rethrows -> T {
            let span = tracer.startSpan(name, context: context, ofKind: .server)
            defer { span.end() }
            return try await ServiceContext.withValue(span.context) { try await body(span) }
        }
    }
}

/// A span as recorded: name, kind, parent, attributes, events, errors, status.
final class RecordedSpan: Span, Sendable {
    struct State {
        var name: String
        var attributes: SpanAttributes = [:]
        var events: [SpanEvent] = []
        var errors: [any Error] = []
        var status: SpanStatus?
        var ended = false
    }

    let kind: SpanKind
    let id: Int
    let parent: Int?
    let context: ServiceContext
    private let state: Mutex<State>
    private let onEnd: (@Sendable (RecordedSpan) -> Void)?

    init(
        name: String, kind: SpanKind, id: Int, parent: Int?, context: ServiceContext,
        onEnd: (@Sendable (RecordedSpan) -> Void)? = nil
    ) {
        self.kind = kind
        self.id = id
        self.parent = parent
        self.context = context
        self.state = Mutex(State(name: name))
        self.onEnd = onEnd
    }

    var operationName: String {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { state.withLock { $0.attributes = newValue } }
    }

    var events: [SpanEvent] { state.withLock { $0.events } }
    var errors: [any Error] { state.withLock { $0.errors } }
    var status: SpanStatus? { state.withLock { $0.status } }
    var ended: Bool { state.withLock { $0.ended } }
    var isRecording: Bool { !ended }

    func setStatus(_ status: SpanStatus) { state.withLock { $0.status = status } }
    func addEvent(_ event: SpanEvent) { state.withLock { $0.events.append(event) } }
    func addLink(_ link: SpanLink) {}

    func recordError<Instant: TracerInstant>(
        _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {
        state.withLock { $0.errors.append(error) }
    }

    func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        state.withLock { $0.ended = true }
        onEnd?(self)
    }

    /// A string attribute's value.
    func string(_ key: String) -> String? {
        if case .string(let value)? = attributes.get(key) { return value }
        return nil
    }

    /// An integer attribute's value.
    func int(_ key: String) -> Int64? {
        switch attributes.get(key) {
        case .int64(let value)?: return value
        case .int32(let value)?: return Int64(value)
        default: return nil
        }
    }

    /// Everything the span says as text: name, attributes, events, errors, status — for
    /// checking that no value leaked into it.
    var allText: String {
        var text = [operationName]
        attributes.forEach { key, value in text.append("\(key)=\(value)") }
        for event in events {
            text.append(event.name)
            event.attributes.forEach { key, value in text.append("\(key)=\(value)") }
        }
        for error in errors { text.append(String(describing: error)) }
        if let message = status?.message { text.append(message) }
        return text.joined(separator: "\n")
    }
}
