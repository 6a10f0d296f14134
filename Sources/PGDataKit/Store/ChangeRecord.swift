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
        if !later.deleted.isEmpty {
            inserted.subtract(later.deleted)
            updated.subtract(later.deleted)
            for id in later.deleted { changedKeys.removeValue(forKey: id) }
        }
    }
}
