import Foundation
import PGDataKit

/// `history-consume DATABASE_URL READER OUTPUT_FILE`: a consumer of the change log's
/// history that may be killed (SIGKILL) at any moment and started again.
///
/// For each record of the reader's sequence it appends one line `<record id> <token>`
/// to OUTPUT_FILE (one `write`), then acknowledges every fifth record (acknowledging
/// fewer than all is what a consumer does for speed; what is not acknowledged yet the
/// restart takes from the file). The file is what the
/// consumer has done, so at start-up it goes on from there: a line cut short by the kill
/// is removed, and the last line's token is acknowledged again (the kill may have come
/// between writing a line and acknowledging it). Prints `started` once its sequence
/// runs. Never returns.
func historyConsume(_ arguments: [String]) -> Never {
    guard arguments.count >= 5 else { fail(usage) }
    let (url, name, path) = (arguments[2], arguments[3], arguments[4])
    do {
        let coordinator = try StoreCoordinator(
            model: try Model(entities: []), configuration: ConnectionConfiguration(url), maximumConnections: 2,
            changeLog: ChangeLogOptions(relay: relayOption()))
        let reader = try coordinator.existingHistoryReader(named: name)
        if let last = try completeLines(of: path).last {
            let fields = last.split(separator: " ")
            guard fields.count == 2 else { fail("unreadable line in \(path): \(last)") }
            try reader.acknowledge(try HistoryToken(parsing: String(fields[1])))
        }
        let output = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard output >= 0 else { fail("cannot open \(path)") }
        Task.detached {
            do {
                var records = reader.records().makeAsyncIterator()
                emit("started")
                var written = 0
                while let record = try await records.next() {
                    guard let token = record.historyToken else { fail("record \(record.id) without a token") }
                    let line = Array("\(record.id) \(token)\n".utf8)
                    // Unsafe: `write` reads `$0.count` bytes of `line` inside the closure and
                    // keeps no pointer to them.
                    guard line.withUnsafeBytes({ write(output, $0.baseAddress, $0.count) }) == line.count else {
                        fail("cannot write to \(path)")
                    }
                    written += 1
                    if written % 5 == 0 { try await reader.acknowledge(record) }
                }
                fail("the history sequence ended")
            } catch {
                fail("\(error)")
            }
        }
        dispatchMain()
    } catch {
        fail("\(error)")
    }
}

/// The file's complete lines; a last line without its newline (a write cut short) is
/// cut off the file.
func completeLines(of path: String) throws -> [String] {
    guard let data = FileManager.default.contents(atPath: path), !data.isEmpty else { return [] }
    var complete = data
    if data.last != UInt8(ascii: "\n") {
        let end = data.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? data.startIndex
        complete = data[data.startIndex..<end]
        guard truncate(path, off_t(complete.count)) == 0 else { fail("cannot truncate \(path)") }
    }
    return String(decoding: complete, as: UTF8.self).split(separator: "\n").map(String.init)
}
