import Foundation
import PGDataKit
import Testing

/// Sends a value as a parameter, casts it to `sqlType`, stores it in a column of that
/// type, and reads both back.
private func roundTrip<T: PostgresCodable>(
    _ value: T, as sqlType: String, on connection: Connection
) throws -> (selected: T, stored: T) {
    let selected = try connection.query("SELECT $1::\(sqlType)", [value])[0].decode(T.self, at: 0)
    try connection.execute("DROP TABLE IF EXISTS round_trip")
    try connection.execute("CREATE TABLE round_trip (value \(sqlType))")
    try connection.execute("INSERT INTO round_trip (value) VALUES ($1)", [value])
    let stored = try connection.query("SELECT value FROM round_trip")[0].decode(T.self, at: 0)
    return (selected, stored)
}

private func expectRoundTrip<T: PostgresCodable & Equatable>(
    _ value: T, as sqlType: String, on connection: Connection,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let (selected, stored) = try roundTrip(value, as: sqlType, on: connection)
    #expect(selected == value, sourceLocation: sourceLocation)
    #expect(stored == value, sourceLocation: sourceLocation)
    // NULL both ways through the optional.
    let null = try roundTrip(T?.none, as: sqlType, on: connection)
    #expect(null.selected == nil, sourceLocation: sourceLocation)
    #expect(null.stored == nil, sourceLocation: sourceLocation)
}

@Suite("Value round trips through a real server")
struct ValueRoundTripTests {
    static let strings = [
        "", "plain", "Ünïcødé 👩‍👩‍👧 中文 עברית", "quote ' and \" and \\ backslash", "tab\tnew\nline\r",
        "'; DROP TABLE users; --", String(repeating: "x", count: 1 << 20),
    ]

    @Test(arguments: strings)
    func string(_ value: String) throws {
        try TestDatabase.withConnection { try expectRoundTrip(value, as: "text", on: $0) }
    }

