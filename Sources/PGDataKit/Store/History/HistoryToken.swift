/// A position in the change log's history: every change record up to here has been
/// read, none after — Core Data's `NSPersistentHistoryToken`. Every record that a history
/// read delivers carries the token after it (`ChangeRecord.historyToken`); keep the token
/// of the last record you processed, and a restarted process goes on from there with
/// `StoreCoordinator.history(after:)` or a `HistoryReader`.
///
/// For example, keep it anywhere a string fits:
///
/// ```swift
/// let saved = record.historyToken?.description        // "h1:748213:7:2,5:10421:"
/// // after a restart
/// let token = try HistoryToken(parsing: saved)
/// for try await record in coordinator.history(after: token) { … }
/// ```
///
/// A token is opaque: write it and read it back (`description`, `init(parsing:)`,
/// `Codable` as that string), nothing more.
///
/// **Why not the record's id.** Record ids are drawn before commit, so transaction 11's
/// record can become visible before transaction 10's; "every record after id 41" would
/// skip record 42 for good when it commits after 43 was read. A token is instead a
/// PostgreSQL snapshot (`pg_current_snapshot()`: the oldest transaction still running,
/// the next one to start, and those running in between): the records it *covers* are
/// those of transactions that had ended when it was taken, less those still running then.
/// A record committed late — its transaction in the running list — is not covered, and
/// comes with the next read after the token, whatever its id. Tokens of records within
/// one read are snapshots too, made from the read's own (see `ChangeLog.readHistory`), so
/// a token is always one snapshot, never a list of records.
///
/// **What comparing means.** Tokens are ordered by the oldest transaction they do not
/// cover, then by the next one to start, then by how many in between they leave out
/// (more is earlier). Along one feed — the records of one sequence or reader, in order —
/// that order never goes back: a later token is greater than or equal to an earlier one.
/// Tokens of different feeds (or databases) compare too, but then the order only says
/// roughly which has come further; whether one has seen everything another has is
/// `hasSeen(everythingUpTo:)`. Tokens of different databases mean nothing to each other.
public struct HistoryToken: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// Transactions below this one are covered.
    let xmin: UInt64
    /// Transactions from this one on are not covered.
    let xmax: UInt64
    /// Transactions in `[xmin, xmax)` that are not covered, ascending.
    let running: [UInt64]
    /// A hint for reading after the token: every record that the token does not cover
    /// has an id above this, or belongs to a transaction in `running` or `lookup`, or
    /// to one from `lookupFrom` on. `nil`
    /// when unknown (the read then looks at every record of an uncovered transaction).
    let floor: Int64?
    /// Transactions from `xmax` on whose records may have ids at or below `floor`
    /// (transactions that were running when the token was made), ascending.
    let lookup: [UInt64]
    /// Every transaction from this one on may also have records at or below `floor`:
    /// the `xmax` of the snapshot of the read that made the token. A snapshot lists the
    /// transactions running below its `xmax` (`lookup`), not those running from it on —
    /// transactions that had their id, and may have drawn their record's id, before the
    /// snapshot, but that no transaction with a higher id had ended before yet. At least
    /// `xmax`.
    let lookupFrom: UInt64

    /// The first word of a token's text: the format's version.
    static let version = "h1"
    /// The longest token text read (a snapshot of a server with thousands of transactions
    /// running stays far below).
    static let maximumTextLength = 1 << 20

    /// A token from its parts, in canonical form: `xmin` is the oldest transaction left
    /// out (or `xmax`), so that tokens that cover the same transactions are equal.
    init(xmax: UInt64, running: [UInt64], floor: Int64?, lookup: [UInt64] = [], lookupFrom: UInt64? = nil) {
        let sorted = Self.ascendingDistinct(running.filter { $0 < xmax })
        let from = Swift.max(lookupFrom ?? xmax, xmax)
        self.xmin = sorted.first ?? xmax
        self.xmax = xmax
        self.running = sorted
        self.floor = floor
        self.lookup = Self.ascendingDistinct(lookup.filter { $0 >= xmax })
        self.lookupFrom = from
    }

    /// A token exactly as given (parsed text and snapshots keep their `xmin`).
    private init(xmin: UInt64, xmax: UInt64, running: [UInt64], floor: Int64?, lookup: [UInt64], lookupFrom: UInt64) {
        self.xmin = xmin
        self.xmax = xmax
        self.running = running
        self.floor = floor
        self.lookup = lookup
        self.lookupFrom = lookupFrom
    }

    private static func ascendingDistinct(_ values: [UInt64]) -> [UInt64] {
        var sorted = values
        sorted.sort()
        var result: [UInt64] = []
        result.reserveCapacity(sorted.count)
        for value in sorted where result.last != value { result.append(value) }
        return result
    }

    // MARK: - Text

    /// The token's text: `h1:<xmin>:<xmax − xmin>:<running, as offsets from xmin>`, then,
    /// when the token has a read hint, `:<floor>:<lookup, as offsets from xmax>`, and
    /// `:<lookupFrom − xmax>` when that is not 0 (text without it reads as 0). Lists are
    /// comma-separated and may be empty (an empty running list may also be left out with
    /// its colon when reading). No spaces, nothing a shell must quote.
    public var description: String {
        var text = "\(Self.version):\(xmin):\(xmax - xmin):"
        text += running.map { String($0 - xmin) }.joined(separator: ",")
        if let floor {
            text += ":\(floor):" + lookup.map { String($0 - xmax) }.joined(separator: ",")
            if lookupFrom > xmax { text += ":\(lookupFrom - xmax)" }
        }
        return text
    }

    /// Reads a token's text (`description`).
    ///
    /// For example:
    ///
    /// ```swift
    /// let token = try HistoryToken(parsing: "h1:748213:7:2,5")
    /// ```
    ///
    /// - Throws: `HistoryError.malformedToken` naming what is wrong (never echoing the
    ///   text).
    public init(parsing text: String) throws {
        guard text.utf8.count <= Self.maximumTextLength else {
            throw HistoryError.malformedToken(reason: "longer than \(Self.maximumTextLength) bytes")
        }
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.first == Substring(Self.version) else {
            throw HistoryError.malformedToken(reason: "it does not start with \(Self.version):")
        }
        guard [3, 4, 6, 7].contains(fields.count) else {
            throw HistoryError.malformedToken(reason: "expected 3, 4, 6 or 7 colon-separated fields, found \(fields.count)")
        }
        let xmin = try Self.number(fields[1], "the oldest transaction")
        guard xmin >= 1 else { throw HistoryError.malformedToken(reason: "the oldest transaction is 0") }
        let span = try Self.number(fields[2], "the span")
        guard span <= UInt64(Int64.max) - xmin else { throw HistoryError.malformedToken(reason: "the span is too large") }
        let xmax = xmin + span
        let running = fields.count > 3 ? try Self.offsets(fields[3], from: xmin, below: xmax, "the running transactions") : []
        var floor: Int64?
        var lookup: [UInt64] = []
        var lookupFrom = xmax
        if fields.count >= 6 {
            floor = Int64(try Self.number(fields[4], "the read hint"))
            if fields.count == 7 {
                let offset = try Self.number(fields[6], "the lookup start")
                guard offset <= UInt64(Int64.max) - xmax else {
                    throw HistoryError.malformedToken(reason: "the lookup start is too large")
                }
                lookupFrom = xmax + offset
            }
            lookup = try Self.offsets(fields[5], from: xmax, below: UInt64(Int64.max), "the lookup transactions")
        }
        self.init(xmin: xmin, xmax: xmax, running: running, floor: floor, lookup: lookup, lookupFrom: lookupFrom)
    }

    /// A decimal number up to `Int64.max` (transaction ids and record ids fit both
    /// PostgreSQL's `xid8` and `bigint`).
    private static func number(_ text: Substring, _ what: String) throws -> UInt64 {
        guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let value = UInt64(text), value <= UInt64(Int64.max)
        else { throw HistoryError.malformedToken(reason: "\(what) is not a decimal number up to 2^63 − 1") }
        return value
    }

    /// Ascending offsets from `base`, each landing below `limit`.
    private static func offsets(_ text: Substring, from base: UInt64, below limit: UInt64, _ what: String) throws
        -> [UInt64]
    {
        guard !text.isEmpty else { return [] }
        var values: [UInt64] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let offset = try number(part, "an offset in \(what)")
            guard offset < limit - base else { throw HistoryError.malformedToken(reason: "\(what) leave the token's range") }
            let value = base + offset
            guard values.last.map({ $0 < value }) ?? true else {
                throw HistoryError.malformedToken(reason: "\(what) are not in ascending order")
            }
            values.append(value)
        }
        return values
    }

    /// A token at a PostgreSQL snapshot's text (`xmin:xmax:xip,…`), as the server writes
    /// it, with an optional read hint.
    ///
    /// - Throws: `HistoryError.malformedToken` for text the server would not write.
    init(snapshot text: String, floor: Int64?, lookup: [UInt64] = []) throws {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw HistoryError.malformedToken(reason: "not a snapshot") }
        let xmin = try Self.number(parts[0], "the snapshot's xmin")
        let xmax = try Self.number(parts[1], "the snapshot's xmax")
        guard xmin >= 1, xmin <= xmax else { throw HistoryError.malformedToken(reason: "not a snapshot") }
        var running: [UInt64] = []
        if !parts[2].isEmpty {
            for part in parts[2].split(separator: ",", omittingEmptySubsequences: false) {
                let value = try Self.number(part, "a running transaction")
                guard value >= xmin, value < xmax, running.last.map({ $0 < value }) ?? true else {
                    throw HistoryError.malformedToken(reason: "not a snapshot")
                }
                running.append(value)
            }
        }
        self.init(
            xmin: xmin, xmax: xmax, running: running, floor: floor,
            lookup: Self.ascendingDistinct(lookup.filter { $0 >= xmax }), lookupFrom: xmax)
    }

    /// The token's coverage as PostgreSQL's `pg_snapshot` text.
    var snapshotText: String {
        "\(xmin):\(xmax):" + running.map(String.init).joined(separator: ",")
    }

    /// The transactions to look up by id when reading with the hint (`running` and
    /// `lookup`), as an `xid8[]` literal.
    var lookupLiteral: String {
        "{" + (running + lookup).map(String.init).joined(separator: ",") + "}"
    }

    // MARK: - Coverage

    /// Whether the records of `transaction` are covered (read) at this token.
    func covers(_ transaction: UInt64) -> Bool {
        if transaction < xmin { return true }
        if transaction >= xmax { return false }
        return !Self.contains(running, transaction)
    }

    /// Whether every transaction `other` covers is covered by this token too: whoever
    /// stands at this token has read every record that whoever stands at `other` has.
    ///
    /// For example, to see which of two consumers is behind:
    ///
    /// ```swift
    /// if searchIndex.hasSeen(everythingUpTo: cache) { print("the cache is behind") }
    /// ```
    public func hasSeen(everythingUpTo other: HistoryToken) -> Bool {
        // What this token leaves out below its xmax, `other` must leave out too.
        for transaction in running where other.covers(transaction) { return false }
        guard other.xmax > xmax else { return true }
        // And everything from this token's xmax to `other`'s.
        guard xmax >= other.xmin else { return false }
        let (from, to) = (Self.lowerBound(other.running, xmax), other.running.count)
        return UInt64(to - from) == other.xmax - xmax
    }

    /// The first index of `sorted` whose value is at least `value`.
    static func lowerBound(_ sorted: [UInt64], _ value: UInt64) -> Int {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low
    }

    static func contains(_ sorted: [UInt64], _ value: UInt64) -> Bool {
        let index = lowerBound(sorted, value)
        return index < sorted.count && sorted[index] == value
    }

    /// The same coverage without the transactions in `finished` (transactions known to
    /// have ended without a change record, which covering changes nothing about), and
    /// without them in the lookup list.
    func covering(_ finished: Set<UInt64>) -> HistoryToken {
        guard !finished.isEmpty else { return self }
        return HistoryToken(
            xmax: xmax, running: running.filter { !finished.contains($0) }, floor: floor,
            lookup: lookup.filter { !finished.contains($0) }, lookupFrom: lookupFrom)
    }

    // MARK: - Order

    /// See "What comparing means" above.
    public static func < (left: HistoryToken, right: HistoryToken) -> Bool {
        if left.xmin != right.xmin { return left.xmin < right.xmin }
        if left.xmax != right.xmax { return left.xmax < right.xmax }
        if left.running.count != right.running.count { return left.running.count > right.running.count }
        if left.running != right.running { return left.running.lexicographicallyPrecedes(right.running) }
        if left.floor != right.floor { return (left.floor ?? -1) < (right.floor ?? -1) }
        if left.lookup.count != right.lookup.count { return left.lookup.count > right.lookup.count }
        if left.lookup != right.lookup { return left.lookup.lexicographicallyPrecedes(right.lookup) }
        return left.lookupFrom < right.lookupFrom
    }

    // MARK: - Codable

    /// Reads the token's text.
    ///
    /// - Throws: `DecodingError.dataCorrupted` wrapping `HistoryError.malformedToken`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            try self.init(parsing: text)
        } catch {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: container.codingPath, debugDescription: "not a history token: \(error)",
                    underlyingError: error))
        }
    }

    /// Writes the token's text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
