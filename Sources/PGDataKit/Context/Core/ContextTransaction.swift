import Foundation

/// A private context's open transaction and the serials that say which of its reads a
/// row location may trust: the one owner of these. The context begins, hands over and
/// ends the transaction through it; nothing else sets the connection.
///
/// Each transaction the context begins gets two serials (odd then even, 1 to 65,534,
/// then starting over); one that reads at one snapshot (repeatable read or
/// serializable) makes them the `locationSerial`, which tags the row locations an
/// import's fetch reads (`RowLocation`), and the `lockSerial`, which tags those of the
/// rows such a fetch also locked; both are `0` whenever no such transaction is open.
///
/// It also keeps the transaction's place in the lock order of saves (see
/// `StoreCoordinator.lockRows(of:_:waiting:on:)`) once an import's fetch has locked rows: the
/// `lockFrontier`.
struct ContextTransaction {
    /// The last row an import's fetch locked in the lock order of saves: the position of
    /// its entity in the model's insert order and the greatest primary key it locked.
    struct LockFrontier: Equatable {
        let entityPosition: Int
        let primaryKey: Int64

        /// Whether a lock on row `key` of the entity at `position` comes after every row
        /// locked up to this frontier in the lock order, so that waiting for it cannot
        /// close a cycle.
        func precedes(entityPosition position: Int, primaryKey key: Int64) -> Bool {
            position > entityPosition || (position == entityPosition && key > primaryKey)
        }
    }

    /// The open transaction's connection, if any.
    private(set) var connection: Connection?
    /// The serial of the open transaction when it reads at one snapshot; `0` otherwise.
    private(set) var locationSerial: UInt16 = 0
    /// The serial that tags the locations of rows an import's fetch locked in the open
    /// transaction (`locationSerial + 1`); `0` when no transaction reads at one snapshot.
    var lockSerial: UInt16 { locationSerial == 0 ? 0 : locationSerial + 1 }
    /// The serial of the last transaction begun (odd; never 0 once one was).
    private(set) var lastSerial: UInt16 = 0
    /// The last row an import's fetch locked in the open transaction, `nil` while none
    /// did (a fetch that locks rows must be the transaction's first to lock any).
    private(set) var lockFrontier: LockFrontier?

    /// Whether a transaction is open.
    var isOpen: Bool { connection != nil }

    /// Takes a newly begun transaction as the open one.
    ///
    /// - Returns: whether the serials started over, so every row location read before
    ///   must be forgotten (none may pass for one of the new transaction's).
    mutating func opened(_ connection: Connection, readsAtOneSnapshot: Bool) -> Bool {
        self.connection = connection
        let wrapped = lastSerial >= UInt16.max - 2
        lastSerial = wrapped || lastSerial == 0 ? 1 : lastSerial + 2
        locationSerial = readsAtOneSnapshot ? lastSerial : 0
        lockFrontier = nil
        return wrapped
    }

    /// The open transaction's connection, which is no longer the context's (it was
    /// committed, rolled back or is about to be); `nil` when none is open.
    @discardableResult
    mutating func close() -> Connection? {
        defer {
            connection = nil
            locationSerial = 0
            lockFrontier = nil
        }
        return connection
    }

    /// `close()` when `other` is the open transaction (a save that committed or rolled
    /// back the connection it was given).
    mutating func close(ifItIs other: Connection) {
        if connection === other { close() }
    }

    /// Notes that an import's fetch locked rows of the entity at `entityPosition` (in the
    /// model's insert order) up to `primaryKey`.
    mutating func lockedRows(entityPosition: Int, upTo primaryKey: Int64) {
        let frontier = LockFrontier(entityPosition: entityPosition, primaryKey: primaryKey)
        if let current = lockFrontier, !current.precedes(entityPosition: entityPosition, primaryKey: primaryKey) { return }
        lockFrontier = frontier
    }

    /// Makes the next transaction's serial the last one (for tests of the serials'
    /// wrap-around).
    mutating func setLastSerial(_ serial: UInt16) { lastSerial = serial }
}
