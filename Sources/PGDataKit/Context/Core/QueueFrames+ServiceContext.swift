import Tracing

/// The caller's `ServiceContext` (swift-distributed-tracing's task-local context: trace,
/// baggage) carried across the hop onto a context's queue, so that the spans of the work
/// there nest under the caller's span.
///
/// `perform` reads it where it is called and its block runs with it, whether a tracer is
/// bootstrapped or not (other instruments and loggers read it too). `performAndWait`
/// needs nothing: `DispatchQueue.sync` runs the block on the calling thread, where the
/// calling task's task-locals are still visible (checked by `TracingTests`).
extension QueueFrames {
    /// `ServiceContext.current` where the caller is.
    @inline(__always)
    static func callerServiceContext() -> ServiceContext? { ServiceContext.current }

    /// Runs `body` as `run(in:_:)` does, with `serviceContext` (the caller's) as
    /// `ServiceContext.current` when there is one.
    @inline(__always)
    static func run<T>(in context: AnyObject, carrying serviceContext: ServiceContext?, _ body: () throws -> T) rethrows -> T {
        guard let serviceContext else { return try run(in: context, body) }
        return try ServiceContext.withValue(serviceContext) { try run(in: context, body) }
    }
}
