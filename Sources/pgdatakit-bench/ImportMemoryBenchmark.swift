import ArgumentParser
import Foundation
import PGDataKit

/// Generated user records, made one at a time as the import reads them (never all in
/// memory); `observe` sees the index of each record handed out.
struct GeneratedUserRecords: Sequence, Sendable {
    let count: Int
    let observe: @Sendable (Int) -> Void

    func makeIterator() -> AnyIterator<JSONValue> {
        var index = 0
        return AnyIterator {
            guard index < count else { return nil }
            defer { index += 1 }
            observe(index)
            return [
                "UserID": .string("mem-\(index)"), "Name": .string("Generated user \(index)"),
                "Age": .number(Double(index % 90)),
            ]
        }
    }
}

/// The peak resident memory of this process so far (`VmHWM`), in megabytes.
func peakResidentMegabytes() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kilobytes = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Double($0) }
        return (kilobytes ?? 0) / 1024
    }
    return 0
}

/// A value written once and read later from another thread.
final class Measurement: @unchecked Sendable {
    // Safe: every access holds `lock`.
    private let lock = NSLock()
    private var stored: Double?

    var value: Double? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

struct ImportMemoryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-memory",
        abstract: "A long import through an import operation: peak memory early and at the end.",
        discussion: """
            Streams generated user records (never all in memory) through ImportOperation in batches \
            (one fetch, one save and a context reset each) and reports this process's peak resident \
            memory after 100,000 records and at the end. Flat means the end figure stays within 20% \
            of the early one.
            """)

    @Option(help: "Records imported.")
    var records = 1_000_000

    @Option(help: "Records per batch.")
    var batch = 5_000

    func run() throws {
        let database = try BenchDatabase()
        defer { database.drop() }
        let manager = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { manager.close() }
        let checkpoint = min(100_000, records / 10)
        let early = Measurement()
        let input = GeneratedUserRecords(count: records) { index in
            if index == checkpoint { early.value = peakResidentMegabytes() }
        }
        let mapper = ObjectMapper<BenchUser>(uniqueKey: \.userID, remoteKey: "UserID") { record, user in
            user.name = record["Name"]?.stringValue
            user.age = record["Age"]?.intValue
        }
        let operation = manager.importOperation(input, mapper: mapper, options: ImportOptions(batchSize: batch))
        let seconds = measure { operation.start() }
        if let error = operation.error { throw error }
        let late = peakResidentMegabytes()
        let earlyPeak = early.value ?? late
        let summary = operation.summary ?? ImportSummary()
        print("import of \(records) generated records in batches of \(batch)")
        print("  \(summary)")
        print(String(format: "  %.0f rows/s", Double(records) / seconds))
        print(String(format: "  peak RSS after %d records: %.1f MB", checkpoint, earlyPeak))
        print(String(format: "  peak RSS after %d records: %.1f MB (%.2f× the early figure)", records, late, late / earlyPeak))
        print(
            String(
                format: "RESULT import-memory peak_mb_early=%.1f peak_mb_end=%.1f growth=%.2f rows_per_s=%.0f", earlyPeak, late,
                late / earlyPeak, Double(records) / seconds))
    }
}
