import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// `pgdatakit-bench controller` runs with two processes and ends with its RESULT line
/// (small sizes: figures come from release builds, not from tests).
@Suite("pgdatakit-bench controller (the built binary)", .heavy)
struct ControllerBenchmarkTests {
    @Test func controllerScenarioMeasuresRefreshBesideMerge() throws {
        let server = try #require(try TestDatabase.serverConfiguration().renderedConnectionString())
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = server
        let outcome = try ChildProcess.run(
            try CLI.builtProduct("pgdatakit-bench").path,
            ["controller", "--rows", "3000", "--controllers", "4", "--batches", "8", "--warmup", "1", "--batch-size", "50"],
            in: TestDatabase.repositoryRoot, environment: environment)
        #expect(outcome.status == 0, "\(outcome.output)")
        #expect(outcome.output.contains("controllers equal to fresh fetches at the end: yes"))
        let last = try #require(outcome.output.split(separator: "\n").last)
        let parts = last.split(separator: " ")
        #expect(parts.prefix(2) == ["RESULT", "controller"])
        var fields: [String: Double] = [:]
        for part in parts.dropFirst(2) {
            let pair = part.split(separator: "=")
            fields[String(pair[0])] = Double(pair[1])
        }
        #expect(
            Set(fields.keys) == ["p50_ms", "p99_ms", "merge_p50_ms", "statements_per_change_set", "after_merge_p50_ms"])
        // Times run from a stamp the writer takes before sending its save: a merge cannot
        // end before it, however loaded the machine (a stamp taken once the COMMIT
        // returned could, and once gave merge_p50_ms=0). A callback runs after its merge.
        #expect((fields["p50_ms"] ?? 0) > 0 && (fields["merge_p50_ms"] ?? 0) > 0)
        #expect((fields["after_merge_p50_ms"] ?? -1) >= 0)
        #expect((fields["p50_ms"] ?? 0) <= (fields["p99_ms"] ?? 0))
        // One membership statement per change set, shared by the four controllers.
        #expect(fields["statements_per_change_set"] == 0.25)
    }
}
