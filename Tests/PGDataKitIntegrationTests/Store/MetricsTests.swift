import Foundation
@testable import PGDataKit
@testable import PGDataKitPostgres
import Testing

/// What PGDataKit reports through swift-metrics, counted in a process of its own (the
/// test helper bootstraps swift-metrics' test backend before making a coordinator).
@Suite("Metrics through swift-metrics")
struct MetricsTests {
    @Test func savesRetriesLockTimeoutsImportsAndMergesAreCounted() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let url = try #require(configuration.renderedConnectionString())
            let outcome = try CLI.runHelper(["metrics", url])
            #expect(outcome.status == 0, "\(outcome.error)")
            let line = try #require(outcome.output.split(separator: "\n").last.map(String.init))
            let report = try JSONValue(parsing: line)
            let counters = try #require(report["counters"])
            func counter(_ label: String, _ dimensions: String = "") -> Int {
                counters[label + "|" + dimensions]?.intValue ?? 0
            }
            // Three users, two edits of one (the second redone once), one import batch,
            // one import that met a held row, one save of another coordinator; the save
            // that timed out is not a save.
            #expect(counter(PGDataKitMetrics.saves, "context=private") == 6, "\(counters)")
            #expect(counter(PGDataKitMetrics.savedObjects, "entity=User,kind=inserted") == 14)
            #expect(counter(PGDataKitMetrics.savedObjects, "entity=User,kind=updated") == 3)
            // The import's first attempt met the held row (locked without waiting), and
            // the redo locked it in order.
            #expect(counter(PGDataKitMetrics.transientFailures, "cause=row_held") == 1)
            #expect(counter(PGDataKitMetrics.retries, "cause=row_held,unit=save") == 1)
            // The second edit's snapshot predates the first's commit: serialization
            // failure, redone read-committed, settled by its merge policy.
            #expect(counter(PGDataKitMetrics.transientFailures, "cause=serialization") == 1)
            #expect(counter(PGDataKitMetrics.retries, "cause=serialization,unit=save") == 1)
            #expect(counter(PGDataKitMetrics.transientFailures, "cause=lock_timeout") == 1)
            #expect(report["lockTimeoutThrown"]?.boolValue == true)
            #expect(counter(PGDataKitMetrics.importedRecords, "entity=User") == 10)
            #expect(counter(PGDataKitMetrics.remoteChanges) >= 1)
            #expect(counter(PGDataKitMetrics.merges) >= 1)
            #expect((report["timers"]?[PGDataKitMetrics.mergeLatency]?.intValue ?? 0) >= 1)
            #expect((report["timers"]?[PGDataKitMetrics.listenerLag]?.intValue ?? 0) >= 1)
            // The pool's gauges and wait timer (a pool of one, a borrower kept waiting
            // 50 ms; the managers' pools record under the same names, so peaks are at
            // least, and no pool has a waiter at the end).
            let pool = try #require(report["pool"])
            #expect((pool["inUsePeak"]?.doubleValue ?? 0) >= 1, "\(pool)")
            #expect((pool["waitersPeak"]?.doubleValue ?? 0) >= 1)
            #expect(pool["waitersLast"]?.doubleValue == 0)
            #expect((pool["idleLast"]?.doubleValue ?? -1) >= 0)
            #expect((pool["longestWaitMs"]?.doubleValue ?? 0) >= 40)
            // Every round trip is timed by kind: the saves' pipelines, single statements
            // (the helper's 50 ms sleep the longest); no dimension names a statement.
            let statements = try #require(report["statements"])
            #expect((statements["statement"]?.intValue ?? 0) >= 10, "\(statements)")
            #expect((statements["pipeline"]?.intValue ?? 0) >= 6)
            #expect((statements["longestStatementMs"]?.doubleValue ?? 0) >= 40)
            // Dimensions carry names, never values.
            #expect(!line.contains("metrics-0") && !line.contains("imported-"))
        }
    }
}
