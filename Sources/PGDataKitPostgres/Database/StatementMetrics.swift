import CoreMetrics

/// A connection's statement timer (`ConnectionPoolMetrics.statementTime`), made from the
/// factory bootstrapped when the connection opened; there is none when that is
/// swift-metrics' no-op factory, and then nothing is read or recorded.
final class StatementMetrics: Sendable {
    /// What one round trip to the server carried: the `kind` dimension.
    enum Kind: Int, CaseIterable {
        /// One statement (with a `BEGIN` kept for it, when there is one).
        case statement
        /// Several statements in one round trip (a save's `BEGIN` … `COMMIT`).
        case pipeline
        /// A `COPY … FROM STDIN`, from its start to the server's answer.
        case copy

        /// The dimension's value.
        var name: String {
            switch self {
            case .statement: "statement"
            case .pipeline: "pipeline"
            case .copy: "copy"
            }
        }
    }

    private let timers: [any TimerHandler]

    /// The timers of `factory`; `nil` when it is the no-op factory.
    init?(factory: any MetricsFactory = MetricsSystem.factory) {
        guard !(factory is NOOPMetricsHandler) else { return nil }
        timers = Kind.allCases.map {
            factory.makeTimer(label: ConnectionPoolMetrics.statementTime, dimensions: [("kind", $0.name)])
        }
    }

    /// Records a round trip of `kind` that began at `start` and has just ended.
    func record(_ kind: Kind, since start: ContinuousClock.Instant) {
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        timers[kind.rawValue].recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
