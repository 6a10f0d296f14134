import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("History tokens, without a server")
struct HistoryTokenTests {
    @Test(arguments: ["h1:100:10:", "h1:100:10:2,5", "h1:100:0:", "h1:100:10:0,9:4711:", "h1:3:7::0:0,2,40", "h1:100:10:0,9:4711::25"])
    func textRoundTrips(_ text: String) throws {
        let token = try HistoryToken(parsing: text)
        #expect(token.description == text)
        #expect(try HistoryToken(parsing: token.description) == token)
    }

    @Test func anEmptyRunningListMayBeLeftOut() throws {
        #expect(try HistoryToken(parsing: "h1:100:10") == HistoryToken(parsing: "h1:100:10:"))
    }

    @Test func codableIsTheText() throws {
        let token = try HistoryToken(parsing: "h1:748213:7:2,5:10421:1")
        let data = try JSONEncoder().encode(["token": token])
        #expect(String(decoding: data, as: UTF8.self) == #"{"token":"h1:748213:7:2,5:10421:1"}"#)
        #expect(try JSONDecoder().decode([String: HistoryToken].self, from: data)["token"] == token)
        #expect(throws: DecodingError.self) {
            _ = try JSONDecoder().decode([String: HistoryToken].self, from: Data(#"{"token":"h1:0:1:"}"#.utf8))
        }
    }

    @Test(arguments: [
        ("", "it does not start with h1:"),
        ("h2:100:10:", "it does not start with h1:"),
        ("h1:100", "expected 3, 4, 6 or 7 colon-separated fields, found 2"),
        ("h1:100:10::5", "expected 3, 4, 6 or 7 colon-separated fields, found 5"),
        ("h1:0:10:", "the oldest transaction is 0"),
        ("h1:-5:10:", "the oldest transaction is not a decimal number up to 2^63 − 1"),
        ("h1:+5:10:", "the oldest transaction is not a decimal number up to 2^63 − 1"),
        ("h1:100:x:", "the span is not a decimal number up to 2^63 − 1"),
        ("h1:9223372036854775807:1:", "the span is too large"),
        ("h1:99999999999999999999:1:", "the oldest transaction is not a decimal number up to 2^63 − 1"),
        ("h1:100:10:10", "the running transactions leave the token's range"),
        ("h1:100:10:5,3", "the running transactions are not in ascending order"),
        ("h1:100:10:5,5", "the running transactions are not in ascending order"),
        ("h1:100:10:5,", "an offset in the running transactions is not a decimal number up to 2^63 − 1"),
        ("h1:100:10::x:", "the read hint is not a decimal number up to 2^63 − 1"),
        ("h1:100:10::7:3,1", "the lookup transactions are not in ascending order"),
        ("h1:100:10::7::x", "the lookup start is not a decimal number up to 2^63 − 1"),
        ("h1:100:10::7::9223372036854775807", "the lookup start is too large"),
    ])
    func malformedTextIsATypedError(_ text: String, _ reason: String) {
        #expect(throws: HistoryError.malformedToken(reason: reason)) { try HistoryToken(parsing: text) }
    }

    @Test func overlongTextIsRefusedWithoutReadingIt() {
        let text = "h1:100:10:" + String(repeating: "1", count: HistoryToken.maximumTextLength)
        #expect(throws: HistoryError.malformedToken(reason: "longer than \(HistoryToken.maximumTextLength) bytes")) {
            try HistoryToken(parsing: text)
        }
    }

    @Test func errorsNeverRepeatTheText() throws {
        do {
            _ = try HistoryToken(parsing: "h1:secret-looking-text:1:")
            Issue.record("expected an error")
        } catch {
            #expect(!"\(error)".contains("secret"))
        }
    }

    @Test func coverageIsTheSnapshots() throws {
        let token = try HistoryToken(parsing: "h1:100:10:2,5")  // 100:110:102,105
        #expect(token.snapshotText == "100:110:102,105")
        #expect(token.covers(99) && token.covers(100) && token.covers(101) && token.covers(109))
        #expect(!token.covers(102) && !token.covers(105) && !token.covers(110) && !token.covers(1_000))
    }

