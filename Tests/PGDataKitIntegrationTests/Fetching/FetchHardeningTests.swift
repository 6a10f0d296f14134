import Foundation
import PGDataKit
import Testing

/// Saves users with these names (userID `s0`, `s1`, …), then inserts unsaved users with
/// the same names (userID `m0`, `m1`, …) into `context`, so one fetch with pending
/// changes decides the saved rows in SQL and the unsaved objects in memory.
func seedSavedAndUnsaved(_ names: [String], manager: ContextManager, context: ManagedObjectContext) throws {
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
func matchingIndexes(
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

    @Test func negativeLimitsAndOffsetsAreErrorsNamingTheField() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada", "bob"], manager: manager, context: context)
            try context.performAndWait { () throws in
                for pending in [true, false] {
                    for (limit, offset, field) in [(-1, 0, "fetchLimit"), (Int.min, 0, "fetchLimit"), (nil, -1, "fetchOffset"), (1, Int.min, "fetchOffset")] as [(Int?, Int, String)] {
                        var request = FetchRequest<User>(fetchLimit: limit, fetchOffset: offset)
                        request.includesPendingChanges = pending
                        func expectFieldError(_ body: () throws -> Void) {
                            do {
                                try body()
                                Issue.record("no error for \(field) with pending \(pending)")
                            } catch let error as FetchRequestError {
                                #expect(error.field == field)
                                #expect("\(error)".contains(field), "\(error)")
                            } catch {
                                Issue.record("unexpected \(error)")
                            }
                        }
                        expectFieldError { _ = try context.fetch(request) }
                        expectFieldError { _ = try context.count(for: request) }
                        expectFieldError { _ = try context.fetchObjectIDs(request) }
                        expectFieldError { _ = try context.fetchDictionaries(request) }
                        expectFieldError { try context.fetch(request) { _ in } }
                    }
                }
            }
        }
    }

    /// `fetchLimit = Int.max` with pending changes used to overflow `limit + offset +
    /// pending.count`.
    @Test func hugeLimitsAndOffsetsDoNotOverflow() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada", "bob"], manager: manager, context: context)
            try context.performAndWait { () throws in
                for pending in [true, false] {
                    var request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")], fetchLimit: Int.max, fetchOffset: 1)
                    request.includesPendingChanges = pending
                    #expect(try context.fetch(request).count == (pending ? 3 : 1))
                    #expect(try context.count(for: request) == (pending ? 3 : 1))
                    request.fetchOffset = Int.max
                    #expect(try context.fetch(request).isEmpty)
                    #expect(try context.count(for: request) == 0)
                    request.fetchOffset = 0
                }
            }
        }
    }

    /// `fetchLimit = 0` means "no limit", as `NSFetchRequest.fetchLimit = 0` does and as
    /// code ported from the Core Data helpers expects (it used to return no rows).
    @Test func zeroLimitMeansNoLimit() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada", "bob"], manager: manager, context: context)
            try context.performAndWait { () throws in
                for pending in [true, false] {
                    var request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")], fetchLimit: 0)
                    request.includesPendingChanges = pending
                    #expect(request.fetchLimit == nil)
                    #expect(try context.fetch(request).count == (pending ? 4 : 2))
                    #expect(try context.count(for: request) == (pending ? 4 : 2))
                    #expect(try context.fetchObjectIDs(request).count == (pending ? 4 : 2))
                    request.fetchLimit = 1
                    request.fetchLimit = 0
                    request.fetchOffset = 1
                    #expect(try context.fetch(request).count == (pending ? 3 : 1))
                }
                #expect(try User.fetch(in: context, where: "userID != nil", limit: 0).count == 4)
            }
        }
    }

    /// The same MATCHES answers whether PostgreSQL decides (saved rows) or the
    /// in-memory evaluator does (unsaved objects).
    @Test func matchesAgreesInSQLAndInMemory() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada", "a\nb", "Bob", "ab\n", "carol", "Ada)x"], manager: manager, context: context)
            try context.performAndWait { () throws in
                for (pattern, expected) in [
                    ("A.a", [0]), ("a.b", [1]), ("[a-c].*", [1, 3, 4]), ("ab", []), ("ab\n", [3]),
                    ("Ada|Bob", [0, 2]), (".*", [0, 1, 2, 3, 4, 5]), ("Ada\\)x", [5]), ("\\w+", [0, 2, 4]),
                    ("[[:upper:]].*", [0, 2, 5]), ("(a|A)(?=d).*", [0, 5]),
                ] as [(String, [Int])] {
                    let result = try matchingIndexes(try FetchPredicate(format: "name MATCHES %@", pattern), in: context)
                    #expect(result.saved == expected, "SQL: \(pattern.debugDescription)")
                    #expect(result.unsaved == expected, "memory: \(pattern.debugDescription)")
                }
                for pattern in [
                    "(", "Ada)|(?:.*", ").*|(.*", "[a-", "a{2,1}", "(?i)ada", "a{256}", "\\Qa\\E", "\\bAda", "(?<n>Ada)",
                ] {
                    let predicate = try FetchPredicate(format: "name MATCHES %@", pattern)
                    for pending in [true, false] {
                        var request = FetchRequest<User>(predicate: predicate)
                        request.includesPendingChanges = pending
                        #expect(throws: FetchPredicateError.self, "\(pattern) pending \(pending)") {
                            _ = try context.fetch(request)
                        }
                    }
                }
            }
        }
    }

    /// `(a+)+b` against forty `a`s: PostgreSQL's engine answers at once; the in-memory
    /// evaluation stops at its budget with a typed error rather than run for seconds.
    @Test func catastrophicRegexOnUnsavedObjectsStopsAtTheBudget() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            let fortyAs = String(repeating: "a", count: 40)
            try seedSavedAndUnsaved([fortyAs, fortyAs, fortyAs], manager: manager, context: context)
            try context.performAndWait { () throws in
                let predicate = try FetchPredicate(format: "name MATCHES %@", "(a+)+b")
                var saved = FetchRequest<User>(predicate: predicate)
                saved.includesPendingChanges = false
                #expect(try context.fetch(saved).isEmpty)
                let start = ContinuousClock.now
                #expect(throws: FetchPredicateError.self) { _ = try context.fetch(FetchRequest<User>(predicate: predicate)) }
                // The typed error shows the budget stopped it; without one, forty `a`s take
                // about 2^40 steps (hours). The budget itself is steps, not seconds: two
                // seconds here took 3.4 on a loaded machine (flake-hunt, issue 49).
                #expect(ContinuousClock.now - start < patience)
            }
        }
    }

    /// Predicates built in code are held to the parser's depth limit before any SQL is
    /// sent; at the limit the server accepts them.
    @Test func deepPredicatesBuiltInCodeAreErrorsBeforeTheServer() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try seedSavedAndUnsaved(["Ada", "bob"], manager: manager, context: context)
            try context.performAndWait { () throws in
                let isAda = try FetchPredicate(format: "name == 'Ada'")
                var alternating = isAda
                for _ in 0..<256 { alternating = .and([isAda, .or([isAda, alternating])]) }
                for pending in [true, false] {
                    var request = FetchRequest<User>(predicate: negated(isAda, 256))
                    request.includesPendingChanges = pending
                    #expect(try context.fetch(request).map(\.userID).sorted() == (pending ? ["m0", "s0"] : ["s0"]))
                    request.predicate = .and([isAda, alternating])
                    #expect(try context.fetch(request).count == (pending ? 2 : 1))
                    for tooDeep in [negated(isAda, 257), negated(isAda, 5_000), negated(isAda, 100_000)] {
                        request.predicate = tooDeep
                        #expect(throws: FetchPredicateError.self) { _ = try context.fetch(request) }
                        #expect(throws: FetchPredicateError.self) { _ = try context.count(for: request) }
                    }
                    var chain = FetchPredicate.constant(true)
                    for _ in 0..<100_000 { chain = .and([chain, .constant(true)]) }
                    request.predicate = .and([chain, isAda])
                    #expect(try context.fetch(request).count == (pending ? 2 : 1))
                }
            }
        }
    }
}
