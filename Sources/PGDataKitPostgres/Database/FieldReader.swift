internal import CLibPQ

/// A result's rows read a row at a time, for the object graph's loops over a fetch:
/// `load(row:)` asks libpq for the row's fields in one call; the caller then reads each
/// field's text from `values` and `lengths` without calling into libpq (the object graph's
/// `FieldReader.bytes(_:)`, in its own module so that it is inlined). (`QueryResult.fieldBytes(row:column:)` per
/// field is a call into this module and two or three into libpq: 87 instructions a
/// field, callgrind counted.)
///
/// A reader exists only inside `QueryResult.withFieldReader(_:)`, which holds its
/// buffers; the bytes it hands out are the result's, valid while the caller holds the
/// result.
///
/// For example:
///
/// ```swift
/// try result.withFieldReader { reader in
///     for row in 0..<result.count {
///         reader.load(row: row)
///         let name = reader.values[2].map { String(cString: $0) }
///     }
/// }
/// ```
package struct FieldReader {
    /// Per column, the loaded row's text; `nil` for `NULL`.
    package let values: UnsafeMutableBufferPointer<UnsafePointer<UInt8>?>
    /// Per column, the loaded row's length in bytes.
    package let lengths: UnsafeMutableBufferPointer<Int32>
    /// libpq's result (held by the `QueryResult` the reader came from).
    private let handle: OpaquePointer
    /// The result's row count.
    private let rowCount: Int
    /// The row loaded last; `-1` before the first `load(row:)` or `advance()`.
    package private(set) var row = -1
    /// The columns' arrays of a one-row answer of arrays (`withAggregatedFieldReader`);
    /// `nil` for a result of a row per row.
    // Unsafe: not retained (passing the reader around would retain and release it at
    // every call): `withAggregatedFieldReader` holds it while the reader exists.
    private unowned(unsafe) let aggregated: AggregatedColumns?

    fileprivate init(
        values: UnsafeMutableBufferPointer<UnsafePointer<UInt8>?>, lengths: UnsafeMutableBufferPointer<Int32>,
        handle: OpaquePointer, rowCount: Int, aggregated: AggregatedColumns? = nil
    ) {
        self.values = values
        self.lengths = lengths
        self.handle = handle
        self.rowCount = rowCount
        self.aggregated = aggregated
    }

    /// Reads row `row`'s fields.
    ///
    /// - Precondition: `row` is one of the result's rows (misuse: callers loop over
    ///   `0..<result.count`). A reader of rows of arrays reads with `advance()` (libpq
    ///   answers `NULL` for the rows it does not have).
    package mutating func load(row: Int) {
        precondition(row >= 0 && row < rowCount, "row \(row) of a result of \(rowCount) rows")
        self.row = row
        // (In range: the result's rows and columns are libpq's `Int32` counts.)
        pgdatakit_row_fields(
            handle, Int32(truncatingIfNeeded: row), Int32(truncatingIfNeeded: values.count), values.baseAddress,
            lengths.baseAddress)
    }

    /// Reads the next row of a one-row answer of arrays (`withAggregatedFieldReader`):
    /// each column's next element.
    ///
    /// - Precondition: the reader is one of `withAggregatedFieldReader` and a row is left
    ///   (misuse: callers loop over the row count it hands out).
    /// - Throws: `PostgresValueError` naming the column whose array is malformed.
    package mutating func advance() throws {
        guard let aggregated else { preconditionFailure("a result of a row per row is read with load(row:)") }
        precondition(row + 1 < rowCount, "row \(row + 1) of \(rowCount) rows of arrays")
        row += 1
        for column in 0..<values.count {
            switch aggregated.cursors[column].next() {
            case .text(let text):
                values[column] = text.baseAddress
                lengths[column] = Int32(truncatingIfNeeded: text.count)
            case .escaped(let quoted):
                let unescaped = aggregated.unescape(quoted, column: column)
                values[column] = unescaped.baseAddress
                lengths[column] = Int32(truncatingIfNeeded: unescaped.count)
            case .null:
                values[column] = nil
                lengths[column] = 0
            case .end, .malformed:
                throw PostgresValueError(
                    code: .invalidText, swiftType: "[String]", column: String(cString: PQfname(handle, Int32(column))),
                    row: row, reason: "the column's array ends before the first column's or is not an array")
            }
        }
    }

    /// The loaded row's field `column` as a cell (its bytes, the column's name, the row),
    /// for a decoder whose error names them.
    ///
    /// - Precondition: `column` is one of the result's columns.
    package func cell(_ column: Int) -> PostgresCell {
        precondition(column >= 0 && column < values.count, "no such column in the result")
        let bytes = values[column].map { UnsafeBufferPointer(start: $0, count: Int(lengths[column])) }
        return PostgresCell(
            bytes: bytes, typeOID: aggregated == nil ? PQftype(handle, Int32(column)) : 0,
            columnName: String(cString: PQfname(handle, Int32(column))), rowIndex: row)
    }
}

