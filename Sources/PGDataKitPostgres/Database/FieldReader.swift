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
    /// The row loaded last; `-1` before the first `load(row:)`.
    package private(set) var row = -1

    fileprivate init(
        values: UnsafeMutableBufferPointer<UnsafePointer<UInt8>?>, lengths: UnsafeMutableBufferPointer<Int32>,
        handle: OpaquePointer, rowCount: Int
    ) {
        self.values = values
        self.lengths = lengths
        self.handle = handle
        self.rowCount = rowCount
    }

    /// Reads row `row`'s fields.
    ///
    /// - Precondition: `row` is one of the result's rows (misuse: callers loop over
    ///   `0..<result.count`).
    package mutating func load(row: Int) {
        precondition(row >= 0 && row < rowCount, "row \(row) of a result of \(rowCount) rows")
        self.row = row
        // (In range: the result's rows and columns are libpq's `Int32` counts.)
        pgdatakit_row_fields(
            handle, Int32(truncatingIfNeeded: row), Int32(truncatingIfNeeded: values.count), values.baseAddress,
            lengths.baseAddress)
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
}
