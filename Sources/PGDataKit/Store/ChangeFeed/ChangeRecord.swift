import Foundation

/// One save as the change log remembers it: what it inserted, updated and deleted, and
/// who saved it. Another process's listener reads these and merges them.
///
/// For example, a program that keeps no main context can act on other processes' saves
/// directly:
///
/// ```swift
/// let token = try coordinator.observeRemoteChanges { record in
///     let users = record.changes.inserted.filter { $0.entityName == "User" }
///     print("process \(record.originProcessID) inserted \(users.count) users")
/// }
/// ```
public struct ChangeRecord: Sendable, Equatable, CustomStringConvertible {
    /// The record's id in the change log (also the payload of its notification).
    public let id: Int64
    /// The coordinator that saved (each `StoreCoordinator` has its own).
    public let origin: UUID
    /// The operating-system process id of the saving program.
    public let originProcessID: Int32
    /// The PostgreSQL backend process that wrote the save.
    public let originBackendPID: Int32
    /// When the saving transaction started (the server's clock).
    public let time: Date
    /// The objects inserted, updated (with their changed keys) and deleted.
    public let changes: ContextChanges
    /// The PostgreSQL transaction that wrote the record (`xid8`); one record per
    /// transaction.
    public let transactionID: UInt64
    /// The position right after this record in the change log's history, for records that
    /// a history read delivered (`StoreCoordinator.history(after:)`, `HistoryReader`):
    /// keep it, acknowledge it, and a restarted process goes on after this record.
    /// `nil` for the records of `observeRemoteChanges(_:)` and `remoteChanges()`, whose
    /// listener follows its own position (it leaves out its coordinator's own saves).
    public let historyToken: HistoryToken?

    init(
        id: Int64, origin: UUID, originProcessID: Int32, originBackendPID: Int32, time: Date, changes: ContextChanges,
        transactionID: UInt64, historyToken: HistoryToken? = nil
    ) {
        self.id = id
        self.origin = origin
        self.originProcessID = originProcessID
        self.originBackendPID = originBackendPID
        self.time = time
        self.changes = changes
        self.transactionID = transactionID
        self.historyToken = historyToken
    }

    /// The same record, carrying `token`.
    func with(historyToken token: HistoryToken) -> ChangeRecord {
        ChangeRecord(
            id: id, origin: origin, originProcessID: originProcessID, originBackendPID: originBackendPID, time: time,
            changes: changes, transactionID: transactionID, historyToken: token)
    }

    /// A one-line summary: id, origin process and counts.
    public var description: String {
        "change \(id) from process \(originProcessID): \(changes.inserted.count) inserted, "
            + "\(changes.updated.count) updated, \(changes.deleted.count) deleted"
    }
}

extension ContextChanges {
    /// Adds a later change set: objects deleted later leave the inserted and updated sets;
    /// changed keys accumulate.
    mutating func formUnion(_ later: ContextChanges) {
        inserted.formUnion(later.inserted)
        updated.formUnion(later.updated)
        deleted.formUnion(later.deleted)
        for (id, keys) in later.changedKeys { changedKeys[id, default: []].formUnion(keys) }
        for (id, name) in later.entityNames { entityNames[id] = name }
        if !later.deleted.isEmpty {
            inserted.subtract(later.deleted)
            updated.subtract(later.deleted)
            for id in later.deleted { changedKeys.removeValue(forKey: id) }
        }
    }
}
