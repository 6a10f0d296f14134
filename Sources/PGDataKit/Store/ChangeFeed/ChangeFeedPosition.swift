/// Where a listener stands in the change log: the PostgreSQL snapshot of its last read of
/// the log, plus the transactions whose records it has delivered since from notification
/// payloads.
///
/// A record counts as delivered when its transaction is visible in the snapshot (the
/// read took it, or an earlier one did) or is in the delivered set. So a record that
/// reaches the listener twice — in a payload and in a read, in either order — is handed
/// on once: payloads of transactions the snapshot covers are skipped, and reads leave out
/// the delivered set. A read starts a new snapshot, which covers every transaction
/// delivered so far (they had committed before their notification was sent), so the set
/// empties there.
///
/// Only reads move the position. A payload's transaction joins the delivered set: its
/// notification is sent after its commit (`ChangeNotifier`), so notifications do not
/// arrive in commit order, and a snapshot a writer took (earlier writers sent one in the
/// payload) may cover a transaction whose notification is still to come. The listener
/// reads the log once notifications go quiet, on a regular check, or when the set grows
/// large.
struct ChangeFeedPosition: Sendable, Equatable {
    /// The snapshot of the last read, as text (`xmin:xmax:xip,…`).
    private(set) var snapshot: String
    /// Transactions delivered from payloads since that read.
    private(set) var delivered: Set<TransactionKey> = []
    /// The relay's host only: its own transactions announced since that read (its reads
    /// take in its own records, to pass on those no notification announced).
    private(set) var ownAnnounced: Set<TransactionKey> = []
    /// The relay's host only: records announced by id since that read (every process of
    /// the host read them itself; the host need not pass them on).
    private(set) var announced: Set<Int64> = []
    private var xmin: UInt64
    private var xmax: UInt64
    private var inProgress: Set<UInt64>

    /// A position at a snapshot's text. Text that is not a snapshot covers no
    /// transaction (every payload then leads to a read, which the server answers).
    init(snapshot: String) {
        self.snapshot = snapshot
        let parts = snapshot.split(separator: ":", omittingEmptySubsequences: false)
        var inProgress: Set<UInt64> = []
        if parts.count == 3, let xmin = UInt64(parts[0]), let xmax = UInt64(parts[1]), xmin <= xmax,
            parts[2].split(separator: ",").allSatisfy({ UInt64($0) != nil })
        {
            for part in parts[2].split(separator: ",") { inProgress.insert(UInt64(part) ?? 0) }
            self.xmin = xmin
            self.xmax = xmax
        } else {
            xmin = 0
            xmax = 0
        }
        self.inProgress = inProgress
    }

    /// Whether the record of a (committed) transaction has been delivered.
    func covers(_ transaction: UInt64) -> Bool {
        let key = TransactionKey(transaction)
        if delivered.contains(key) || ownAnnounced.contains(key) { return true }
        if transaction < xmin { return true }
        if transaction >= xmax { return false }
        return !inProgress.contains(transaction)
    }

    /// Notes a transaction delivered from a payload.
    mutating func noteDelivered(_ transaction: UInt64) {
        delivered.insert(TransactionKey(transaction))
    }

    /// Notes a transaction of this process whose notification arrived (the relay's host).
    mutating func noteOwn(_ transaction: UInt64) {
        ownAnnounced.insert(TransactionKey(transaction))
    }

    /// Whether the relay's host, with `followers` processes on its relay (its own
    /// listener among them), reads the log to confirm its own announced saves: only while
    /// others follow (its reads pass positions on to them, which cover the host's saves
    /// they were delivered).
    func confirmsOwn(followers: Int) -> Bool {
        followers > 1 && !ownAnnounced.isEmpty
    }

    /// Notes a record announced by id (a notification without the record).
    mutating func noteAnnounced(_ id: Int64) {
        announced.insert(id)
    }

    /// What the relay's host passes on after a read of the log (or a check that found
    /// nothing new): the position it reached and the position the read started from,
    /// for `adopt(relayed:)`.
    static func relayedPosition(of snapshot: String, readFrom start: String) -> String {
        snapshot + " " + start
    }

    /// Moves the position to one the relay's host passed on (`relayedPosition(of:
    /// readFrom:)`) when this position counts as delivered every transaction the host's
    /// read started after (`coversCommitted(of:)`) and the new one is as far as this one
    /// (`adopt(_:)`); returns whether it moved. A message that is no such pair is refused.
    ///
    /// A listener that follows its host's relay adopts the positions of the hosting
    /// process's reads, which the relay passes on after the notifications that process
    /// had received and the records its read found that no notification had announced
    /// (`ChangeListener`): every record of a transaction the read's end covers and its
    /// start does not reached the follower before the position did, so a follower whose
    /// own position covers the start moves on without reading the log itself. One that
    /// does not (it took its position before the hosting process took its first) reads
    /// the log itself: a record committed in between, whose process died before its
    /// notification, reached neither it nor that process's reads.
    mutating func adopt(relayed message: String) -> Bool {
        let parts = message.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2, coversCommitted(of: ChangeFeedPosition(snapshot: String(parts[1]))) else { return false }
        return adopt(String(parts[0]))
    }

    /// Whether every transaction `other`'s snapshot counts as committed counts as
    /// delivered here (committed in this snapshot, or in the delivered set). A position
    /// that is no snapshot covers nothing and is covered by nothing.
    private func coversCommitted(of other: ChangeFeedPosition) -> Bool {
        guard other.xmax > 0, xmax > 0 else { return false }
        if other.xmax > xmax {
            // (Only so far past this snapshot; a start further on is refused.)
            guard other.xmax - xmax <= 4_096 else { return false }
            for transaction in xmax..<other.xmax where !other.inProgress.contains(transaction) && !covers(transaction) {
                return false
            }
        }
        return inProgress.allSatisfy { $0 >= other.xmax || other.inProgress.contains($0) || covers($0) }
    }

    /// Moves the position to `snapshot` when it counts as committed every transaction
    /// this position does (a later snapshot), keeping the delivered transactions it does
    /// not cover; returns whether it moved. Text that is no snapshot is refused.
    mutating func adopt(_ snapshot: String) -> Bool {
        let later = ChangeFeedPosition(snapshot: snapshot)
        guard later.xmax > 0, later.xmax >= xmax,
            later.inProgress.allSatisfy({ $0 >= xmax || inProgress.contains($0) })
        else { return false }
        let kept = delivered.filter { !later.covers($0.value) }
        let keptOwn = ownAnnounced.filter { !later.covers($0.value) }
        self = later
        delivered = kept
        ownAnnounced = keptOwn
        return true
    }

    /// The delivered set (and the host's own announced transactions) as an `xid8[]`
    /// literal, for a read that leaves them out.
    var deliveredLiteral: String {
        Self.literal(delivered, ownAnnounced.lazy.filter { !delivered.contains($0) })
    }

    /// The host's own announced transactions as an `xid8[]` literal.
    var ownLiteral: String { Self.literal(ownAnnounced, []) }

    /// `{1,2,3}` of the ids of `first` and then `second`, written digit by digit into one
    /// buffer (a string per id, then joined, cost about 125,000 instructions for a
    /// literal of the thousand transactions a busy second delivers).
    private static func literal(_ first: Set<TransactionKey>, _ second: some Sequence<TransactionKey>) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(2 + 12 * first.count)
        func append(_ key: TransactionKey) {
            let id = key.value
            if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
            if let signed = Int64(exactly: id) { appendDecimal(signed, to: &bytes) } else { bytes.append(contentsOf: String(id).utf8) }
        }
        for id in first { append(id) }
        for id in second { append(id) }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
