import Foundation
import PGDataKit
import Testing

/// Saves users with these names (userID `s0`, `s1`, …), then inserts unsaved users with
/// the same names (userID `m0`, `m1`, …) into `context`, so one fetch with pending
/// changes decides the saved rows in SQL and the unsaved objects in memory.
private func seedSavedAndUnsaved(_ names: [String], manager: ContextManager, context: ManagedObjectContext) throws {
    let writer = manager.newPrivateContext()
    try writer.performAndWait { () throws in
        for (index, name) in names.enumerated() {
            let user = User(context: writer)
            user.userID = "s\(index)"
            user.name = name
        }
        try writer.save()
    }
    context.performAndWait {
        for (index, name) in names.enumerated() {
            let user = User(context: context)
            user.userID = "m\(index)"
            user.name = name
        }
    }
}

/// The indexes of the saved (`s…`) and unsaved (`m…`) users a predicate selects.
private func matchingIndexes(
    _ predicate: FetchPredicate, in context: ManagedObjectContext
) throws -> (saved: [Int], unsaved: [Int]) {
    let ids = try context.fetch(FetchRequest<User>(predicate: predicate)).map(\.userID)
    func indexes(_ prefix: Character) -> [Int] {
        ids.filter { $0.first == prefix }.compactMap { Int($0.dropFirst()) }.sorted()
    }
    return (indexes("s"), indexes("m"))
}

/// `NOT NOT … p`, `count` times.
private func negated(_ predicate: FetchPredicate, _ count: Int) -> FetchPredicate {
    var result = predicate
    for _ in 0..<count { result = .not(result) }
    return result
}

@Suite("Fetches with hostile input")
struct FetchHardeningTests {
    /// A LIKE pattern of a million `*` with unsaved objects pending: the in-memory
    /// matcher used to recurse once per pattern character and overflow the stack.
    @Test func likeWithAMillionCharacterPatternAndPendingObjects() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada", "bob", "a*b"], manager: manager, context: context)
            try context.performAndWait { () throws in
                let stars = String(repeating: "*", count: 1_000_000)
                let all = try matchingIndexes(try FetchPredicate(format: "name LIKE %@", stars), in: context)
                #expect(all.saved == [0, 1, 2])
                #expect(all.unsaved == [0, 1, 2])
                let some = try matchingIndexes(try FetchPredicate(format: "name LIKE[c] %@", stars + "b" + stars), in: context)
                #expect(some.saved == [1, 2])
                #expect(some.unsaved == [1, 2])
            }
        }
    }
}
