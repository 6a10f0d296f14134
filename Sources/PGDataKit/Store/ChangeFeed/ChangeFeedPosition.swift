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
/// A payload moves the position on too, with no read (`advance(to:)`): it carries a
/// snapshot its writer took inside its transaction, before the commit. Every transaction
/// visible in that snapshot had committed before it was taken, so its notification was
/// queued before this one's (PostgreSQL queues a transaction's notifications before its
/// commit and hands them to listeners in queue order): the listener has handled it
/// already. A snapshot is adopted only when it covers everything the position covers,
/// so nothing handed on comes back in a later read.
struct ChangeFeedPosition: Sendable, Equatable {
    /// The snapshot of the last read, as text (`xmin:xmax:xip,…`).
    private(set) var snapshot: String
    /// Transactions delivered from payloads since that read.
    private(set) var delivered: Set<UInt64> = []
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
        if delivered.contains(transaction) { return true }
        if transaction < xmin { return true }
        if transaction >= xmax { return false }
        return !inProgress.contains(transaction)
    }

    /// Moves the position to a snapshot taken inside a transaction whose notification was
    /// just handled, if it covers everything the position covers (else nothing
    /// changes); transactions it covers leave the delivered set. Text that is not a
    /// snapshot changes nothing.
    ///
    /// - Returns: whether the position moved.
    @discardableResult
    mutating func advance(to text: String) -> Bool {
        guard text != snapshot else { return false }
        let next = ChangeFeedPosition(snapshot: text)
        guard next.xmax > 0, next.xmax >= xmax, next.xmin >= xmin else { return false }
        // Whatever the new snapshot sees as running must not be covered now.
        for transaction in next.inProgress where transaction < xmax {
            guard transaction >= xmin, inProgress.contains(transaction) else { return false }
        }
        snapshot = next.snapshot
        xmin = next.xmin
        xmax = next.xmax
        inProgress = next.inProgress
        delivered = delivered.filter { $0 >= xmax || inProgress.contains($0) }
        return true
    }

    /// Notes a transaction delivered from a payload.
    mutating func noteDelivered(_ transaction: UInt64) {
        delivered.insert(transaction)
    }

    /// The delivered set as an `xid8[]` literal, for a read that leaves them out.
    var deliveredLiteral: String {
        "{" + delivered.map(String.init).joined(separator: ",") + "}"
    }
}
