import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The committed values a batch save replaces are released while the context's next
/// statement runs (as a reset's objects are), not between the save's `COMMIT` and its
/// return.
@Suite("Values a save replaced, released while the next statement runs")
struct ReplacedValuesTests {
    @Test func aBatchSavesValuesAreReleasedByTheNextStatement() throws {
        try ExampleSchema.withManager { manager in
            let (context, users) = try ExampleSchema.fetchedUsers(20, in: manager)
            try context.performAndWait {
                weak let block = try #require(users.first?.storage.snapshot?.block)
                for user in users { user.name = "renamed" }
                try context.save()
                #expect(block != nil, "held after the save")
                #expect(context.bookkeeping.holdsRetired)
                #expect(users.allSatisfy { !$0.hasChanges && $0.storage.snapshot?[1] == .string("renamed") })
                _ = try User.fetch(in: context, where: "userID == %@", "u3")
                #expect(block == nil, "released by the fetch")
                #expect(!context.bookkeeping.holdsRetired)
            }
        }
    }

    /// A save that replaces values releases those an earlier save kept.
    @Test func aLaterSaveReleasesTheValuesAnEarlierOneKept() throws {
        try ExampleSchema.withManager { manager in
            let (context, users) = try ExampleSchema.fetchedUsers(20, in: manager)
            try context.performAndWait {
                weak let first = try #require(users.first?.storage.snapshot?.block)
                for user in users { user.name = "once" }
                try context.save()
                #expect(first != nil)
                for user in users { user.name = "twice" }
                try context.save()
                #expect(first == nil, "the second save released the first's")
            }
        }
    }

    /// A save of a few objects releases their values at once, as before.
    @Test func aSmallSaveReleasesAtOnce() throws {
        try ExampleSchema.withManager { manager in
            let (context, users) = try ExampleSchema.fetchedUsers(5, in: manager)
            try context.performAndWait {
                weak let block = try #require(users.first?.storage.snapshot?.block)
                for user in users { user.age = 1 }
                try context.save()
                #expect(block == nil)
                #expect(!context.bookkeeping.holdsRetired)
            }
        }
    }
}
