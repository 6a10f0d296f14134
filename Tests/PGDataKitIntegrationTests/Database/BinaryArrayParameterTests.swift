import Foundation
import Testing

@testable import PGDataKitPostgres

/// A `text[]` built in binary from `strings` (`nil` for `NULL`).
private func textArray(_ strings: [String?]) throws -> BinaryArray<String> {
    var array = BinaryArrayBuilder(element: .text, capacity: strings.count)
    for string in strings {
        if let string { try array.append(string) } else { array.appendNull() }
    }
    return BinaryArray(bytes: array.finish())
}

/// A `bigint[]` built in binary from `integers` (`nil` for `NULL`).
private func bigintArray(_ integers: [Int64?]) -> BinaryArray<Int64> {
    var array = BinaryArrayBuilder(element: .int8, capacity: integers.count)
    for integer in integers {
        if let integer { array.append(integer) } else { array.appendNull() }
    }
    return BinaryArray(bytes: array.finish())
}

/// Array parameters in PostgreSQL's binary format: what the server reads of them, through
/// every way a statement is sent (unnamed, prepared by name, pipelined), and what stays
/// text.
@Suite("Binary array parameters")
struct BinaryArrayParameterTests {
    static let strings: [String?] = [
        "", "a", nil, "quote \" and \\ backslash, comma", "{braces}", "NULL", "Ünïcødé 👩‍👩‍👧 中文",
        "fifteen bytes!!", "sixteen bytes!!!", "seventeen bytes!!", String(repeating: "x", count: 1 << 16), " ",
    ]

    @Test func stringsArriveAsSent() throws {
        try TestDatabase.withConnection { connection in
            let array = try textArray(Self.strings)
            let row = try connection.query(
                "SELECT $1::text[], cardinality($1::text[]), array_position($1::text[], NULL), pg_typeof($1)::text", [array])[0]
            #expect(try row.decode([String?].self, at: 0) == Self.strings)
            #expect(try row.decode(Int.self, at: 1) == Self.strings.count)
            #expect(try row.decode(Int?.self, at: 2) == 3)
            #expect(try row.decode(String.self, at: 3) == "text[]")
            // Element by element on the server: lengths in code points, not bytes.
            let lengths = try connection.query(
                "SELECT length(s) FROM unnest($1::text[]) WITH ORDINALITY AS u(s, n) ORDER BY n", [array]
            ).map { try $0.decode(Int?.self, at: 0) }
            #expect(lengths == Self.strings.map { $0.map(\.unicodeScalars.count) })
        }
    }

