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
public struct MergeConflict: Sendable, CustomStringConvertible {
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

    /// `User/42: read version 3, store version 4; name: ours "A", read "B", store "C"`.
    public var description: String {
        func show(_ value: (any Sendable)??) -> String {
            switch value {
            case .none: return "-"
            case .some(.none): return "nil"
            case .some(.some(let value)): return "\"\(value)\""
            }
        }
        guard let storeValues, let storeVersion else {
            return "\(objectID): read at version \(snapshotVersion), deleted in the store since"
        }
        let keys = objectValues.keys.sorted()
        let changes = keys.map { key in
            "\(key): ours \(show(objectValues[key])), read \(show(snapshotValues[key])), store \(show(storeValues[key]))"
        }
        return "\(objectID): read at version \(snapshotVersion), store at version \(storeVersion)"
            + (changes.isEmpty ? "" : "; " + changes.joined(separator: "; "))
    }
}

/// A save found conflicts and the merge policy was `.error`; nothing was written.
public struct MergeConflictError: Error, Sendable, CustomStringConvertible {
    /// Every conflicting object.
    public let conflicts: [MergeConflict]

    /// One line per conflict.
    public var description: String {
        "save failed with \(conflicts.count) merge conflict(s):\n"
            + conflicts.map { "- \($0)" }.joined(separator: "\n")
    }
}
