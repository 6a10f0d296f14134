import PGDataKitPostgres

/// What a batch write answers about the rows it wrote, as one row of arrays.
///
/// `RETURNING` answers a row per written row: libpq parses and keeps each (some 550
/// instructions a row, callgrind counted), and the library then reads each row's fields.
/// A batch of a thousand rows spent more in reading its own answer than in writing its
/// statement. The batch statements therefore wrap the write in a `WITH` and answer one
/// row holding one array per returned expression (`array_agg`, in the same row order
/// for every array), read by `ArrayLiteralReader`; the server's work is the same
/// (pgbench: 8.33 against 9.16 ms per 1,000 rows of an `UPDATE`).
extension StoreCoordinator {
    /// `statement` (an `INSERT`, `UPDATE` or `DELETE` without `RETURNING`) returning
    /// `expressions` as one row of arrays: `WITH w AS (statement RETURNING e₀ AS r0, …)
    /// SELECT array_agg(r0), … FROM w`. A write of no rows answers `NULL` arrays.
    static func returningArrays(_ statement: String, _ expressions: [String]) -> String {
        let returned = expressions.enumerated().map { "\($0.element) AS r\($0.offset)" }.joined(separator: ", ")
        let arrays = expressions.indices.map { "array_agg(w.r\($0))" }.joined(separator: ", ")
        return "WITH w AS (\(statement) RETURNING \(returned)) SELECT \(arrays) FROM w"
    }

    /// The integer array of column `column` of the one row a `returningArrays` statement
    /// answers (`[]` for `NULL`: no row written).
    ///
    /// - Throws: `PostgresValueError` naming the column when the answer is not one row
    ///   or the field not an array of integers.
    static func returnedInt64s(_ result: QueryResult, column: Int, reader: inout ArrayLiteralReader) throws -> [Int64] {
        try result[try oneAnswer(result)].withCell(at: column) { cell in
            guard let bytes = cell.bytes else { return [] }
            guard let values = reader.int64s(in: bytes) else { throw cell.invalid(for: [Int64].self) }
            return values
        }
    }

    /// The boolean array of column `column` of the one row a `returningArrays` statement
    /// answers (`[]` for `NULL`).
    ///
    /// - Throws: `PostgresValueError` as `returnedInt64s`.
    static func returnedBooleans(_ result: QueryResult, column: Int, reader: inout ArrayLiteralReader) throws -> [Bool] {
        try result[try oneAnswer(result)].withCell(at: column) { cell in
            guard let bytes = cell.bytes else { return [] }
            guard let values = reader.booleans(in: bytes) else { throw cell.invalid(for: [Bool].self) }
            return values
        }
    }

    /// The index of the one row of a `returningArrays` answer.
    private static func oneAnswer(_ result: QueryResult) throws -> Int {
        guard result.count == 1 else {
            throw PostgresValueError(
                code: .invalidText, swiftType: "[Int64]", column: nil,
                reason: "a batch write answered \(result.count) rows, not one row of arrays")
        }
        return 0
    }

    /// Reads each row's key and version of a batch `UPDATE`'s answer (`returningArrays`
    /// of the primary key and version) into `written`.
    ///
    /// - Throws: `PostgresValueError` when the arrays are not of integers or not of one
    ///   length.
    static func readWrittenVersions(_ result: QueryResult, into written: inout [Int64: Int64]) throws {
        var reader = ArrayLiteralReader()
        let keys = try returnedInt64s(result, column: 0, reader: &reader)
        let versions = try returnedInt64s(result, column: 1, reader: &reader)
        guard keys.count == versions.count else {
            throw PostgresValueError(
                code: .invalidText, swiftType: "[Int64]", column: nil,
                reason: "a batch write answered \(keys.count) keys and \(versions.count) versions")
        }
        for index in keys.indices { written[keys[index]] = versions[index] }
    }
}
