internal import CLibPQ
import Foundation

extension Connection {
    /// Loads rows into a table with `COPY … FROM STDIN`, the fastest way to insert many
    /// rows. Values are escaped for COPY's text format; `nil` is `NULL`.
    ///
    /// For example:
    ///
    /// ```swift
    /// let loaded = try connection.copy(
    ///     into: "users", columns: ["user_id", "name"],
    ///     rows: [["u1", "Ada"], ["u2", nil]])
    /// ```
    ///
    /// - Parameters:
    ///   - table: the table name; quoted, so pass the name as it is.
    ///   - schema: the schema, if not on the search path.
    ///   - columns: the columns each row fills, in order.
    ///   - rows: the rows; each must have one value per column.
    /// - Returns: the number of rows loaded.
    /// - Throws: `PostgresError` (the COPY is rolled back as a whole), or
    ///   `PostgresValueError` when a value cannot be encoded (the COPY is aborted).
    @discardableResult
    public func copy<Rows: Sequence>(
        into table: String, schema: String? = nil, columns: [String], rows: Rows
    ) throws -> Int where Rows.Element == [(any PostgresEncodable)?] {
        try cancellable(.copy) { try sendCopy(into: table, schema: schema, columns: columns, rows: rows) }
    }

    /// `copy(into:schema:columns:rows:)` inside the cancellation scope.
    private func sendCopy<Rows: Sequence>(
        into table: String, schema: String?, columns: [String], rows: Rows
    ) throws -> Int where Rows.Element == [(any PostgresEncodable)?] {
        let name = Connection.quoteQualifiedName((schema.map { [$0] } ?? []) + [table])
        let columnList = columns.map(Connection.quoteIdentifier).joined(separator: ", ")
        let sql = "COPY \(name) (\(columnList)) FROM STDIN"
        lock.lock()
        defer { lock.unlock() }
        try sendPendingBegin()  // (COPY cannot share a round trip with it)
        let handle = try requireHandle()
        let started = try sendStatement(sql, [], reusesPlan: true)  // (inside the COPY's scope)
        guard PQresultStatus(started.handle) == PGRES_COPY_IN else {
            throw PostgresError(kind: .client, message: "COPY did not enter copy-in mode", statement: sql)
        }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 16)
        func send() throws {
            guard !buffer.isEmpty else { return }
            let sent = buffer.withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { chars in
                    PQputCopyData(handle, chars.baseAddress, Int32(chars.count))
                }
            }
            buffer.removeAll(keepingCapacity: true)
            if sent != 1 {
                throw PostgresError(
                    kind: PQstatus(handle) == CONNECTION_BAD ? .connectionLost : .client,
                    message: String(cString: PQerrorMessage(handle)), statement: sql)
            }
        }
        do {
            for (rowIndex, row) in rows.enumerated() {
                guard row.count == columns.count else {
                    throw PostgresValueError(
                        code: .unencodable, swiftType: "row", row: rowIndex,
                        reason: "row has \(row.count) values for \(columns.count) columns")
                }
                for (index, value) in row.enumerated() {
                    if index > 0 { buffer.append(UInt8(ascii: "\t")) }
                    guard let value, let text = try value.postgresText() else {
                        buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "N")])
                        continue
                    }
                    Connection.appendCopyEscaped(text, to: &buffer)
                }
                buffer.append(UInt8(ascii: "\n"))
                if buffer.count >= 1 << 16 { try send() }
            }
            try send()
        } catch {
            _ = PQputCopyEnd(handle, "aborted by the client: \(error)")
            drainResults(handle)
            throw error
        }
        guard PQputCopyEnd(handle, nil) == 1 else {
            let message = String(cString: PQerrorMessage(handle))
            drainResults(handle)
            throw PostgresError(kind: .connectionLost, message: message, statement: sql)
        }
        var firstError: Error?
        var loaded = 0
        while let result = PQgetResult(handle) {
            if PQresultStatus(result) == PGRES_COMMAND_OK {
                loaded = Int(String(cString: PQcmdTuples(result))) ?? 0
                PQclear(result)
            } else if firstError == nil {
                firstError = Connection.serverError(result, handle: handle, statement: sql)
                PQclear(result)
            } else {
                PQclear(result)
            }
        }
        if let firstError { throw firstError }
        return loaded
    }

    private func drainResults(_ handle: OpaquePointer) {
        while let result = PQgetResult(handle) { PQclear(result) }
    }

    static func appendCopyEscaped(_ text: String, to buffer: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            default: buffer.append(byte)
            }
        }
    }
}
