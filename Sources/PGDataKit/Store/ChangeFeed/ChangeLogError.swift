/// The change log is missing, unreadable or not usable by this role.
///
/// For example, on a database where `pgdatakit migrate` never ran:
///
/// ```swift
/// do {
///     coordinator = try StoreCoordinator(model: model, configuration: configuration)
/// } catch let error as ChangeLogError where error.code == .notInstalled {
///     print(error.table ?? "")   // pgdatakit_changes: run `pgdatakit migrate` first
/// }
/// ```
public struct ChangeLogError: Error, Sendable, Equatable, DescribedError {
    /// What went wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch ChangeLogError.Code.unreadableRecord { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case unreadableRecord, notInstalled, missingPrivilege
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The record `recordID`'s `changes` column is not in the format this version
        /// writes; `reason` says why.
        public static let unreadableRecord = Code(.unreadableRecord)
        /// The change-log table `table` does not exist: run `pgdatakit migrate` (or
        /// `Migrator.migrate(on:)`, or the SQL of `Migrator.librarySchemaSQL`) with a role
        /// that may create tables.
        public static let notInstalled = Code(.notInstalled)
        /// The role lacks the grants in `privileges`.
        public static let missingPrivilege = Code(.missingPrivilege)

        /// The code's name, such as `notInstalled`.
        public var description: String { base.rawValue }
    }

    /// What went wrong, broadly.
    public let code: Code
    /// What went wrong and what to do.
    public let message: String
    /// The id of the unreadable change record (`unreadableRecord`).
    public private(set) var recordID: Int64?
    /// Why the record could not be read (`unreadableRecord`).
    public private(set) var reason: String?
    /// The missing table (`notInstalled`).
    public private(set) var table: String?
    /// The grants the role lacks, each as `PRIVILEGE on object` (`missingPrivilege`).
    public private(set) var privileges: [String] = []

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var contextFields: [ErrorContextField?] {
        [.name("recordID", recordID), .name("reason", reason), .name("table", table), .names("privileges", privileges)]
    }

    /// The record's `changes` column is not in the format this version writes.
    public static func unreadableRecord(id: Int64, reason: String) -> ChangeLogError {
        var error = ChangeLogError(
            .unreadableRecord, "change record \(id) in \(ChangeLog.table) could not be read: \(reason)")
        (error.recordID, error.reason) = (id, reason)
        return error
    }

    /// The change-log table does not exist.
    public static func notInstalled(table: String) -> ChangeLogError {
        var error = ChangeLogError(
            .notInstalled,
            "the change log \(table) does not exist: run `pgdatakit migrate` (or Migrator.migrate(on:)) "
                + "with a role that may create tables")
        error.table = table
        return error
    }

    /// The role lacks these grants, each as `PRIVILEGE on object`.
    public static func missingPrivilege(_ privileges: [String]) -> ChangeLogError {
        var error = ChangeLogError(
            .missingPrivilege, "the role may not use the change log; grant " + privileges.joined(separator: ", "))
        error.privileges = privileges
        return error
    }
}