    @Test func rowLocationsArriveAsSentAndFindTheirRows() throws {
        let locations = [TupleID(block: 0, offset: 1), TupleID(block: 4_294_967_295, offset: 65535), TupleID(block: 256, offset: 258)]
        var builder = BinaryArrayBuilder(element: .tid, capacity: locations.count)
        for location in locations { builder.append(block: location.block, offset: location.offset) }
        let array = BinaryArray<TupleID>(bytes: builder.finish())
        try TestDatabase.withConnection { connection in
            let row = try connection.query("SELECT $1::tid[]::text, pg_typeof($1)::text", [array])[0]
            #expect(try row.decode(String.self, at: 0) == "{\"(0,1)\",\"(4294967295,65535)\",\"(256,258)\"}")
            #expect(try row.decode(String.self, at: 1) == "tid[]")
            #expect(try array.postgresText() == row.decode(String.self, at: 0), "the description reads the same")
            // The rows at the locations a table gave, found by a TID scan.
            try connection.execute("CREATE TEMPORARY TABLE located (n integer)")
            try connection.execute("INSERT INTO located SELECT generate_series(1, 500)")
            let found = try connection.query("SELECT ctid::text FROM located WHERE n IN (3, 250, 499)").map {
                try $0.decode(String.self, at: 0)
            }
            var wanted = BinaryArrayBuilder(element: .tid, capacity: found.count)
            for text in found {
                let parts = text.dropFirst().dropLast().split(separator: ",")
                wanted.append(block: try #require(UInt32(parts[0])), offset: try #require(UInt16(parts[1])))
            }
            let rows = try connection.query(
                "SELECT n FROM located WHERE ctid = ANY(ARRAY(SELECT unnest($1::tid[]))) ORDER BY n",
                [BinaryArray<TupleID>(bytes: wanted.finish())])
            #expect(try rows.map { try $0.decode(Int.self, at: 0) } == [3, 250, 499])
        }
    }

    @Test func integersArriveAsSent() throws {
        let integers: [Int64?] = [0, 1, -1, nil, Int64.min, Int64.max, 255, 256, -256, 1 << 40]
        try TestDatabase.withConnection { connection in
            let row = try connection.query(
                "SELECT $1::bigint[], (SELECT sum(v)::text FROM unnest($1::bigint[]) AS v WHERE v BETWEEN -1000 AND 1000)",
                [bigintArray(integers)])[0]
            #expect(try row.decode([Int64?].self, at: 0) == integers)
            #expect(try row.decode(String.self, at: 1) == "255")
        }
    }

    @Test func emptyArraysHaveNoDimension() throws {
        try TestDatabase.withConnection { connection in
            let row = try connection.query(
                "SELECT cardinality($1::text[]), array_ndims($1::text[]), $1::text[] = '{}', "
                    + "cardinality($2::bigint[]), $2::bigint[] = '{}'",
                [try textArray([]), bigintArray([])])[0]
            #expect(try row.decode(Int.self, at: 0) == 0)
            #expect(try row.decode(Int?.self, at: 1) == nil)
            #expect(try row.decode(Bool.self, at: 2))
            #expect(try row.decode(Int.self, at: 3) == 0)
            #expect(try row.decode(Bool.self, at: 4))
        }
    }

    @Test func allNullArrays() throws {
        try TestDatabase.withConnection { connection in
            let row = try connection.query(
                "SELECT $1::text[], $2::bigint[]", [try textArray([nil, nil]), bigintArray([nil])])[0]
            #expect(try row.decode([String?].self, at: 0) == [nil, nil])
            #expect(try row.decode([Int64?].self, at: 1) == [nil])
        }
    }

    @Test(arguments: ["a\u{0}b", "\u{0}", "fourteen bytes\u{0}", "a longer text with a NUL \u{0} inside", "é\u{0}"])
    func stringWithNULIsRefusedAndTheArrayKept(_ text: String) throws {
        var array = BinaryArrayBuilder(element: .text, capacity: 2)
        try array.append("before")
        let error = #expect(throws: PostgresValueError.self) { try array.append(text) }
        #expect(error?.code == .containsNUL)
        try array.append("after")
        let built = BinaryArray<String>(bytes: array.finish())
        try TestDatabase.withConnection { connection in
            let read = try connection.query("SELECT $1::text[]", [built])[0].decode([String].self, at: 0)
            #expect(read == ["before", "after"])
        }
    }

    @Test func aNULAtEveryPositionOfAnInlineStringIsFound() throws {
        for length in 1...15 {
            for position in 0..<length {
                var bytes = Array(repeating: UInt8(ascii: "k"), count: length)
                bytes[position] = 0
                let text = String(decoding: bytes, as: UTF8.self)
                var array = BinaryArrayBuilder(element: .text, capacity: 1)
                let error = #expect(throws: PostgresValueError.self, "length \(length) NUL at \(position)") {
                    try array.append(text)
                }
                #expect(error?.code == .containsNUL)
                _ = array.finish()
            }
        }
    }

    /// The same statement sent unnamed (`PQexecParams`), prepared then run by name
    /// (`PQexecPrepared`), inside a transaction's opening pipeline, and as a pipeline.
    @Test func everyWayOfSendingReadsTheSameBytes() throws {
        let strings: [String?] = ["x", nil, "ÿ"]
        let integers: [Int64?] = [7, nil, -7]
        let sql = "SELECT $1::text[], $2::bigint[], $3::text"
        try TestDatabase.withConnection { connection in
            func check(_ result: QueryResult, sourceLocation: SourceLocation = #_sourceLocation) throws {
                #expect(try result[0].decode([String?].self, at: 0) == strings, sourceLocation: sourceLocation)
                #expect(try result[0].decode([Int64?].self, at: 1) == integers, sourceLocation: sourceLocation)
                #expect(try result[0].decode(String.self, at: 2) == "plain", sourceLocation: sourceLocation)
            }
            let parameters: [(any PostgresEncodable)?] = [try textArray(strings), bigintArray(integers), "plain"]
            try check(connection.execute(sql, parameters, reusesPlan: false))
            for _ in 0..<3 { try check(connection.execute(sql, parameters)) }
            try connection.begin()
            try check(connection.execute(sql, parameters))
            try connection.commit()
            let results = try connection.executePipeline([(sql, parameters), (sql, parameters)])
            for result in results { try check(result) }
        }
    }

