/// A context's pinned snapshot (`ManagedObjectContext.pinSnapshot()`): the one owner of
/// its transaction's connection and of the changes merges left for the unpin.
///
/// The main context's pin is a `REPEATABLE READ READ ONLY` transaction of its own, on a
/// pooled connection it holds until the unpin; a private context's pin is its own
/// transaction (the one open when it pinned, by serial), which it holds anyway.
struct SnapshotPin {
    /// The main context's pinned transaction; `nil` for a private context's pin (its
    /// transaction is the context's) and once the pin is lost.
    private(set) var connection: Connection?
    /// The serial of the private context's pinned transaction (`0` for the main context).
    let transactionSerial: UInt16
    /// The snapshot as PostgreSQL writes it (`xmin:xmax:xip,…`).
    let snapshot: String
    /// The changes merges brought while pinned, merged as one at the unpin.
    private(set) var deferred: ContextChanges?
    /// Whether the pinned transaction ended before the unpin.
    private(set) var isLost = false

    /// The main context's pin on its own transaction.
    init(connection: Connection, snapshot: String) {
        self.connection = connection
        self.transactionSerial = 0
        self.snapshot = snapshot
    }

    /// A private context's pin on its transaction with this serial.
    init(transactionSerial: UInt16, snapshot: String) {
        self.connection = nil
        self.transactionSerial = transactionSerial
        self.snapshot = snapshot
    }

    /// Keeps a merge's changes for the unpin.
    mutating func deferMerge(_ changes: ContextChanges) {
        if deferred == nil {
            deferred = changes
        } else {
            deferred?.formUnion(changes)
        }
    }

    /// The pinned transaction ended: returns its connection (the main context's, to give
    /// back) and remembers that reads must fail until the unpin.
    mutating func lose() -> Connection? {
        isLost = true
        defer { connection = nil }
        return connection
    }
}
