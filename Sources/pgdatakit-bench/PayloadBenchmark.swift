import ArgumentParser
import Foundation
import PGDataKit

/// What reading another process's notification costs a listener: every process of a
/// host reads every save's payload (its changes included), so this work is multiplied by
/// the processes. No server: the payloads are made here, as a writer's read.
struct PayloadBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payloads",
        abstract: "Reads notification payloads of other processes' saves (no server): time per payload.",
        discussion: """
            Reads three payloads --count times each, as a listener reads another \
            process's notification: a save that updated one object, one that inserted one \
            object, and one that updated ten. Then reads them as often as a listener none \
            of whose observers wants records does (a writer that never read its main \
            context): their headers only. Prints the time per payload either way; \
            `scripts/instructions payload` counts the instructions.
            """)

    @Option(help: "How many times each payload is read.")
    var count = 20_000

    func run() throws {
        guard (1...10_000_000).contains(count) else { throw ValidationError("--count must be from 1 to 10,000,000") }
        let writer = UUID()
        let texts = Self.payloads(of: writer)
        // A first read of each, then the timed reads.
        guard read(texts, times: 1, ownOrigin: UUID()) == texts.count else {
            throw ValidationError("a payload did not read as a record")
        }
        var start = monotonicNanoseconds()
        let records = read(texts, times: count, ownOrigin: UUID())
        let whole = Double(monotonicNanoseconds() - start)
        start = monotonicNanoseconds()
        let headers = readHeaders(texts, times: count, ownOrigin: UUID())
        let header = Double(monotonicNanoseconds() - start)
        let payloads = count * texts.count
        print("payloads: \(payloads) read whole (\(records) records), \(payloads) by their headers (\(headers) records)")
        print(
            "RESULT payloads payloads=\(payloads) ns_per_payload=\(String(format: "%.1f", whole / Double(payloads)))"
                + " header_ns_per_payload=\(String(format: "%.1f", header / Double(payloads)))")
    }

    /// Reads each payload `times` times; returns how many read as another process's record.
    @inline(never)
    func read(_ texts: [String], times: Int, ownOrigin: UUID) -> Int {
        var records = 0
        for _ in 0..<times {
            for text in texts {
                if case .record = ChangeLog.payload(of: text, ownOrigin: ownOrigin) { records += 1 }
            }
        }
        return records
    }

    /// `read`, the changes left unread.
    @inline(never)
    func readHeaders(_ texts: [String], times: Int, ownOrigin: UUID) -> Int {
        var records = 0
        for _ in 0..<times {
            for text in texts {
                if case .record = ChangeLog.payload(of: text, ownOrigin: ownOrigin, readsChanges: false) { records += 1 }
            }
        }
        return records
    }

    /// Payloads as a writer's save sends them (`r1`, record id, transaction id, origin,
    /// process, server process, microseconds, the record).
    static func payloads(of origin: UUID) -> [String] {
        let head = "r1 4211 987654 \(origin.uuidString.lowercased()) 31337 4242 1764690000123456 "
        let ids = (1...10).map(String.init).joined(separator: ",")
        return [
            head + #"[{"entity":"User","inserted":[],"updated":[{"keys":["age"],"ids":[17]}],"deleted":[]}]"#,
            head + #"[{"entity":"User","inserted":[18],"updated":[],"deleted":[]}]"#,
            head + #"[{"entity":"User","inserted":[],"updated":[{"keys":["age","name"],"ids":[\#(ids)]}],"deleted":[]}]"#,
        ]
    }
}