    /// Parameters longer than the block's first room: it grows, and every parameter
    /// written before keeps its bytes.
    @Test func longParametersBesideBinaryOnes() throws {
        let long = String(repeating: "é", count: 50_000)
        let strings: [String?] = [long, nil, "z"]
        try TestDatabase.withConnection { connection in
            let row = try connection.query(
                "SELECT $1::text, $2::text[], $3::bigint[], $4::text, $5::text",
                ["a", try textArray(strings), bigintArray(Array(repeating: 9, count: 5_000)), long, nil])[0]
            #expect(try row.decode(String.self, at: 0) == "a")
            #expect(try row.decode([String?].self, at: 1) == strings)
            #expect(try row.decode([Int64].self, at: 2) == Array(repeating: 9, count: 5_000))
            #expect(try row.decode(String.self, at: 3) == long)
            #expect(try row.decode(String?.self, at: 4) == nil)
        }
    }

    @Test func publicIntegerArraysTravelInBinaryAndStringArraysAsText() throws {
        let parameters: [(any PostgresEncodable)?] = [[1, 2] as [Int], [3, nil] as [Int64?], ["a"], nil, 5]
        let (encoded, storage) = try Connection.encode(parameters)
        defer { free(storage) }
        #expect(Array(encoded.lengthsAndFormats.formats) == [1, 1, 0, 0, 0])
        #expect(encoded.types == [1016, 1016, 0, 0, 20])
        #expect(encoded.lengthsAndFormats.lengths[0] == 20 + 2 * 12)
        #expect(encoded.values[3] == nil)
        let text = try Connection.encode([["a"], 5])
        defer { free(text.storage) }
        #expect(!text.parameters.hasBinary)
        try TestDatabase.withConnection { connection in
            let row = try connection.query(
                "SELECT $1::bigint[], $2::bigint[], 2 = ANY($1), 'b'::varchar = ANY($3), "
                    + "'00000000-0000-0000-0000-000000000001'::uuid = ANY($4)",
                [[1, 2] as [Int], [3, nil] as [Int64?], ["a", "b"], ["00000000-0000-0000-0000-000000000001"]])[0]
            #expect(try row.decode([Int].self, at: 0) == [1, 2])
            #expect(try row.decode([Int64?].self, at: 1) == [3, nil])
            #expect(try row.decode(Bool.self, at: 2))
            // Untyped string arrays still take the type the statement gives them.
            #expect(try row.decode(Bool.self, at: 3))
            #expect(try row.decode(Bool.self, at: 4))
        }
    }

    @Test func textOfABinaryArrayIsItsLiteral() throws {
        #expect(try textArray(["a", nil, "b\"c", "d\\e", ""]).postgresText() == #"{"a",NULL,"b\"c","d\\e",""}"#)
        #expect(try textArray([]).postgresText() == "{}")
        #expect(try bigintArray([1, nil, -20, Int64.min]).postgresText() == #"{"1",NULL,"-20","-9223372036854775808"}"#)
        #expect(try bigintArray([]).postgresText() == "{}")
        // And the literal reads back as the same array on the server (as COPY would send it).
        try TestDatabase.withConnection { connection in
            let literal = try #require(try textArray(Self.strings).postgresText())
            #expect(try connection.query("SELECT $1::text[]", [literal])[0].decode([String?].self, at: 0) == Self.strings)
        }
    }

    /// Statements cast the arrays to their columns' types (`$1::integer[]`); the binary
    /// element type only has to be the parameter's.
    @Test func aBinaryArrayCastsToAnotherType() throws {
        try TestDatabase.withConnection { connection in
            let row = try connection.query(
                "SELECT $1::integer[], $2::varchar[], $2::uuid[] = ARRAY['00000000-0000-0000-0000-00000000000a'::uuid]",
                [bigintArray([1, nil]), try textArray(["00000000-0000-0000-0000-00000000000a"])])[0]
            #expect(try row.decode([Int32?].self, at: 0) == [1, nil])
            #expect(try row.decode([String].self, at: 1) == ["00000000-0000-0000-0000-00000000000a"])
            #expect(try row.decode(Bool.self, at: 2))
            #expect(throws: PostgresError.self) { try connection.query("SELECT $1::integer[]", [bigintArray([1 << 40])]) }
            // The connection goes on.
            #expect(try connection.query("SELECT $1::bigint[]", [bigintArray([1])])[0].decode([Int].self, at: 0) == [1])
        }
    }
}
