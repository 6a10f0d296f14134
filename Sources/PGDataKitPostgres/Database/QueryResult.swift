internal import CLibPQ
import Foundation

/// The rows and command status of one statement.
///
/// A `QueryResult` is a random-access collection of `Row`s; it owns libpq's result and
/// frees it when the last reference goes. It is immutable and can cross threads.
///
/// For example:
///
/// ```swift
/// let result = try connection.query("SELECT id, name FROM users ORDER BY id")
/// for row in result {
///     let id = try row.decode(Int.self, at: 0)
///     let name: String? = try row.decode(named: "name")
/// }
/// ```
public final class QueryResult: RandomAccessCollection, @unchecked Sendable {
    // Safe to share: libpq's result object is read-only after creation, and its accessors
    // do not touch the connection.
    let handle: OpaquePointer
    /// The column names, in order.
    public let columns: [String]
    /// The number of columns.
    public let columnCount: Int
    /// The number of rows.
    public let count: Int

    init(handle: OpaquePointer) {
        // (No index of the names by name: a save's results are never asked by name, and
        // building one for every result was a twelfth of a one-row save's client
        // instructions. `columnIndex(named:)` looks through the few names instead.)
        self.handle = handle
        let columnCount = Int(PQnfields(handle))
        self.columnCount = columnCount
        // (A name of up to 15 ASCII bytes written inline, as a short cell's text is:
        // `String(cString:)` validated every name of every result.)
        self.columns = (0..<columnCount).map { index in
            PQfname(handle, Int32(index)).map { name in
                name.withMemoryRebound(to: UInt8.self, capacity: 1) { bytes in
                    SmallText.decoded(UnsafeBufferPointer(start: bytes, count: strlen(name)))
                }
            } ?? "?column?"
        }
        self.count = Int(PQntuples(handle))
    }

    deinit { PQclear(handle) }

    /// The first row index (always 0).
    public var startIndex: Int { 0 }
    /// One past the last row index.
    public var endIndex: Int { count }
    /// The row at an index.
    public subscript(position: Int) -> Row { Row(result: self, index: position) }

    /// The command tag, such as `INSERT 0 3` or `SELECT 12`.
    public var commandTag: String { String(cString: PQcmdStatus(handle)) }

    /// The number of rows the command inserted, updated, deleted, copied or selected.
    public var affectedRows: Int { Int(String(cString: PQcmdTuples(handle))) ?? 0 }

    /// The index of a column by name, or `nil` if the result has no such column.
    public func columnIndex(named name: String) -> Int? { columns.firstIndex(of: name) }

    /// The type OID of a column.
    public func typeOID(ofColumn column: Int) -> UInt32 { PQftype(handle, Int32(column)) }

    /// The bytes of a field without the column's name and type, for hot loops that
    /// redo a failed decode with `cell(row:column:)` to get a descriptive error.
    @inline(__always)
    package func bareCell(row: Int, column: Int) -> PostgresCell {
        guard PQgetisnull(handle, Int32(row), Int32(column)) == 0,
            let pointer = UnsafeRawPointer(PQgetvalue(handle, Int32(row), Int32(column)))
        else { return PostgresCell(bytes: nil) }
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        return PostgresCell(bytes: UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: UInt8.self), count: length))
    }

    /// A field's bytes, `nil` for `NULL`: `bareCell(row:column:)`'s bytes without the
    /// cell around them, for the object graph's per-field loops in the other module (a
    /// call that returns two words; the `NULL` check only for empty fields).
    package func fieldBytes(row: Int, column: Int) -> UnsafeBufferPointer<UInt8>? {
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        if length == 0 && PQgetisnull(handle, Int32(row), Int32(column)) != 0 { return nil }
        guard let pointer = UnsafeRawPointer(PQgetvalue(handle, Int32(row), Int32(column))) else { return nil }
        return UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: UInt8.self), count: length)
    }

    func cell(row: Int, column: Int) -> PostgresCell {
        let isNull = PQgetisnull(handle, Int32(row), Int32(column)) == 1
        let bytes: UnsafeBufferPointer<UInt8>?
        if isNull {
            bytes = nil
        } else {
            let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
            let pointer = UnsafeRawPointer(PQgetvalue(handle, Int32(row), Int32(column)))
            bytes = pointer.map {
                UnsafeBufferPointer(start: $0.assumingMemoryBound(to: UInt8.self), count: length)
            }
        }
        return PostgresCell(
            bytes: bytes, typeOID: PQftype(handle, Int32(column)), columnName: columns[column],
            rowIndex: row)
    }
}

