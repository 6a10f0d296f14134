import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// `FieldReader` (a fetch's rows read a row at a time) reads every field as
/// `QueryResult.fieldBytes(row:column:)` does: `NULL` apart from the empty string, text of
/// any length and script, in any order of rows.
@Suite("Reading a result a row at a time")
struct FieldReaderTests {
    @Test func everyFieldReadsAsFieldBytesDoes() throws {
        try TestDatabase.withConnection { connection in
            let long = String(repeating: "ü", count: 300)
            let result = try connection.query(
                """
                SELECT * FROM (VALUES
                    (1::bigint, 'a'::text, NULL::text, ''::text),
                    (22, NULL, 'x', $1),
                    (-333, '日本', '', NULL)
                ) AS t(k, a, b, c)
                """, [long])
            func bytes(_ field: UnsafeBufferPointer<UInt8>?) -> [UInt8]? { field.map(Array.init) }
            var expected: [[[UInt8]?]] = []
            for row in 0..<result.count {
                expected.append((0..<result.columnCount).map { bytes(result.fieldBytes(row: row, column: $0)) })
            }
            #expect(expected[0][2] == nil && expected[0][3] == [], "NULL is not the empty string")
            #expect(expected[1][3] == Array(long.utf8))
            // In row order, then backwards: a load replaces every field of the row before.
            for order in [Array(0..<result.count), Array((0..<result.count).reversed())] {
                try result.withFieldReader { (reader) throws in
                    for row in order {
                        reader.load(row: row)
                        #expect(reader.row == row)
                        let read = (0..<result.columnCount).map { bytes(reader.bytes($0)) }
                        #expect(read == expected[row], "row \(row)")
                        #expect(try ManagedObjectContext.decodeInteger(result, reader, column: 0) == [1, 22, -333][row])
                    }
                }
            }
        }
    }

    @Test func aKeyThatIsNoIntegerNamesItsColumn() throws {
        try TestDatabase.withConnection { connection in
            let result = try connection.query("SELECT 'twelve'::text AS id, NULL::bigint AS version")
            try result.withFieldReader { (reader) throws in
                reader.load(row: 0)
                #expect(throws: PostgresValueError.self) { try ManagedObjectContext.decodeInteger(result, reader, column: 0) }
                #expect(throws: PostgresValueError.self) { try ManagedObjectContext.decodeInteger(result, reader, column: 1) }
            }
        }
    }

    @Test func aResultWithoutRowsOrColumnsReadsNothing() throws {
        try TestDatabase.withConnection { connection in
            let empty = try connection.query("SELECT 1 AS one WHERE false")
            let visited = empty.withFieldReader { reader in reader.row }
            #expect(visited == -1 && empty.count == 0)
            let noColumns = try connection.query("SELECT FROM (VALUES (1), (2)) AS t(x)")
            noColumns.withFieldReader { reader in
                reader.load(row: 1)
                #expect(reader.row == 1 && reader.values.isEmpty)
            }
        }
    }
}