    @Test func stringWithNULIsRejectedNotTruncated() throws {
        try TestDatabase.withConnection { connection in
            #expect(throws: PostgresValueError.self) {
                try connection.execute("SELECT $1::text", ["a\u{0}b"])
            }
        }
    }

    @Test(arguments: [Int.min, -1, 0, 1, Int.max])
    func int(_ value: Int) throws {
        try TestDatabase.withConnection { try expectRoundTrip(value, as: "bigint", on: $0) }
    }

    @Test(arguments: [Int64.min, 0, Int64.max])
    func int64(_ value: Int64) throws {
        try TestDatabase.withConnection { try expectRoundTrip(value, as: "bigint", on: $0) }
    }

    @Test(arguments: [Int32.min, 0, Int32.max])
    func int32(_ value: Int32) throws {
        try TestDatabase.withConnection { try expectRoundTrip(value, as: "integer", on: $0) }
    }

    @Test(arguments: [Int16.min, 0, Int16.max])
    func int16(_ value: Int16) throws {
        try TestDatabase.withConnection { try expectRoundTrip(value, as: "smallint", on: $0) }
    }

    @Test func integerOverflowIsAnErrorNotAWrap() throws {
        try TestDatabase.withConnection { connection in
            let row = try connection.query("SELECT 40000::integer")[0]
            #expect(throws: PostgresValueError.self) { try row.decode(Int16.self, at: 0) }
        }
    }

    @Test(arguments: [
        0.0, -0.0, 1.5, -2.25, 0.1, 1e-300, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude, Double.pi,
        Double.infinity, -Double.infinity,
    ])
    func double(_ value: Double) throws {
        try TestDatabase.withConnection { try expectRoundTrip(value, as: "double precision", on: $0) }
    }

    @Test func doubleNaN() throws {
        try TestDatabase.withConnection { connection in
            let (selected, stored) = try roundTrip(Double.nan, as: "double precision", on: connection)
            #expect(selected.isNaN)
            #expect(stored.isNaN)
        }
    }

    @Test(arguments: [
        "0", "1", "-1", "0.1", "123456789012345678901234567890.12345678", "-0.000000000001",
        "99999999999999999999999999999999999999",
    ])
    func decimal(_ text: String) throws {
        let value = try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
        try TestDatabase.withConnection { connection in
            try expectRoundTrip(value, as: "numeric", on: connection)
            // The server sees exactly the digits, not a Double's approximation.
            let echoed = try connection.query("SELECT ($1::numeric)::text", [value])[0].decode(String.self, at: 0)
            #expect(echoed == value.description)
        }
    }

    @Test func decimalTooPreciseIsAnErrorNotARounding() throws {
        try TestDatabase.withConnection { connection in
            let row = try connection.query("SELECT '1.000000000000000000000000000000000000000000001'::numeric")[0]
            #expect(throws: PostgresValueError.self) { try row.decode(Decimal.self, at: 0) }
        }
    }

    @Test(arguments: [true, false])
    func bool(_ value: Bool) throws {
        try TestDatabase.withConnection { try expectRoundTrip(value, as: "boolean", on: $0) }
    }

    @Test(arguments: ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham", "America/Los_Angeles"])
    func dateIsTheSameInstantInEverySessionTimeZone(_ zone: String) throws {
        try TestDatabase.withConnection { connection in
            try connection.execute("SET TimeZone TO '\(zone)'")
            let microseconds: [Int64] = [
                0, 1_700_000_000_123_456, -1_234_567_890_123_457, 2_524_608_000_000_001, 951_782_400_000_001,
            ]
            for micros in microseconds {
                let date = Date(timeIntervalSince1970: Double(micros) / 1_000_000)
                try expectRoundTrip(date, as: "timestamptz", on: connection)
                let epoch = try connection.query(
                    "SELECT (extract(epoch FROM $1::timestamptz) * 1000000)::bigint", [date]
                )[0].decode(Int64.self, at: 0)
                #expect(epoch == micros)
            }
        }
    }

    @Test func dateKeepsMicrosecondsAndRoundsBelow() throws {
        try TestDatabase.withConnection { connection in
            let date = Date(timeIntervalSince1970: 1_700_000_000.1234567)
            let back = try connection.query("SELECT $1::timestamptz", [date])[0].decode(Date.self, at: 0)
            #expect(abs(back.timeIntervalSince1970 - 1_700_000_000.123457) < 1e-7)
        }
    }

    @Test func dateBeforeTheCommonEra() throws {
        try TestDatabase.withConnection { connection in
            let text = try connection.query("SELECT '0044-03-15 12:00:00+00 BC'::timestamptz")[0]
            let date = try text.decode(Date.self, at: 0)
            let back = try connection.query("SELECT $1::timestamptz = '0044-03-15 12:00:00+00 BC'", [date])[0]
            #expect(try back.decode(Bool.self, at: 0))
        }
    }

    @Test func uuid() throws {
        try TestDatabase.withConnection { try expectRoundTrip(UUID(), as: "uuid", on: $0) }
    }

    @Test(arguments: [Data(), Data([0]), Data((0...255).map(UInt8.init)), Data(repeating: 0xAB, count: 1 << 20)])
    func bytea(_ value: Data) throws {
        try TestDatabase.withConnection { try expectRoundTrip(value, as: "bytea", on: $0) }
    }

    @Test(arguments: [
        JSONValue.null, true, 42, -1.5, "text with \"quotes\" and ünicode",
        ["nested": ["list": [1, 2, nil, "x"], "flag": false], "empty": [:]],
    ])
    func json(_ value: JSONValue) throws {
        try TestDatabase.withConnection { connection in
            try expectRoundTrip(value, as: "jsonb", on: connection)
            try expectRoundTrip(value, as: "json", on: connection)
        }
    }

    @Test func arraysForAnyParameters() throws {
        try TestDatabase.withConnection { connection in
            try connection.execute("CREATE TABLE items (id bigint, name text, key uuid)")
            let keys = (0..<5).map { _ in UUID() }
            for index in 0..<5 {
                try connection.execute(
                    "INSERT INTO items VALUES ($1, $2, $3)", [index, "name \"\(index)\", {x}", keys[index]])
            }
            let byID = try connection.query("SELECT count(*) FROM items WHERE id = ANY($1)", [[1, 3, 99]])
            #expect(try byID[0].decode(Int.self, at: 0) == 2)
            let byName = try connection.query(
                "SELECT id FROM items WHERE name = ANY($1) ORDER BY id", [["name \"4\", {x}", "name \"0\", {x}"]])
            #expect(try byName.map { try $0.decode(Int.self, at: 0) } == [0, 4])
            let byKey = try connection.query("SELECT count(*) FROM items WHERE key = ANY($1)", [Array(keys[1...2])])
            #expect(try byKey[0].decode(Int.self, at: 0) == 2)
            // 70,000 values in one parameter: past the 65,535-parameter limit of IN ($1, …).
            let many = try connection.query("SELECT count(*) FROM items WHERE id = ANY($1)", [Array(0..<70_000)])
            #expect(try many[0].decode(Int.self, at: 0) == 5)
        }
    }

    @Test func arraysRoundTripWithNulls() throws {
        try TestDatabase.withConnection { connection in
            let strings: [String?] = ["a", nil, "", "NULL", "with \"quote\" and \\ and , {}"]
            let back = try connection.query("SELECT $1::text[]", [strings])[0].decode([String?].self, at: 0)
            #expect(back == strings)
            let numbers = try connection.query("SELECT $1::bigint[]", [[Int.min, 0, Int.max]])[0]
            #expect(try numbers.decode([Int].self, at: 0) == [Int.min, 0, Int.max])
            let dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_700_000_000.5)]
            let dateBack = try connection.query("SELECT $1::timestamptz[]", [dates])[0].decode([Date].self, at: 0)
            #expect(dateBack == dates)
            let blobs = [Data([1, 2]), Data()]
            #expect(try connection.query("SELECT $1::bytea[]", [blobs])[0].decode([Data].self, at: 0) == blobs)
            let empty = try connection.query("SELECT '{}'::int[]")[0].decode([Int].self, at: 0)
            #expect(empty.isEmpty)
        }
    }

    @Test func nullIntoNonOptionalIsANamedError() throws {
        try TestDatabase.withConnection { connection in
            let row = try connection.query("SELECT NULL::text AS nickname")[0]
            do {
                _ = try row.decode(String.self, named: "nickname")
                Issue.record("expected an error")
            } catch let error as PostgresValueError {
                #expect(error.code == .unexpectedNull)
                #expect(error.column == "nickname")
                #expect(error.description.contains("nickname"))
            }
            #expect(throws: PostgresValueError.self) { try row.decode(String.self, named: "missing") }
        }
    }
}
