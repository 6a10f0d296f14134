/// Keeps an observer registered until it is cancelled or released.
public final class ObserverToken: Sendable {
    private let cancellation: @Sendable () -> Void

    init(_ cancellation: @escaping @Sendable () -> Void) {
        self.cancellation = cancellation
    }

    /// Stops the observation.
    public func cancel() { cancellation() }

    deinit { cancellation() }
}
