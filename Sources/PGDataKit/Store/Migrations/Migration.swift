import Foundation

/// One schema change: a numbered SQL file such as `0002_add_posts.sql`.
public struct Migration: Sendable, Equatable {
    /// The number the file name starts with; migrations run in ascending order.
    public var version: Int
    /// The rest of the file name, without the number and `.sql`.
    public var name: String
    /// The SQL; it may hold several statements and runs in one transaction.
    public var sql: String
    /// The file it was read from: the folder's path as given to `Migrator(directory:)`
    /// (relative stays relative) plus the file name; `nil` for a migration made in code.
    /// Errors name it.
    public var path: String?

    /// Creates a migration from its parts.
    public init(version: Int, name: String, sql: String, path: String? = nil) {
        self.version = version
        self.name = name
        self.sql = sql
        self.path = path
    }

    /// SHA-256 of the SQL text, recorded when the migration is applied so that later
    /// edits to an applied file are noticed.
    public var checksum: String { SHA256.hexDigest(of: sql.utf8) }

    /// The checksums of earlier texts of this file that databases may have recorded, read
    /// from lines `-- pgdatakit: replaces-checksum <SHA-256 in hex>` (as Liquibase's
    /// `validCheckSum`): a database that applied one of those texts counts the migration
    /// as applied — `migrate` records the new checksum and runs nothing — so a file may be
    /// rewritten (reformatted, regenerated) when what it creates stays the same. Any other
    /// difference is still `MigrationError.checksumMismatch`.
    ///
    /// For example, the first lines of a regenerated file:
    ///
    /// ```sql
    /// -- pgdatakit: replaces-checksum 3b1f…(64 hex digits) (why, in a few words)
    /// CREATE TABLE users (…);
    /// ```
    public var replacedChecksums: Set<String> {
        let marker = "-- pgdatakit: replaces-checksum "
        var checksums: Set<String> = []
        for line in sql.split(separator: "\n", omittingEmptySubsequences: true) where line.hasPrefix(marker) {
            // The checksum, then optionally a word on why.
            guard let word = line.dropFirst(marker.count).split(separator: " ").first else { continue }
            let value = word.lowercased()
            if value.count == 64, value.allSatisfy(\.isHexDigit) { checksums.insert(value) }
        }
        return checksums
    }

    /// Whether a database that recorded `checksum` for this migration applied this text or
    /// one it replaces.
    func accepts(recordedChecksum checksum: String) -> Bool {
        checksum == self.checksum || replacedChecksums.contains(checksum)
    }