/// The columns of a one-row answer of arrays, read element by element in step: a cursor
/// per column, and per column a buffer for elements that had escapes, made at the first
/// one (at most the column's text long, so an element always fits).
// Unsafe: the cursors live in a buffer of their own (an array's element would be checked
// for exclusive access and uniqueness at each step), `count` long, freed in `deinit`.
final class AggregatedColumns {
    /// Per column, the position in its array.
    let cursors: UnsafeMutablePointer<ArrayLiteralCursor>
    /// The number of columns.
    private let count: Int
    /// Per column, the buffer of unescaped elements and its capacity.
    private var buffers: [(pointer: UnsafeMutablePointer<UInt8>, capacity: Int)?]
    /// Per column, the array's text length (the capacity a buffer needs).
    private let textLengths: [Int]

    init(cursors: [ArrayLiteralCursor], textLengths: [Int]) {
        self.count = cursors.count
        self.cursors = UnsafeMutablePointer<ArrayLiteralCursor>.allocate(capacity: Swift.max(cursors.count, 1))
        self.cursors.initialize(from: cursors, count: cursors.count)
        self.textLengths = textLengths
        self.buffers = Array(repeating: nil, count: cursors.count)
    }

    // Unsafe: the buffer holds the column's last unescaped element until the next one
    // (the reader's `values` point into it for one row); it is `textLengths[column]`
    // long, which no element of that text exceeds, and freed in `deinit`.
    /// `quoted` without its escapes, in the column's buffer.
    func unescape(_ quoted: UnsafeBufferPointer<UInt8>, column: Int) -> UnsafeBufferPointer<UInt8> {
        let buffer: UnsafeMutablePointer<UInt8>
        if let existing = buffers[column] {
            buffer = existing.pointer
        } else {
            let capacity = Swift.max(textLengths[column], 1)
            buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            buffers[column] = (buffer, capacity)
        }
        var count = 0
        ArrayLiteralCursor.unescape(quoted) { byte in
            buffer[count] = byte
            count += 1
        }
        return UnsafeBufferPointer(start: buffer, count: count)
    }

    deinit {
        for buffer in buffers { buffer?.pointer.deallocate() }
        cursors.deinitialize(count: count)
        cursors.deallocate()
    }
}

extension QueryResult {
    /// Hands `body` a reader of this result's rows (`FieldReader`), valid only inside it.
    package func withFieldReader<R>(_ body: (inout FieldReader) throws -> R) rethrows -> R {
        let columns = columnCount
        return try withUnsafeTemporaryAllocation(of: UnsafePointer<UInt8>?.self, capacity: columns) { values in
            try withUnsafeTemporaryAllocation(of: Int32.self, capacity: columns) { lengths in
                values.initialize(repeating: nil)
                lengths.initialize(repeating: 0)
                var reader = FieldReader(values: values, lengths: lengths, handle: handle, rowCount: count)
                return try body(&reader)
            }
        }
    }

    /// Hands `body` a reader of the rows of a one-row answer of arrays (a column per
    /// array, all of one length: `SELECT array_agg(t.a), array_agg(t.b) FROM …`) and their
    /// count, each row read with `FieldReader.advance()`: a row per element, as if the
    /// statement had answered them as rows. A `NULL` array (no rows aggregated) is no
    /// rows.
    ///
    /// - Throws: `PostgresValueError` when the answer is not one row of arrays.
    // Unsafe: the cursors point into the result's fields, which the result holds while
    // `body` runs.
    package func withAggregatedFieldReader<R>(_ body: (inout FieldReader, Int) throws -> R) throws -> R {
        guard count == 1 else {
            throw PostgresValueError(
                code: .invalidText, swiftType: "[String]", reason: "an answer of arrays has \(count) rows, not one")
        }
        let columns = columnCount
        var cursors: [ArrayLiteralCursor] = []
        var lengths: [Int] = []
        var rows = 0
        for column in 0..<columns {
            guard let bytes = fieldBytes(row: 0, column: column) else {
                // (`array_agg` of no rows: every column `NULL`.)
                guard column == 0 else {
                    throw PostgresValueError(
                        code: .unexpectedNull, swiftType: "[String]", column: self.columns[column], row: 0,
                        reason: "NULL beside the first column's array")
                }
                break
            }
            guard let cursor = ArrayLiteralCursor(bytes) else {
                throw PostgresValueError(
                    code: .invalidText, swiftType: "[String]", column: self.columns[column], row: 0,
                    reason: "not an array literal")
            }
            if column == 0 {
                var counter = cursor
                loop: while true {
                    switch counter.next() {
                    case .text, .escaped, .null: rows += 1
                    case .end: break loop
                    case .malformed:
                        throw PostgresValueError(
                            code: .invalidText, swiftType: "[String]", column: self.columns[column], row: 0,
                            reason: "not an array literal")
                    }
                }
            }
            cursors.append(cursor)
            lengths.append(bytes.count)
        }
        if cursors.isEmpty { rows = 0 }
        let aggregated = AggregatedColumns(cursors: cursors, textLengths: lengths)
        return try withUnsafeTemporaryAllocation(of: UnsafePointer<UInt8>?.self, capacity: columns) { values in
            try withUnsafeTemporaryAllocation(of: Int32.self, capacity: columns) { lengths in
                values.initialize(repeating: nil)
                lengths.initialize(repeating: 0)
                var reader = FieldReader(
                    values: values, lengths: lengths, handle: handle, rowCount: rows, aggregated: aggregated)
                return try withExtendedLifetime(aggregated) { try body(&reader, rows) }
            }
        }
    }
}
