import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A batch save's `UPDATE` arrays are bound while its lock statement runs
/// (`SavePipeline.UpdatesAhead`) when it inserts nothing; what it writes is the same.
@Suite("UPDATE arrays bound while the lock statement runs")
struct UpdatesAheadTests {
    private func boundAhead(_ manager: ContextManager) -> Int {
        manager.coordinator.updatesBoundAhead.load(ordering: .relaxed)
    }

    /// Two shapes (name in one half, age in the other): both groups go as bound ahead,
    /// and the rows hold what was set.
    @Test func eachGroupIsSentAsBoundAhead() throws {
        try ExampleSchema.withManager { manager in
            let (context, users) = try ExampleSchema.fetchedUsers(300, in: manager)
            let before = boundAhead(manager)
            try context.performAndWait {
                for (offset, user) in users.enumerated() {
                    if offset.isMultiple(of: 2) { user.name = "n\(offset)" } else { user.age = offset }
                }
                try context.save()
            }
            #expect(boundAhead(manager) == before + 2)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name LIKE 'n%' AND age IS NULL", in: manager) == 150)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE age IS NOT NULL AND name IS NULL", in: manager) == 150)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE version = 2", in: manager) == 300)
        }
    }

    /// A save that also inserts binds when it writes, as before (an inserted object's key
    /// comes from its statement).
    @Test func aSaveThatInsertsBindsWhenItWrites() throws {
        try ExampleSchema.withManager { manager in
            let (context, users) = try ExampleSchema.fetchedUsers(200, in: manager)
            let before = boundAhead(manager)
            try context.performAndWait {
                for user in users { user.name = "renamed" }
                User(context: context).userID = "new"
                try context.save()
            }
            #expect(boundAhead(manager) == before)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'renamed'", in: manager) == 200)
        }
    }

    /// A value the arrays cannot carry (a NUL in a string): binding ahead fails quietly,
    /// the group is bound again when written and the save throws the encoding error,
    /// writing nothing.
    @Test func aValueThatCannotBeBoundFailsTheSaveAsBefore() throws {
        try ExampleSchema.withManager { manager in
            let (context, users) = try ExampleSchema.fetchedUsers(200, in: manager)
            let before = boundAhead(manager)
            let result = context.performAndWait { () -> Result<Void, any Error> in
                for user in users { user.name = "renamed" }
                users[7].name = "nul\u{0}inside"
                return Result { try context.save() }
            }
            guard case .failure(let error) = result, let valueError = error as? PostgresValueError else {
                Issue.record("expected a PostgresValueError, got \(result)")
                return
            }
            #expect(valueError.code == .containsNUL)
            #expect(boundAhead(manager) == before)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name IS NOT NULL", in: manager) == 0)
        }
    }
}
