import CoreMetrics
import Synchronization

/// The swift-metrics backend of a demo worker: it sums the counters PGDataKit reports
/// (`PGDataKitMetrics`), so the worker shows the library's own figures (transient
/// failures by cause, the library's retries) rather than counting them a second time.
final class DemoMetrics: MetricsFactory, Sendable {
    /// One counter's running total.
    private final class Total: CounterHandler, Sendable {
        let value = Atomic<Int64>(0)
        func increment(by amount: Int64) { value.add(amount, ordering: .relaxed) }
        func reset() { value.store(0, ordering: .relaxed) }
    }

    /// A recorder or timer whose values the demo does not need.
    private final class Ignored: RecorderHandler, TimerHandler, Sendable {
        func record(_ value: Int64) {}
        func record(_ value: Double) {}
        func recordNanoseconds(_ duration: Int64) {}
    }

    private let totals = Mutex<[(label: String, dimensions: [(String, String)], total: Total)]>([])

    /// Bootstraps a new backend for this process (once, before any coordinator is made).
    static func bootstrap() -> DemoMetrics {
        let metrics = DemoMetrics()
        MetricsSystem.bootstrap(metrics)
        return metrics
    }

    /// The sum of the counters with this label whose dimensions include `matching`.
    func total(_ label: String, matching: [(String, String)] = []) -> Int {
        totals.withLock { totals in
            totals.filter { entry in
                entry.label == label && matching.allSatisfy { wanted in entry.dimensions.contains { $0 == wanted } }
            }.reduce(0) { $0 + Int($1.total.value.load(ordering: .relaxed)) }
        }
    }

    /// The totals of the counters with this label, by the value of one of their
    /// dimensions (counters without it are left out).
    func totals(_ label: String, by dimension: String) -> [String: Int] {
        totals.withLock { totals in
            var sums: [String: Int] = [:]
            for entry in totals where entry.label == label {
                guard let value = entry.dimensions.first(where: { $0.0 == dimension })?.1 else { continue }
                sums[value, default: 0] += Int(entry.total.value.load(ordering: .relaxed))
            }
            return sums
        }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        let total = Total()
        totals.withLock { $0.append((label, dimensions, total)) }
        return total
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Ignored() }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Ignored() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}
