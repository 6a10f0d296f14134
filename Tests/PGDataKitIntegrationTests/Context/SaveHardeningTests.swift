import Foundation
import PGDataKit
import Testing

/// Saves a sample with one bad value (set by `spoil`) beside a good user, expects the
/// typed error naming `Sample.<attribute>`, an untouched database and a context that
/// still holds both changes; then mends the value (with `mend`) and saves again.
private func expectRefusedSave(
    attribute: String, hiding secret: String? = nil, spoil: (Sample) -> Void, mend: (Sample) -> Void,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    try ExampleSchema.withManager { manager in
        let context = manager.newPrivateContext()
        try context.performAndWait { () throws in
            let user = User(context: context)
            user.userID = "beside"
            let sample = Sample(context: context)
            spoil(sample)
            do {
                try context.save()
                Issue.record("the save succeeded", sourceLocation: sourceLocation)
            } catch let error as PostgresValueError {
                #expect(error.column == "Sample.\(attribute)", "\(error)", sourceLocation: sourceLocation)
                #expect("\(error)".contains("Sample.\(attribute)"), "\(error)", sourceLocation: sourceLocation)
                if let secret {
                    #expect(!"\(error)".contains(secret), "\(error)", sourceLocation: sourceLocation)
                }
            }
            #expect(context.hasChanges, sourceLocation: sourceLocation)
            #expect(context.insertedObjects.count == 2, sourceLocation: sourceLocation)
            #expect(sample.objectID.isTemporaryID, sourceLocation: sourceLocation)
            #expect(try ExampleSchema.count("SELECT count(*) FROM samples", in: manager) == 0, sourceLocation: sourceLocation)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 0, sourceLocation: sourceLocation)
            mend(sample)
            try context.save()
        }
        // What was written reads back.
        let reader = manager.newPrivateContext()
        try reader.performAndWait { () throws in
            #expect(try reader.fetchAll(Sample.self).count == 1, sourceLocation: sourceLocation)
            #expect(try reader.fetchAll(User.self).count == 1, sourceLocation: sourceLocation)
        }
    }
}

@Suite("Saves that must not write what cannot be read back")
struct SaveHardeningTests {
    @Test(arguments: [1e13, -1e13, 1e300, -1e300])
    func datesOutsidePostgresRangeAreRefusedNamingTheAttribute(_ seconds: Double) throws {
        try expectRefusedSave(
            attribute: "date", spoil: { $0.date = Date(timeIntervalSince1970: seconds) },
            mend: { $0.date = Date(timeIntervalSince1970: 0) })
        try expectRefusedSave(
            attribute: "optionalDate", spoil: { $0.optionalDate = Date(timeIntervalSince1970: seconds) },
            mend: { $0.optionalDate = nil })
    }

    /// The first and last instants PostgreSQL stores are written and read back exactly.
    @Test func datesAtTheEdgesOfTheRangeRoundTrip() throws {
        try ExampleSchema.withManager { manager in
            let edges = [Date(timeIntervalSince1970: -210_866_803_200), Date(timeIntervalSince1970: 9_224_318_015_999.5)]
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                for edge in edges {
                    let sample = Sample(context: context)
                    sample.date = edge
                }
                try context.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait { () throws in
                let dates = try reader.fetchAll(Sample.self).map(\.date).sorted()
                #expect(dates == edges)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM samples WHERE date = '294276-12-31 23:59:59.5+00'", in: manager) == 1)
            #expect(try ExampleSchema.count("SELECT count(*) FROM samples WHERE date = '4714-11-24 00:00:00+00 BC'", in: manager) == 1)
        }
    }

    /// A 39-digit decimal fits `numeric` but not `Decimal` on the way back: it used to
    /// save and then break every unfiltered fetch of the entity.
    @Test func decimalsThatCannotBeReadBackAreRefused() throws {
        let digits = "123456789012345678901234567890123456789"
        try expectRefusedSave(
            attribute: "decimal", hiding: "123456789", spoil: { $0.decimal = Decimal(string: digits) ?? 0 },
            mend: { $0.decimal = Decimal(string: String(digits.dropLast())) ?? 0 })
        try expectRefusedSave(
            attribute: "optionalDecimal", hiding: "123456789", spoil: { $0.optionalDecimal = Decimal(string: digits) },
            mend: { $0.optionalDecimal = nil })
    }

    /// A NUL inside a JSON string or key used to reach the server (22P05 for the whole
    /// statement); it is refused in the library like every other NUL, naming the
    /// attribute.
    @Test func jsonStringsWithNULAreRefused() throws {
        try expectRefusedSave(
            attribute: "json", spoil: { $0.json = ["note": "a\u{0}b"] }, mend: { $0.json = ["note": "ab"] })
        try expectRefusedSave(
            attribute: "optionalJSON", spoil: { $0.optionalJSON = [["k\u{0}": 1]] }, mend: { $0.optionalJSON = [["k": 1]] })
        #expect(throws: PostgresValueError.self) { try JSONValue.string("\u{0}").postgresText() }
    }

    /// `JSONValue.number(.nan)` used to be written as `null`.
    @Test func nonFiniteJSONNumbersAreRefused() throws {
        for number in [Double.nan, .infinity, -.infinity] {
            try expectRefusedSave(
                attribute: "json", spoil: { $0.json = ["score": .number(number)] }, mend: { $0.json = ["score": 1] })
            try expectRefusedSave(
                attribute: "optionalJSON", spoil: { $0.optionalJSON = [.number(number)] }, mend: { $0.optionalJSON = nil })
        }
    }
}
