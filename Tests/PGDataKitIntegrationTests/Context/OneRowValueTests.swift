import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A save of one row alone sends each value as a parameter of its own, cast to its
/// column's type (`$3::bigint`), not as an array of one element: every attribute type
/// reads back as saved, a value that cannot be sent names its attribute, and the
/// statements the server prepared subscript no array.
@Suite("One-row saves: values as parameters of their own")
struct OneRowValueTests {
    /// A manager of one pooled connection (the statements it prepared can be read back
    /// on it) over a fresh database with `specimens`.
    static func withSpecimens(_ body: (ContextManager) throws -> Void) throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.executeScript(try Model(entities: [Specimen.self]).schemaSQL())
            let manager = try ContextManager(configuration: configuration, entities: [Specimen.self], maximumConnections: 1)
            defer { manager.close() }
            try body(manager)
        }
    }

    /// The specimen `code`'s values read in a context of their own.
    static func stored(_ code: String, in manager: ContextManager) throws -> [String] {
        let reader = manager.newPrivateContext()
        return try reader.performAndWait { () throws -> [String] in
            try #require(try Specimen.fetch(in: reader, where: "code == %@", code).first).values
        }
    }

    @Test func everyTypeRoundTripsThroughAOneRowInsertAndUpdate() throws {
        try Self.withSpecimens { manager in
            let context = manager.newPrivateContext()
            // Inserted filled (the one-row insert), then every value changed (the one-row
            // update), then the optional ones cleared, each read back in a fresh context.
            let inserted = try context.performAndWait { () throws -> Specimen in
                let specimen = Specimen(context: context)
                specimen.code = "s1"
                specimen.fill()
                try context.save()
                return specimen
            }
            let afterInsert = context.performAndWait { inserted.values }
            #expect(try Self.stored("s1", in: manager) == afterInsert)

            let afterUpdate = try context.performAndWait { () throws -> [String] in
                inserted.text = "it's \"quoted\", {braced} and \\ slashed"
                inserted.int = Int.min
                inserted.int64 = Int64.max
                inserted.int16 = -1
                inserted.double = -.infinity
                inserted.float = .nan
                inserted.decimal = Decimal(string: "-0.000001") ?? 0
                inserted.flag = false
                inserted.date = Date(timeIntervalSince1970: -86_400.5)
                inserted.data = Data()
                inserted.json = .array([.string("x\ny"), .number(-2.5)])
                inserted.tags = ["", "NULL", "a b"]
                inserted.scores = []
                inserted.moments = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1)]
                try context.save()
                return inserted.values
            }
            #expect(try Self.stored("s1", in: manager) == afterUpdate)

            let cleared = try context.performAndWait { () throws -> [String] in
                inserted.optionalText = nil
                inserted.uuid = nil
                inserted.priority = nil
                inserted.address = nil
                inserted.scores = nil
                inserted.amounts = nil
                inserted.keys = nil
                try context.save()
                return inserted.values
            }
            #expect(try Self.stored("s1", in: manager) == cleared)
            #expect(cleared != afterUpdate && afterUpdate != afterInsert)

            // The pool's one connection prepared the saves' statements: none subscripts an
            // array parameter.
            let statements = try manager.coordinator.pool.withConnection { connection in
                try connection.query("SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%pgdatakit_changes%'")
                    .map { try $0.decode(String.self, at: 0) }
            }
            #expect(statements.contains { $0.hasPrefix("WITH u AS (UPDATE") })
            #expect(statements.contains { $0.hasPrefix("WITH k AS") })
            #expect(!statements.contains { $0.contains("[1]") }, "\(statements)")
        }
    }

    @Test func aStringThatCannotBeSentNamesItsAttribute() throws {
        try Self.withSpecimens { manager in
            let context = manager.newPrivateContext()
            func saveFailure() -> PostgresValueError? {
                context.performAndWait {
                    do {
                        try context.save()
                        return nil
                    } catch {
                        context.rollback()
                        return error as? PostgresValueError
                    }
                }
            }
            // A one-row insert, then a one-row update of a saved row.
            context.performAndWait {
                let specimen = Specimen(context: context)
                specimen.code = "nul"
                specimen.text = "a\u{0}b"
            }
            let insertError = saveFailure()
            #expect(insertError?.code == .containsNUL)
            #expect(insertError?.column == "Specimen.text")

            let saved = try context.performAndWait { () throws -> Specimen in
                let specimen = Specimen(context: context)
                specimen.code = "ok"
                try context.save()
                return specimen
            }
            context.performAndWait { saved.optionalText = "\u{0}" }
            let updateError = saveFailure()
            #expect(updateError?.code == .containsNUL)
            #expect(updateError?.column == "Specimen.optionalText")
            // Nothing was written: the stored row still has no optional text.
            #expect(try Self.stored("ok", in: manager)[1] == "nil")
        }
    }
}