/// One row of a `QueryResult`; it keeps the result alive.
public struct Row: Sendable {
    /// The result the row belongs to.
    public let result: QueryResult
    /// The row's index in the result.
    public let index: Int

    /// Reads the column at `column` (0-based) as `T`.
    ///
    /// - Throws: `PostgresValueError` when the column does not exist, is `NULL` and `T`
    ///   is not optional, or holds text `T` cannot read.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at column: Int) throws -> T {
        guard column >= 0, column < result.columnCount else {
            throw PostgresValueError(
                code: .noSuchColumn, swiftType: String(describing: T.self),
                column: "#\(column)", row: index)
        }
        return try T.decode(from: result.cell(row: index, column: column))
    }

    /// Reads the column named `column` as `T`.
    ///
    /// - Throws: `PostgresValueError` as `decode(_:at:)`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, named column: String) throws -> T {
        guard let position = result.columnIndex(named: column) else {
            throw PostgresValueError(
                code: .noSuchColumn, swiftType: String(describing: T.self), column: column,
                row: index)
        }
        return try T.decode(from: result.cell(row: index, column: position))
    }

    /// Whether the column at `column` is `NULL`.
    public func isNull(at column: Int) -> Bool {
        PQgetisnull(result.handle, Int32(index), Int32(column)) == 1
    }

    /// Hands the raw cell to `body`, for decoders that work on bytes; the bytes are valid
    /// only inside `body`.
    public func withCell<R>(at column: Int, _ body: (PostgresCell) throws -> R) rethrows -> R {
        try body(result.cell(row: index, column: column))
    }
}

/// Fast reads for hot loops over large results (a save reads back a key per row): the
/// field's text is parsed in place, without building a descriptive `PostgresCell`; when
/// that fails, the generic `decode` runs, so the error still names the column.
extension Row {
    /// An integer column as `Int64`.
    ///
    /// - Throws: `PostgresValueError` (NULL, not an integer, out of range, no such column).
    @inline(__always)
    package func int64(at column: Int) throws -> Int64 {
        if let bytes = result.bareCell(row: index, column: column).bytes, let value = Self.decimal(bytes) { return value }
        return try decode(Int64.self, at: column)
    }

    /// A column's text as a `String`.
    ///
    /// - Throws: `PostgresValueError` (NULL, no such column).
    @inline(__always)
    package func string(at column: Int) throws -> String {
        if let bytes = result.bareCell(row: index, column: column).bytes { return SmallText.decoded(bytes) }
        return try decode(String.self, at: column)
    }

    /// A column's text, in place (valid during `body` only).
    ///
    /// - Throws: `PostgresValueError` (NULL, no such column), or what `body` throws.
    @inline(__always)
    package func withBytes<R>(at column: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) throws -> R {
        if let bytes = result.bareCell(row: index, column: column).bytes { return try body(bytes) }
        var text = try decode(String.self, at: column)
        return try text.withUTF8 { try body($0) }
    }

    /// A `boolean` column.
    ///
    /// - Throws: `PostgresValueError` (NULL, not a boolean, no such column).
    @inline(__always)
    package func bool(at column: Int) throws -> Bool {
        if let bytes = result.bareCell(row: index, column: column).bytes, bytes.count == 1 {
            if bytes[0] == UInt8(ascii: "t") { return true }
            if bytes[0] == UInt8(ascii: "f") { return false }
        }
        return try decode(Bool.self, at: column)
    }

    /// A decimal integer in PostgreSQL's text form, or `nil` (empty, stray characters,
    /// overflow).
    /// (Inlinable: the object graph's fetch reads keys and versions with it, per row.)
    @inlinable
    package static func decimal(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard !bytes.isEmpty else { return nil }
        let negative = bytes[0] == UInt8(ascii: "-")
        var index = negative ? 1 : 0
        guard index < bytes.count else { return nil }
        if bytes.count - index <= 18 {
            // Eighteen digits cannot overflow: no checked arithmetic per digit (keys,
            // versions and counts, the cells read most).
            var magnitude: Int64 = 0
            while index < bytes.count {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit <= 9 else { return nil }
                magnitude = magnitude &* 10 &+ Int64(digit)
                index += 1
            }
            return negative ? 0 &- magnitude : magnitude
        }
        var value: Int64 = 0
        while index < bytes.count {
            let digit = Int64(bytes[index]) &- 48
            guard digit >= 0 && digit <= 9 else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            guard !overflow1 && !overflow2 else { return nil }
            value = next
            index += 1
        }
        return value
    }
}
