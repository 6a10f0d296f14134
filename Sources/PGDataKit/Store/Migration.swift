import Foundation

/// One schema change: a numbered SQL file such as `0002_add_posts.sql`.
public struct Migration: Sendable, Equatable {
    /// The number the file name starts with; migrations run in ascending order.
    public var version: Int
    /// The rest of the file name, without the number and `.sql`.
    public var name: String
    /// The SQL; it may hold several statements and runs in one transaction.
    public var sql: String

    /// Creates a migration from its parts.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// SHA-256 of the SQL text, recorded when the migration is applied so that later
    /// edits to an applied file are noticed.
    public var checksum: String { SHA256.hexDigest(of: sql.utf8) }

    /// The file name the migration was (or would be) read from, such as
    /// `0001_create_users.sql`.
    public var fileName: String {
        let digits = String(version)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits + "_\(name).sql"
    }
}

/// Where a migration stands in a database.
public struct MigrationStatus: Sendable, Equatable {
    /// The state of one migration.
    public enum State: Sendable, Equatable {
        /// Applied at the given time, with the same content as the file.
        case applied(at: Date)
        /// Not applied yet.
        case pending
        /// Applied, but the file has changed since (recorded and current checksums).
        case changed(recorded: String, current: String)
        /// Recorded as applied, but no file has this version any more.
        case missingFile
    }

    /// The migration's version.
    public var version: Int
    /// The migration's name.
    public var name: String
    /// Its state.
    public var state: State
}

/// A migration run could not go ahead or failed.
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Reason: Sendable {
        /// The folder could not be read.
        case unreadableDirectory(path: String, message: String)
        /// A `.sql` file's name does not look like `NNNN_name.sql`.
        case invalidFileName(String)
        /// Two files share a version number.
        case duplicateVersion(Int, files: [String])
        /// An applied migration's file was edited afterwards.
        case checksumMismatch(version: Int, name: String, recorded: String, current: String)
        /// A migration's SQL failed; nothing of it was applied.
        case migrationFailed(version: Int, name: String, underlying: PostgresError)
    }

    /// What went wrong.
    public var reason: Reason

    /// Names the file or version and says what to do.
    public var description: String {
        switch reason {
        case .unreadableDirectory(let path, let message):
            return "cannot read migrations folder \(path): \(message)"
        case .invalidFileName(let file):
            return "migration file \"\(file)\" is not named NNNN_name.sql (digits, underscore, "
                + "letters, digits, _ or -)"
        case .duplicateVersion(let version, let files):
            return "migration version \(version) is used by several files: \(files.joined(separator: ", "))"
        case .checksumMismatch(let version, let name, let recorded, let current):
            return "migration \(version) (\(name)) was changed after it was applied "
                + "(recorded checksum \(recorded.prefix(12))…, file now \(current.prefix(12))…); "
                + "applied migrations must not be edited: add a new migration instead"
        case .migrationFailed(let version, let name, let underlying):
            return "migration \(version) (\(name)) failed and was rolled back: \(underlying)"
        }
    }
}
