import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The `PostgresValueError` a value's encoding throws, if any.
private func encodingError(_ value: any PostgresEncodable) -> PostgresValueError? {
    do {
        _ = try value.postgresText()
        return nil
    } catch let error as PostgresValueError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

@Suite("Values the database could not store or give back, without a server")
struct ValueLimitTests {
    /// PostgreSQL's `timestamptz` runs from 4714-11-24 BC to 294276-12-31 AD; dates
    /// outside it are refused with a typed error instead of trapping.
    @Test(arguments: [1e13, -1e13, 1e300, -1e300, 9_224_318_016_000, -210_866_803_201, Double.greatestFiniteMagnitude])
    func datesOutsidePostgresRangeThrow(_ seconds: Double) throws {
        let error = try #require(encodingError(Date(timeIntervalSince1970: seconds)))
        #expect(error.swiftType == "Date")
        #expect("\(error)".contains("outside"), "\(error)")
    }

    @Test func datesAtTheEdgesOfTheRangeEncodeAndParseBack() throws {
        let first = Date(timeIntervalSince1970: -210_866_803_200)
        #expect(try first.postgresText() == "4714-11-24 00:00:00.000000+00 BC")
        let last = Date(timeIntervalSince1970: 9_224_318_015_999)
        #expect(try last.postgresText() == "294276-12-31 23:59:59.000000+00")
        for date in [first, last, Date(timeIntervalSince1970: 0), .distantPast, .distantFuture] {
            var text = try #require(try date.postgresText())
            let decoded = try text.withUTF8 { try Date.decode(from: PostgresCell(bytes: $0)) }
            #expect(decoded == date, "\(text)")
        }
    }

    /// A `date` column can hold years a `timestamptz` cannot (up to 5874897 AD): reading
    /// one must not overflow.
    @Test func farDatesFromTheServerDoNotOverflow() throws {
        var text = "5874897-12-31"
        let date = try text.withUTF8 { try Date.decode(from: PostgresCell(bytes: $0)) }
        #expect(date.timeIntervalSince1970 > 1.8e14)
        var nonsense = "999999999999-01-01 00:00:00+00"
        #expect(throws: PostgresValueError.self) {
            try nonsense.withUTF8 { try Date.decode(from: PostgresCell(bytes: $0)) }
        }
    }

    /// `numeric` stores 39 digits, but `Decimal` reads back at most 38: refuse to write
    /// what could not be read, without showing the value.
    @Test func decimalsThatCannotBeReadBackAreRefused() throws {
        let digits = "123456789012345678901234567890123456789"
        let tooLong = try #require(Decimal(string: digits))
        let error = try #require(encodingError(tooLong))
        #expect(error.swiftType == "Decimal")
        #expect("\(error)".contains("38"), "\(error)")
        #expect(!"\(error)".contains("123456789"), "\(error)")
        let longest = try #require(Decimal(string: "12345678901234567890123456789012345678"))
        #expect(try longest.postgresText() == "12345678901234567890123456789012345678")
        #expect(try Decimal(string: "-0.0000000000000000000000000000000000001")?.postgresText() != nil)
    }

    /// JSON has no NaN or infinity: `jsonText` would write `null`, so encoding refuses.
    @Test(arguments: [Double.nan, .infinity, -.infinity])
    func nonFiniteJSONNumbersAreRefused(_ number: Double) throws {
        for value: JSONValue in [.number(number), ["a": [1, .number(number)]], [.null, ["b": .number(number)]]] {
            let error = try #require(encodingError(value))
            #expect(error.swiftType == "JSONValue")
        }
        #expect(try JSONValue.object(["a": [1, 2.5, "x"]]).postgresText() == #"{"a":[1,2.5,"x"]}"#)
    }

    /// Values read from the server can be personal data: `description` leaves them out,
    /// `debugDescription` shows them.
    @Test func invalidTextIsShownOnlyInTheDebugDescription() throws {
        var text = "private-value-1234"
        do {
            _ = try text.withUTF8 { try Int.decode(from: PostgresCell(bytes: $0, typeOID: 20, columnName: "age", rowIndex: 3)) }
            Issue.record("decoded")
        } catch let error as PostgresValueError {
            #expect(!error.description.contains("private-value"), "\(error.description)")
            #expect(!"\(error)".contains("private-value"))
            #expect(error.description.contains("age"))
            #expect(String(reflecting: error).contains("private-value"))
        }
    }
}
