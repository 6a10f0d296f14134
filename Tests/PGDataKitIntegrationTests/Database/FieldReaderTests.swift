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

    @Test func rowsOfArraysReadAsTheRowsWouldHave() throws {
        // The same rows answered a row per row and as one row of arrays (`array_agg`):
        // every field alike, `NULL` apart from the empty string, escaped text unescaped.
        try TestDatabase.withConnection { connection in
            let rows = """
                (VALUES (1::bigint, 'a'::text, NULL::text, ''::text, true, '{"k": "v \\" w"}'::jsonb, '\\x00ff'::bytea),
                        (22, NULL, 'x', $1, false, NULL, NULL),
                        (-333, '日本 "q" \\ b', ',{}', 'NULL', NULL, '[]', '\\x')) AS t(k, a, b, c, d, e, f)
                """
            let long = String(repeating: "ü", count: 300) + "\\\""
            let plain = try connection.query("SELECT * FROM \(rows) ORDER BY k DESC", [long])
            let arrays = try connection.query(
                "SELECT array_agg(k), array_agg(a), array_agg(b), array_agg(c), array_agg(d), array_agg(e), array_agg(f) "
                    + "FROM (SELECT * FROM \(rows) ORDER BY k DESC) AS t", [long])
            func bytes(_ field: UnsafeBufferPointer<UInt8>?) -> [UInt8]? { field.map(Array.init) }
            var expected: [[[UInt8]?]] = []
            for row in 0..<plain.count {
                expected.append((0..<plain.columnCount).map { bytes(plain.fieldBytes(row: row, column: $0)) })
            }
            let read = try arrays.withAggregatedFieldReader { reader, count in
                try (0..<count).map { _ in
                    try reader.advance()
                    return (0..<arrays.columnCount).map { bytes(reader.bytes($0)) }
                }
            }
            #expect(read.count == 3)
            for (row, fields) in read.enumerated() {
                #expect(fields == expected[row], "row \(row)")
            }

            // No rows: `NULL` arrays, no rows to read.
            let none = try connection.query("SELECT array_agg(x), array_agg(x::text) FROM generate_series(1, 0) AS x")
            #expect(try none.withAggregatedFieldReader { _, count in count } == 0)
            // Arrays of different lengths, text that is no array, more than one row: errors.
            let uneven = try connection.query("SELECT '{1,2}'::bigint[], '{a}'::text[]")
            #expect(throws: PostgresValueError.self) {
                try uneven.withAggregatedFieldReader { reader, count in
                    for _ in 0..<count { try reader.advance() }
                }
            }
            let notArrays = try connection.query("SELECT 'twelve'::text")
            #expect(throws: PostgresValueError.self) { try notArrays.withAggregatedFieldReader { _, count in count } }
            let twoRows = try connection.query("SELECT '{1}'::bigint[] FROM generate_series(1, 2)")
            #expect(throws: PostgresValueError.self) { try twoRows.withAggregatedFieldReader { _, count in count } }
            // A key that is no integer names its column.
            let words = try connection.query("SELECT array_agg(x) AS id FROM (VALUES ('twelve')) AS t(x)")
            try words.withAggregatedFieldReader { reader, _ in
                try reader.advance()
                #expect(reader.cell(0).columnName == "id" && reader.cell(0).rowIndex == 0)
                #expect(throws: PostgresValueError.self) { try ManagedObjectContext.decodeInteger(words, reader, column: 0) }
            }
        }
    }
}
