// Import modes of the test helper: several importer processes racing on overlapping keys,
// and one long import whose peak memory the tests check.
import Foundation
import PGDataKit

/// `import-race DATABASE_URL WORKER BARRIER_FILE`: imports 20,000 users — keys
/// `WORKER*10000 ..< WORKER*10000+20000`, the two halves interleaved so that the next
/// worker touches the shared half at the same moment — once the barrier file exists.
/// Prints `ready`, then `done …` with the summary, or `failed …` (exit 1).
func importRace(_ manager: ContextManager, _ arguments: [String]) {
    guard arguments.count >= 5, let worker = Int(arguments[3]) else { fail("usage: import-race DATABASE_URL WORKER BARRIER_FILE") }
    let barrier = arguments[4]
    var records: [JSONValue] = []
    records.reserveCapacity(20_000)
    for offset in 0..<10_000 {
        for half in 0..<2 {
            let key = (worker + half) * 10_000 + offset
            records.append(["UserID": .string(String(format: "race-%06d", key)), "Name": .string("worker \(worker)"), "Age": .number(Double(worker))])
        }
    }
    let mapper = ObjectMapper<HelperUser>(uniqueKey: \.userID, remoteKey: "UserID") { record, user in
        user.name = record["Name"]?.stringValue
        user.age = record["Age"]?.intValue
    }
    emit("ready")
    let start = ContinuousClock.now
    while !FileManager.default.fileExists(atPath: barrier) {
        if start.duration(to: .now) > .seconds(120) { fail("the barrier file never appeared") }
        usleep(1_000)
    }
    let operation = manager.importOperation(records, mapper: mapper, options: ImportOptions(batchSize: 1_000))
    operation.start()
    let summary = operation.summary ?? ImportSummary()
    if let error = operation.error {
        emit("failed \(error) after \(summary)")
        exit(1)
    }
    emit("done inserted=\(summary.inserted) updated=\(summary.updated) unchanged=\(summary.unchanged) retries=\(summary.retries) records=\(summary.records)")
}

/// Generated user records, made one at a time (never all in memory); calls `observe`
/// with the number of records handed out so far.
struct GeneratedUsers: Sequence, Sendable {
    let count: Int
    let observe: @Sendable (Int) -> Void

    func makeIterator() -> AnyIterator<JSONValue> {
        var index = 0
        return AnyIterator {
            guard index < count else { return nil }
            defer { index += 1 }
            observe(index)
            return ["UserID": .string("mem-\(index)"), "Name": .string("Generated user \(index)"), "Age": .number(Double(index % 90))]
        }
    }
}

/// The peak resident memory of this process (`VmHWM`), in kilobytes.
func peakResidentKilobytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// `import-memory DATABASE_URL COUNT BATCH`: imports COUNT generated users in batches
/// through an import operation; prints `rss at=<records> peak_kb=<kB>` at 100,000 records
/// and at the end, then `done …`.
func importMemory(_ manager: ContextManager, _ arguments: [String]) {
    guard arguments.count >= 5, let count = Int(arguments[3]), let batch = Int(arguments[4]) else {
        fail("usage: import-memory DATABASE_URL COUNT BATCH")
    }
    let records = GeneratedUsers(count: count) { index in
        if index == 100_000 { emit("rss at=100000 peak_kb=\(peakResidentKilobytes())") }
    }
    let mapper = ObjectMapper<HelperUser>(uniqueKey: \.userID, remoteKey: "UserID") { record, user in
        user.name = record["Name"]?.stringValue
        user.age = record["Age"]?.intValue
    }
    let operation = manager.importOperation(records, mapper: mapper, options: ImportOptions(batchSize: batch, expectedCount: Int64(count)))
    operation.start()
    let summary = operation.summary ?? ImportSummary()
    if let error = operation.error {
        emit("failed \(error) after \(summary)")
        exit(1)
    }
    emit("rss at=\(count) peak_kb=\(peakResidentKilobytes())")
    emit("done inserted=\(summary.inserted) records=\(summary.records) batches=\(summary.batches) progress=\(operation.progress.completedUnitCount)")
}