    /// The file name the migration was (or would be) read from, such as
    /// `0001_create_users.sql`.
    public var fileName: String {
        if let path { return URL(fileURLWithPath: path).lastPathComponent }
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

// MARK: - Reading a migration's SQL

extension Migration {
    /// A statement of a migration that begins, ends or rolls back a transaction by itself.
    struct TransactionControlStatement: Equatable {
        /// The command, upper-cased: `BEGIN`, `COMMIT`, `START TRANSACTION`, …
        var command: String
        /// Where its first word starts: an index into `sql.unicodeScalars`.
        var offset: Int
    }

    /// The statements that would begin, commit or roll back a transaction: `BEGIN`,
    /// `START TRANSACTION`, `COMMIT`, `END`, `ROLLBACK`, `ABORT`, `PREPARE TRANSACTION`,
    /// in any case. Words inside string literals, comments, quoted identifiers and
    /// dollar-quoted bodies do not count, nor do words that are not the first of a
    /// statement (a column `begin_date`, `BEGIN ATOMIC … END` in `CREATE FUNCTION`), nor
    /// `SAVEPOINT`, `RELEASE` and `ROLLBACK TO`, which stay inside the transaction.
    func transactionControlStatements() -> [TransactionControlStatement] {
        SQLStatementScanner(sql).statements().compactMap { statement in
            guard let command = statement.transactionControlCommand else { return nil }
            return TransactionControlStatement(command: command, offset: statement.offset)
        }
    }

    /// The line and column of a character of `sql`, given as an index into
    /// `sql.unicodeScalars` (PostgreSQL counts error positions in such characters).
    func location(ofCharacterAt offset: Int) -> MigrationError.Location {
        var line = 1
        var column = 1
        var lineStart = sql.unicodeScalars.startIndex
        var index = sql.unicodeScalars.startIndex
        var count = 0
        while index < sql.unicodeScalars.endIndex, count < offset {
            if sql.unicodeScalars[index] == "\n" {
                line += 1
                column = 1
                lineStart = sql.unicodeScalars.index(after: index)
            } else {
                column += 1
            }
            index = sql.unicodeScalars.index(after: index)
            count += 1
        }
        let lineEnd = sql.unicodeScalars[lineStart...].firstIndex(of: "\n") ?? sql.unicodeScalars.endIndex
        var text = String(sql.unicodeScalars[lineStart..<lineEnd])
        if text.hasSuffix("\r") { text.removeLast() }
        return MigrationError.Location(file: path ?? fileName, line: line, column: column, lineText: text)
    }
}

/// Splits SQL text into statements the way `psql` does, to look at each statement's
/// first words: it knows string literals ('…', E'…'), quoted identifiers, dollar quoting,
/// nested comments, parentheses, and `BEGIN … END` bodies of `CREATE FUNCTION` /
/// `CREATE PROCEDURE` (psql's heuristic), so that semicolons inside those do not end a
/// statement.
struct SQLStatementScanner {
    /// A token at the start of a statement.
    enum Token: Equatable {
        /// An unquoted word (keyword or identifier), lower-cased.
        case word(String)
        /// A string literal or dollar-quoted text.
        case string
        /// Anything else: a quoted identifier, number, operator, parenthesis, parameter.
        case other
    }

    /// One statement: where its first token starts and its first few tokens.
    struct Statement: Equatable {
        /// An index into the text's Unicode scalars.
        var offset: Int
        /// Its first tokens (at most four).
        var leadingTokens: [Token]

        /// The transaction command this statement is, if it is one.
        var transactionControlCommand: String? {
            func word(_ index: Int) -> String? {
                guard index < leadingTokens.count, case .word(let word) = leadingTokens[index] else { return nil }
                return word
            }
            switch word(0) {
            case "begin", "commit", "end", "abort":
                return word(0)?.uppercased()
            case "start" where word(1) == "transaction":
                return "START TRANSACTION"
            case "rollback":
                // ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name stays in the transaction.
                let next = word(1) == "work" || word(1) == "transaction" ? 2 : 1
                return word(next) == "to" ? nil : "ROLLBACK"
            case "prepare" where word(1) == "transaction" && leadingTokens.count > 2
                && leadingTokens[2] == .string:
                return "PREPARE TRANSACTION"
            default:
                return nil
            }
        }
    }

    private let scalars: [Unicode.Scalar]

    init(_ sql: String) {
        scalars = Array(sql.unicodeScalars)
    }

    /// The statements, in order; empty ones (a lone `;`) are left out.
    func statements() -> [Statement] {
        var statements: [Statement] = []
        var current: Statement?
        var words: [String] = []  // the statement's first words, for CREATE FUNCTION
        var parenthesisDepth = 0
        var beginDepth = 0
        var index = 0

        func add(_ token: Token, at offset: Int) {
            if current == nil { current = Statement(offset: offset, leadingTokens: []) }
            if let count = current?.leadingTokens.count, count < 4 { current?.leadingTokens.append(token) }
        }
        func endStatement() {
            if let current { statements.append(current) }
            current = nil
            words = []
            parenthesisDepth = 0
            beginDepth = 0
        }

        while index < scalars.count {
            let scalar = scalars[index]
            let start = index
            switch scalar {
            case " ", "\t", "\n", "\r", "\u{0B}", "\u{0C}":
                index += 1
            case "-" where peek(index + 1) == "-":
                while index < scalars.count, scalars[index] != "\n" { index += 1 }
            case "/" where peek(index + 1) == "*":
                index = skipBlockComment(from: index)
            case "'":
                index = skipQuoted(from: index, quote: "'", backslashEscapes: false)
                add(.string, at: start)
            case "\"":
                index = skipQuoted(from: index, quote: "\"", backslashEscapes: false)
                add(.other, at: start)
            case "$":
                let (end, isString) = skipDollar(from: index)
                index = end
                add(isString ? .string : .other, at: start)
            case "(":
                parenthesisDepth += 1
                index += 1
                add(.other, at: start)
            case ")":
                parenthesisDepth = max(0, parenthesisDepth - 1)
                index += 1
                add(.other, at: start)
            case ";":
                index += 1
                if parenthesisDepth == 0, beginDepth == 0 { endStatement() }
            case _ where Self.isIdentifierStart(scalar):
                while index < scalars.count, Self.isIdentifierPart(scalars[index]) { index += 1 }
                let word = String(String.UnicodeScalarView(scalars[start..<index])).lowercased()
                if word == "e", peek(index) == "'" {
                    index = skipQuoted(from: index, quote: "'", backslashEscapes: true)
                    add(.string, at: start)
                    continue
                }
                add(.word(word), at: start)
                if words.count < 4 { words.append(word) }
                if parenthesisDepth == 0, Self.isCreateRoutine(words) {
                    beginDepth += Self.blockDepthChange(at: word, inBlock: beginDepth > 0)
                }
            case _ where Self.isDigit(scalar):
                index = skipNumber(from: index)
                add(.other, at: start)
            default:
                index += 1
                add(.other, at: start)
            }
        }
        endStatement()
        return statements
    }

    /// Past a `$…$` dollar-quoted string (`isString`), or past a `$n` parameter.
    private func skipDollar(from start: Int) -> (end: Int, isString: Bool) {
        if let end = skipDollarQuoted(from: start) { return (end, true) }
        var index = start + 1
        while index < scalars.count, Self.isDigit(scalars[index]) { index += 1 }
        return (index, false)
    }

    /// Past a number (digits, letters of an exponent or base, a decimal point).
    private func skipNumber(from start: Int) -> Int {
        var index = start
        while index < scalars.count, Self.isIdentifierPart(scalars[index]) || scalars[index] == "." {
            index += 1
        }
        return index
    }

    /// How a word in a routine's body changes the depth of `BEGIN … END` blocks
    /// (`CASE … END` counts inside a block).
    private static func blockDepthChange(at word: String, inBlock: Bool) -> Int {
        switch word {
        case "begin": return 1
        case "case" where inBlock: return 1
        case "end" where inBlock: return -1
        default: return 0
        }
    }

    private func peek(_ index: Int) -> Unicode.Scalar? {
        index < scalars.count ? scalars[index] : nil
    }

    /// Past a `/* … */` comment, which may nest.
    private func skipBlockComment(from start: Int) -> Int {
        var depth = 0
        var index = start
        while index < scalars.count {
            if scalars[index] == "/", peek(index + 1) == "*" {
                depth += 1
                index += 2
            } else if scalars[index] == "*", peek(index + 1) == "/" {
                depth -= 1
                index += 2
                if depth == 0 { return index }
            } else {
                index += 1
            }
        }
        return index
    }

    /// Past a quoted string or identifier starting at `start` (a doubled quote stands for
    /// one; in `E'…'` a backslash escapes the next character).
    private func skipQuoted(from start: Int, quote: Unicode.Scalar, backslashEscapes: Bool) -> Int {
        var index = start + 1
        while index < scalars.count {
            let scalar = scalars[index]
            if backslashEscapes, scalar == "\\" {
                index += 2
            } else if scalar == quote {
                if peek(index + 1) == quote {
                    index += 2
                } else {
                    return index + 1
                }
            } else {
                index += 1
            }
        }
        return index
    }

    /// Past a `$tag$ … $tag$` string starting at `start`, or `nil` when the `$` does
    /// not open one (a parameter such as `$1`).
    private func skipDollarQuoted(from start: Int) -> Int? {
        var index = start + 1
        if let first = peek(index), !Self.isIdentifierStart(first), first != "$" { return nil }
        while index < scalars.count, scalars[index] != "$" {
            guard Self.isIdentifierPart(scalars[index]) else { return nil }
            index += 1
        }
        guard index < scalars.count else { return nil }
        let delimiter = Array(scalars[start...index])
        index += 1
        while index + delimiter.count <= scalars.count {
            if scalars[index] == "$", Array(scalars[index..<(index + delimiter.count)]) == delimiter {
                return index + delimiter.count
            }
            index += 1
        }
        return scalars.count
    }

    /// Whether a statement's first words are `CREATE [OR REPLACE] FUNCTION|PROCEDURE`.
    private static func isCreateRoutine(_ words: [String]) -> Bool {
        let routines: Set<String> = ["function", "procedure"]
        guard words.first == "create", words.count > 1 else { return false }
        if routines.contains(words[1]) { return true }
        return words.count > 3 && words[1] == "or" && words[2] == "replace" && routines.contains(words[3])
    }

    private static func isDigit(_ scalar: Unicode.Scalar) -> Bool {
        ("0"..."9").contains(scalar)
    }

    private static func isIdentifierStart(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_" || scalar.value >= 0x80
    }

    private static func isIdentifierPart(_ scalar: Unicode.Scalar) -> Bool {
        isIdentifierStart(scalar) || isDigit(scalar) || scalar == "$"
    }
}
