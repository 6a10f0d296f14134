import Foundation

/// A private context's open transaction and the serials that say which of its reads a
/// row location may trust: the one owner of these. The context begins, hands over and
/// ends the transaction through it; nothing else sets the connection.
///
/// Each transaction the context begins gets a serial (1 to 65,535, then starting over);
/// one that reads at one snapshot (repeatable read or serializable) makes it the
/// `locationSerial`, which tags the row locations an import's fetch reads
/// (`RowLocation`) and is `0` whenever no such transaction is open.
struct ContextTransaction {
    /// The open transaction's connection, if any.
    private(set) var connection: Connection?
    /// The serial of the open transaction when it reads at one snapshot; `0` otherwise.
    private(set) var locationSerial: UInt16 = 0
    /// The serial of the last transaction begun (never 0 once one was).
    private(set) var lastSerial: UInt16 = 0

    /// Whether a transaction is open.
    var isOpen: Bool { connection != nil }

    /// Takes a newly begun transaction as the open one.
    ///
    /// - Returns: whether the serials started over, so every row location read before
    ///   must be forgotten (none may pass for one of the new transaction's).
    mutating func opened(_ connection: Connection, readsAtOneSnapshot: Bool) -> Bool {
        self.connection = connection
        let wrapped = lastSerial == UInt16.max
        lastSerial = wrapped ? 1 : lastSerial + 1
        locationSerial = readsAtOneSnapshot ? lastSerial : 0
        return wrapped
    }

    /// The open transaction's connection, which is no longer the context's (it was
    /// committed, rolled back or is about to be); `nil` when none is open.
    @discardableResult
    mutating func close() -> Connection? {
        defer {
            connection = nil
            locationSerial = 0
        }
        return connection
    }

    /// `close()` when `other` is the open transaction (a save that committed or rolled
    /// back the connection it was given).
    mutating func close(ifItIs other: Connection) {
        if connection === other { close() }
    }

    /// Makes the next transaction's serial the last one (for tests of the serials'
    /// wrap-around).
    mutating func setLastSerial(_ serial: UInt16) { lastSerial = serial }
}