    @Test func hasSeenComparesCoverage() throws {
        let early = try HistoryToken(parsing: "h1:100:10:2,5")  // 100:110:102,105
        let later = try HistoryToken(parsing: "h1:105:20:0,12")  // 105:125:105,117
        #expect(later.hasSeen(everythingUpTo: early))
        #expect(!early.hasSeen(everythingUpTo: later))
        #expect(early.hasSeen(everythingUpTo: early))
        // A later xmax whose extra range is all running covers nothing more.
        let wider = HistoryToken(xmax: 115, running: [102, 105, 110, 111, 112, 113, 114], floor: nil)
        #expect(early.hasSeen(everythingUpTo: wider) && wider.hasSeen(everythingUpTo: early))
        // Two tokens that each cover something the other does not.
        let other = HistoryToken(xmax: 110, running: [103], floor: nil)
        #expect(!other.hasSeen(everythingUpTo: early) && !early.hasSeen(everythingUpTo: other))
    }

    @Test func orderFollowsTheLowAndHighBoundsThenFewerRunning() throws {
        let tokens = try ["h1:100:10:0,2,5", "h1:100:10:0,5", "h1:100:11:0", "h1:101:10:", "h1:101:10::7:"].map(
            HistoryToken.init(parsing:))
        #expect(tokens == tokens.sorted())
        for (left, right) in zip(tokens, tokens.dropFirst()) { #expect(left < right && !(right < left)) }
    }

    @Test func canonicalTokensStartAtTheOldestTransactionLeftOut() {
        let token = HistoryToken(xmax: 50, running: [44, 41, 41, 60], floor: 9, lookup: [70, 49, 51])
        #expect(token.description == "h1:41:9:0,3:9:1,20")
        #expect(HistoryToken(xmax: 50, running: [], floor: nil).description == "h1:50:0:")
        #expect(token.covering([41, 51]).description == "h1:44:6:0:9:20")
    }

    // MARK: - The tokens of a read, against a model of transactions and snapshots

    /// A seeded generator, so that a failure can be replayed.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var value = state
            value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
            value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
            return value ^ (value >> 31)
        }
    }

    /// Transactions drawing ids as PostgreSQL does (the transaction id first, the record
    /// id when the record is written), committing late or aborting at random, and a
    /// reader paging through the history with the snapshot positions the library uses.
    struct World {
        var random: Generator
        var nextTransaction: UInt64 = 3
        var nextRecord: Int64 = 1
        /// Running transactions and their records (ids), if written.
        var running: [UInt64: [Int64]] = [:]
        /// Committed records: id → transaction.
        var committed: [Int64: UInt64] = [:]

        mutating func snapshot() -> HistoryToken {
            let ids = running.keys.sorted()
            return HistoryToken(xmax: nextTransaction, running: ids, floor: committed.keys.max() ?? 0)
        }

        /// One random event.
        mutating func step() {
            let roll = Int.random(in: 0..<100, using: &random)
            if roll < 30 || running.isEmpty {
                running[nextTransaction] = []
                nextTransaction += 1
                return
            }
            guard let transaction = running.keys.randomElement(using: &random) else { return }
            if roll < 70 {
                // Write a record (sometimes a second one), commit at once most of the time.
                running[transaction, default: []].append(nextRecord)
                nextRecord += 1
                if roll < 60 { commit(transaction) }
            } else if roll < 92 {
                commit(transaction)  // with its records, or none
            } else {
                running[transaction] = nil  // rolled back: its record ids are never seen
            }
        }

        mutating func commit(_ transaction: UInt64) {
            for id in running[transaction] ?? [] { committed[id] = transaction }
            running[transaction] = nil
        }

        /// What `ChangeLog.readHistory` selects, by brute force: the records visible in
        /// `snapshot` and not covered by `token`, first `limit` by id plus the other
        /// records of their transactions, and the uncovered transactions left beyond.
        func read(after token: HistoryToken, at snapshot: HistoryToken, limit: Int) -> (
            page: [ChangeLog.PageEntry], beyond: [UInt64], full: Bool
        ) {
            let visible = committed.filter { snapshot.covers($0.value) }
            let pending = visible.filter { !token.covers($0.value) }.sorted { $0.key < $1.key }
            let first = Array(pending.prefix(limit))
            let firstTransactions = Set(first.map(\.value))
            let last = first.last?.key ?? 0
            var page = first.map { ChangeLog.PageEntry(id: $0.key, transaction: $0.value) }
            page += pending.filter { $0.key > last && firstTransactions.contains($0.value) }
                .map { ChangeLog.PageEntry(id: $0.key, transaction: $0.value, extra: true) }
            let full = first.count >= limit
            let highest = page.map(\.transaction).max() ?? 0
            let beyond = full
                ? Set(pending.map(\.value).filter {
                    !firstTransactions.contains($0)
                        && (token.running.contains($0) || ($0 >= token.xmax && $0 <= highest))
                }).sorted() : []
            return (page, beyond, full)
        }
    }

    @Test(arguments: 0..<40)
    func eachRecordsTokenCoversExactlyWhatWasDeliveredAndItsHintHolds(_ seed: UInt64) throws {
        var world = World(random: Generator(state: seed))
        for _ in 0..<20 { world.step() }
        var token = world.snapshot()
        let initiallyCovered = Set(world.committed.values)
        var delivered: [Int64] = []
        // Every token handed out, with the transactions delivered up to it.
        var handedOut: [(token: HistoryToken, delivered: Set<UInt64>)] = [(token, initiallyCovered)]
        var deliveredTransactions = initiallyCovered
        let limit = 1 + Int(seed % 5)
        for _ in 0..<300 {
            for _ in 0..<Int.random(in: 0..<6, using: &world.random) { world.step() }
            let snapshot = world.snapshot()
            let read = world.read(after: token, at: snapshot, limit: limit)
            let tokens = HistoryToken.tokens(
                after: token, read: snapshot, page: read.page, beyond: read.beyond, full: read.full)
            #expect(tokens.records.count == read.page.count)
            var remaining = Dictionary(grouping: read.page, by: \.transaction).mapValues(\.count)
            for (entry, after) in zip(read.page, tokens.records) {
                delivered.append(entry.id)
                remaining[entry.transaction, default: 1] -= 1
                if remaining[entry.transaction] == 0 { deliveredTransactions.insert(entry.transaction) }
                handedOut.append((after, deliveredTransactions))
                #expect(token <= after || read.page.isEmpty, "a later token is not less than an earlier one: \(token) then \(after)")
            }
            #expect(snapshot.hasSeen(everythingUpTo: tokens.end))
            handedOut.append((tokens.end, deliveredTransactions))
            #expect(tokens.end >= token)
            token = tokens.end
        }
        // Finish every transaction, then read to the end.
        for transaction in world.running.keys { world.commit(transaction) }
        while true {
            let snapshot = world.snapshot()
            let read = world.read(after: token, at: snapshot, limit: limit)
            let tokens = HistoryToken.tokens(
                after: token, read: snapshot, page: read.page, beyond: read.beyond, full: read.full)
            delivered += read.page.map(\.id)
            token = tokens.end
            if !read.full { break }
        }
        // Every committed record exactly once, none of the aborted ones.
        let expected = world.committed.keys.filter { !initiallyCovered.contains(world.committed[$0] ?? 0) }.sorted()
        #expect(delivered.sorted() == expected)
        #expect(Set(delivered).count == delivered.count)
        // Every token covers exactly the delivered transactions among those with records
        // (now that all have committed), and its read hint finds every other record.
        let withRecords = Set(world.committed.values)
        for (handed, deliveredThen) in handedOut {
            for transaction in withRecords {
                #expect(
                    handed.covers(transaction) == deliveredThen.contains(transaction),
                    "token \(handed) and transaction \(transaction)")
            }
            if let floor = handed.floor {
                for (id, transaction) in world.committed where !handed.covers(transaction) {
                    #expect(
                        id > floor || handed.running.contains(transaction) || handed.lookup.contains(transaction),
                        "record \(id) of transaction \(transaction) escapes the hint of \(handed)")
                }
            }
        }
    }

    @Test func aTransactionCommittingLateIsLeftOutUntilItIsRead() {
        // Transaction 10 wrote record 1 first, 11 wrote record 2 and committed; a read
        // sees only record 2. Its token must leave 10 out although 10 < 11.
        let start = HistoryToken(xmax: 10, running: [], floor: 0)
        let snapshot = HistoryToken(xmax: 12, running: [10], floor: 2)
        let tokens = HistoryToken.tokens(
            after: start, read: snapshot, page: [ChangeLog.PageEntry(id: 2, transaction: 11)], beyond: [], full: false)
        #expect(tokens.end == snapshot)
        #expect(!tokens.end.covers(10) && tokens.end.covers(11))
        #expect(tokens.end.lookupLiteral == "{10}")  // record 1 is found by its transaction
    }
}
