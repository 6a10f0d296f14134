/// How a save resolves conflicts: rows that another context or process changed or
/// deleted since this context read them (detected through the version column).
///
/// The names follow Core Data's merge policies.
public enum MergePolicy: Sendable, Equatable {
    /// Throw `MergeConflictError` listing every conflict; nothing is written and the
    /// context keeps its changes (Core Data's default, and ours).
    case error
    /// Property by property: where both sides changed a property, the store's value
    /// wins; this context's other changes are written.
    case mergeByPropertyStoreTrump
    /// Property by property: where both sides changed a property, this context's value
    /// wins; the store's other changes are kept.
    case mergeByPropertyObjectTrump
    /// This context's objects are written whole, replacing the store's rows.
    case overwrite
    /// This context's conflicting changes are discarded; the objects take the store's
    /// values.
    case rollback
}

/// One object whose row changed in the store since it was read.
public struct MergeConflict: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The object.
    public let objectID: ObjectID
    /// The version this context read.
    public let snapshotVersion: Int64
    /// The store's current version, or `nil` when the row was deleted.
    public let storeVersion: Int64?
    /// The values this context read (attribute name → value, `nil` for `NULL`).
    public let snapshotValues: [String: (any Sendable)?]
    /// This context's current values of the changed attributes.
    public let objectValues: [String: (any Sendable)?]
    /// The store's current values, or `nil` when the row was deleted.
    public let storeValues: [String: (any Sendable)?]?

    /// `User/42: read at version 3, store at version 4; changed: name` — the keys but not
    /// the values (values can be personal data; `debugDescription` shows them).
    public var description: String {
        guard storeValues != nil, let storeVersion else {
            return "\(objectID): read at version \(snapshotVersion), deleted in the store since"
        }
        let keys = objectValues.keys.sorted()
        return "\(objectID): read at version \(snapshotVersion), store at version \(storeVersion)"
            + (keys.isEmpty ? "" : "; changed: " + keys.joined(separator: ", "))
    }

    /// The description plus each changed key's values: ours, as read, and in the store.
    public var debugDescription: String {
        func show(_ value: (any Sendable)??) -> String {
            switch value {
            case .none: return "-"
            case .some(.none): return "nil"
            case .some(.some(let value)): return "\"\(value)\""
            }
        }
        guard let storeValues, storeVersion != nil else { return description }
        let changes = objectValues.keys.sorted().map { key in
            "\(key): ours \(show(objectValues[key])), read \(show(snapshotValues[key])), store \(show(storeValues[key]))"
        }
        return description + (changes.isEmpty ? "" : " — " + changes.joined(separator: "; "))
    }
}

/// A save found conflicts and the merge policy was `.error`; nothing was written.
public struct MergeConflictError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Every conflicting object.
    public let conflicts: [MergeConflict]

    /// One line per conflict.
    public var description: String {
        "save failed with \(conflicts.count) merge conflict(s):\n"
            + conflicts.map { "- \($0)" }.joined(separator: "\n")
    }

    /// One line per conflict, with the values.
    public var debugDescription: String {
        "save failed with \(conflicts.count) merge conflict(s):\n"
            + conflicts.map { "- \($0.debugDescription)" }.joined(separator: "\n")
    }
}
