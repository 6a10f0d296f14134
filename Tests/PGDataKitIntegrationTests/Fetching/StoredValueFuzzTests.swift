import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Rows other programs wrote, mixing values the model's types hold with values they do
/// not, read through the whole fetch path: each row fetches exactly when all of its values
/// are held, otherwise fails with `invalidStoredValue` naming one of its bad attributes
/// and its key, never the value; fetches of the good rows go on.
@Suite("Stored-value fuzzing through fetches")
struct StoredValueRowFuzzTests {
    /// Per column, SQL literals the server accepts, and whether the attribute's type holds
    /// them.
    static let literals: [(column: String, choices: [(sql: String, holds: Bool)])] = [
        ("status", [("'draft'", true), ("'archived'", true), ("'Draft'", false), ("''", false), ("'secret-1'", false)]),
        ("priority", [("NULL", true), ("1", true), ("2", true), ("0", false), ("-9223372036854775808", false)]),
        ("size", [("1", true), ("2", true), ("0", false), ("32767", false)]),
        (
            "address",
            [
                ("NULL", true), (#"'{"city": "a", "zip": "b"}'"#, true), (#"'{"zip": "b", "city": "a", "more": [1]}'"#, true),
                ("'null'", false), (#"'{"city": "secret-2"}'"#, false), ("'[1]'", false),
                ("'" + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "'", false),
            ]
        ),
        ("home", [(#"'{"city": "", "zip": ""}'"#, true), (#"'{"zip": "z", "city": "c"}'"#, true), (#"'"secret-3"'"#, false), ("'{}'", false)]),
    ]

    @Test func eachRowFetchesExactlyWhenItsTypesHoldItsValues() throws {
        try TicketSchema.withManager { manager, connection in
            var random = SeededGenerator(state: 0xF022_0045)
            var badColumns: [String: Set<String>] = [:]
            for row in 0..<120 {
                var columns = ["code"]
                var values = ["'r\(row)'"]
                var bad: Set<String> = []
                for (column, choices) in Self.literals {
                    // About one value in six is one the type does not hold.
                    let wantsBad = Int.random(in: 0..<6, using: &random) == 0
                    let pool = choices.filter { $0.holds != wantsBad }
                    let choice = try #require(pool.randomElement(using: &random))
                    columns.append(column)
                    values.append(choice.sql + (column == "address" || column == "home" ? "::jsonb" : ""))
                    if !choice.holds { bad.insert(column) }
                }
                try connection.execute(
                    "INSERT INTO tickets (\(columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))")
                badColumns["r\(row)"] = bad
            }
            let keys = Dictionary(
                uniqueKeysWithValues: try connection.query("SELECT code, id FROM tickets").map {
                    (try $0.decode(String.self, at: 0), try $0.decode(Int64.self, at: 1))
                })
            let goodCodes = badColumns.filter { $0.value.isEmpty }.map(\.key)
            // The fuzzing covers both outcomes, in a good share each.
            #expect(goodCodes.count > 20 && goodCodes.count < 100, "\(goodCodes.count) good rows of 120")

            for (code, bad) in badColumns.sorted(by: { $0.key < $1.key }) {
                let context = manager.newPrivateContext()
                try context.performAndWait { () throws in
                    do {
                        let fetched = try Ticket.fetch(in: context, where: "code == %@", code)
                        #expect(bad.isEmpty, "\(code) fetched though \(bad.sorted()) hold values their types cannot")
                        #expect(fetched.count == 1)
                    } catch let error as ManagedObjectError {
                        #expect(!bad.isEmpty, "\(code): \(error)")
                        #expect(error.code == .invalidStoredValue, "\(error)")
                        #expect(bad.contains(error.key ?? ""), "\(code): \(error) names none of \(bad.sorted())")
                        #expect(error.entity == "Ticket" && error.primaryKey == keys[code], "\(error)")
                        #expect(!"\(error)".contains("secret"), "\(error)")
                    }
                }
            }

            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let good = try Ticket.fetch(in: context, where: "code IN %@", goodCodes)
                #expect(Set(good.map(\.code)) == Set(goodCodes))
                #expect(throws: ManagedObjectError.self) { _ = try context.fetchAll(Ticket.self) }
                // The failed fetch left the good objects registered and the context usable.
                #expect(try Ticket.fetch(in: context, where: "code IN %@", goodCodes).count == goodCodes.count)
            }
        }
    }
}
