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
///
/// For example:
///
/// ```swift
/// do {
///     try context.save()
/// } catch MergeConflictError.Code.mergeConflict {
///     context.mergePolicy = .mergeByPropertyStoreTrump   // or roll back
///     try context.save()
/// }
/// ```
public struct MergeConflictError: Error, Sendable, DescribedError {
    /// What went wrong, broadly: `mergeConflict`.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch MergeConflictError.Code.mergeConflict { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case mergeConflict
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// Rows changed or deleted in the store since this context read them;
        /// `conflicts` lists each.
        public static let mergeConflict = Code(.mergeConflict)

        /// The code's name, such as `mergeConflict`.
        public var description: String { base.rawValue }
    }

    /// Every conflicting object.
    public let conflicts: [MergeConflict]

    /// What went wrong, broadly: `mergeConflict`.
    public var code: Code { .mergeConflict }

    /// One line per conflict: objects, versions and changed keys, no values.
    public var message: String {
        "save failed with \(conflicts.count) merge conflict(s):\n"
            + conflicts.map { "- \($0)" }.joined(separator: "\n")
    }

    /// One line per conflict, with the values (ours, as read, and in the store).
    package var debugMessage: String {
        "save failed with \(conflicts.count) merge conflict(s):\n"
            + conflicts.map { "- \($0.debugDescription)" }.joined(separator: "\n")
    }

    /// None: `debugMessage` shows each conflict whole.
    package var contextFields: [ErrorContextField?] { [] }
}
