import Foundation
import PGDataKit
import Testing

/// Seeds users u0…u9 (ages 20…29, names from `names`) with posts, in a new context.
private func seed(_ manager: ContextManager) throws {
    let names = ["Ada", "bob", "Álvaro", "carol", nil, "Dave", "eve", "Ada", "Zoë", "mallory"]
    let context = manager.newPrivateContext()
    try context.performAndWait {
        for index in 0..<10 {
            let user = User(context: context)
            user.userID = "u\(index)"
            user.name = names[index]
            user.age = 20 + index
            for number in 0..<(index % 4) {
                let post = Post(context: context)
                post.postID = "p\(index)-\(number)"
                post.title = number == 0 ? "first of \(index)" : "Post \(number)"
                post.user = user
            }
        }
        try context.save()
    }
}

/// A class outside the model that names itself after the model's `User` entity.
private final class Stranger: ManagedObject {
    override class var entityName: String { "User" }
}

@Suite("Fetch requests, format strings and results")
struct FetchRequestTests {
    /// An object of a class outside the model that takes an entity's name is pending
    /// under that name, but it is no object of the entity's class: a fetch of the entity
    /// leaves it out (it was cast to the entity's class unchecked).
    @Test func aStrangerNamedAfterAnEntityIsNotFetchedAsOne() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                context.insert(Stranger())  // (first: a window of one must not be spent on it)
                let user = User(context: context)
                user.userID = "u1"
                let fetched = try context.fetch(FetchRequest<User>())
                #expect(fetched.count == 1)
                #expect(fetched.first === user)
                #expect(try context.count(for: FetchRequest<User>()) == 1, "nor counted as one")
                var one = FetchRequest<User>()
                one.fetchLimit = 1
                #expect(try context.fetch(one).first === user)
            }
        }
    }

    @Test func formatStringPredicatesRunInTheDatabase() throws {
        try ExampleSchema.withManager { manager in
            try seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                func ids(_ format: String, _ arguments: Any?...) throws -> [String] {
                    let request = FetchRequest<User>(
                        predicate: try FetchPredicate(format: format, argumentArray: arguments),
                        sortDescriptors: [FetchSortDescriptor("userID")])
                    return try context.fetch(request).map(\.userID)
                }
                #expect(try ids("age > %d AND age <= 23", 21) == ["u2", "u3"])
                #expect(try ids("name BEGINSWITH[c] %@", "a") == ["u0", "u7"])  // "Álvaro" needs [d] too
                #expect(try ids("name BEGINSWITH[cd] %@", "al") == ["u2"])
                #expect(try ids("name ==[c] 'ADA'") == ["u0", "u7"])
                #expect(try ids("name == nil") == ["u4"])
                #expect(try ids("NOT name == 'Ada'") == ["u1", "u2", "u3", "u4", "u5", "u6", "u8", "u9"])
                #expect(try ids("age BETWEEN {24, 25}") == ["u4", "u5"])
                #expect(try ids("userID IN %@", ["u1", "u9", "nobody"]) == ["u1", "u9"])
                #expect(try ids("name LIKE 'm*y'") == ["u9"])
                #expect(try ids("name MATCHES '[a-c].*'") == ["u1", "u3"])
                #expect(try ids("posts.@count == 3") == ["u3", "u7"])
                #expect(try ids("ANY posts.title BEGINSWITH 'first of 1'") == ["u1"])
                #expect(try ids("ALL posts.title BEGINSWITH 'first' AND posts.@count > 0") == ["u1", "u5", "u9"])
                #expect(try ids("NONE posts.title == 'Post 2' AND age < 23") == ["u0", "u1", "u2"])
                let named = try FetchPredicate(format: "%K == $NAME", "name").substituting(["NAME": "Zoë"])
                #expect(try context.fetch(FetchRequest<User>(predicate: named)).map(\.userID) == ["u8"])
                #expect(try ids("TRUEPREDICATE").count == 10)
                #expect(try ids("FALSEPREDICATE").isEmpty)
            }
        }
    }

    @Test func keyPathsThroughToOneRelationships() throws {
        try ExampleSchema.withManager { manager in
            try seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let request = FetchRequest<Post>(
                    predicate: try FetchPredicate(format: "user.name ==[c] %@ AND user.age > 25", "ada"),
                    sortDescriptors: [FetchSortDescriptor("postID")])
                #expect(try context.fetch(request).map(\.postID) == ["p7-0", "p7-1", "p7-2"])
                let user = try #require(try User.first(in: context, where: "userID == 'u3'"))
                let byObject = try context.fetch(FetchRequest<Post>(predicate: try FetchPredicate(format: "user == %@", user)))
                #expect(byObject.count == 3)
                let sorted = try context.fetch(FetchRequest<Post>(
                    sortDescriptors: [FetchSortDescriptor("user.age", ascending: false), FetchSortDescriptor("postID")]))
                #expect(sorted.first?.postID == "p9-0")
            }
        }
    }

    @Test func badPredicatesAreErrorsWithPositions() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            context.performAndWait {
                do {
                    _ = try context.fetch(FetchRequest<User>(predicate: try FetchPredicate(format: "age > 3 AND nickname == 'x'")))
                    Issue.record("expected an unknown key error")
                } catch let error as FetchPredicateError {
                    #expect(error.position == 12)
                    #expect(error.description.contains("nickname"))
                    #expect(error.description.contains("expected one of"))
                } catch {
                    Issue.record("unexpected \(error)")
                }
                #expect(throws: FetchPredicateError.self) {
                    _ = try context.fetch(FetchRequest<User>(predicate: try FetchPredicate(format: "age == 'old'")))
                }
                #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "age == ") }
            }
        }
    }

    @Test func sortLimitOffsetAndCount() throws {
        try ExampleSchema.withManager { manager in
            try seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                var request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("name", caseInsensitive: true)])
                request.fetchLimit = 4
                request.fetchOffset = 1
                #expect(try context.fetch(request).map(\.name) == ["Ada", "Ada", "bob", "carol"])
                let descending = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("age", ascending: false)], fetchLimit: 2)
                #expect(try context.fetch(descending).map(\.userID) == ["u9", "u8"])
                #expect(try context.count(for: FetchRequest<User>(predicate: try FetchPredicate(format: "age >= 25"))) == 5)
                #expect(try context.fetchObjectIDs(FetchRequest<User>(predicate: try FetchPredicate(format: "age < 22"))).count == 2)
            }
        }
    }

    @Test func dictionariesAndDistinct() throws {
        try ExampleSchema.withManager { manager in
            try seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                var request = FetchRequest<User>(predicate: try FetchPredicate(format: "age < 23"), sortDescriptors: [FetchSortDescriptor("age")])
                request.propertiesToFetch = ["userID", "age"]
                let rows = try context.fetchDictionaries(request)
                #expect(rows.count == 3)
                #expect(rows[0]["userID"] as? String == "u0")
                #expect(rows[2]["age"] as? Int == 22)
                var names = FetchRequest<User>(predicate: try FetchPredicate(format: "name ==[c] 'ada' OR name == nil"))
                names.propertiesToFetch = ["name"]
                names.returnsDistinctResults = true
                let distinct = try context.fetchDictionaries(names)
                #expect(distinct.count == 2)
                var authors = FetchRequest<Post>()
                authors.propertiesToFetch = ["user.name"]
                authors.returnsDistinctResults = true
                #expect(try context.fetchDictionaries(authors).compactMap { $0["user.name"] as? String }.count == 7)
            }
        }
    }

    @Test func pendingChangesAreIncludedByDefault() throws {
        try ExampleSchema.withManager { manager in
            try seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let young = try FetchPredicate(format: "age < 22")
                let request = FetchRequest<User>(predicate: young, sortDescriptors: [FetchSortDescriptor("age")])
                let before = try context.fetch(request)
                #expect(before.map(\.userID) == ["u0", "u1"])
                before[0].age = 40  // no longer matches
                let old = try #require(try User.first(in: context, where: "userID == 'u9'"))
                old.age = 1  // now matches, sorts first
                let newcomer = User(context: context)
                newcomer.userID = "new"
                newcomer.age = 21
                try User.first(in: context, where: "userID == 'u1'")?.delete()
                let after = try context.fetch(request)
                #expect(after.map(\.userID) == ["u9", "new"])
                #expect(after[0] === old)
                #expect(try context.count(for: request) == 2)
                var storeOnly = request
                storeOnly.includesPendingChanges = false
                // The store's answer, unsaved changes ignored: u0 (still 20 there) and u1.
                #expect(try context.fetch(storeOnly).map(\.userID) == ["u0", "u1"])
                var limited = request
                limited.fetchLimit = 1
                #expect(try context.fetch(limited).map(\.userID) == ["u9"])
            }
        }
    }

    @Test func prefetchingTakesOneQueryPerRelationship() throws {
        try ExampleSchema.withManager { manager in
            try seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                var request = FetchRequest<User>()
                request.relationshipKeyPathsForPrefetching = ["posts"]
                let users = try context.fetch(request)
                let before = manager.coordinator.statementCount
                let total = users.reduce(0) { $0 + $1.posts.count }
                #expect(total == 13)
                #expect(manager.coordinator.statementCount == before)  // nothing more was read

                context.reset()
                var posts = FetchRequest<Post>()
                posts.relationshipKeyPathsForPrefetching = ["user"]
                let start = manager.coordinator.statementCount
                let fetched = try context.fetch(posts)
                #expect(manager.coordinator.statementCount - start == 3)  // BEGIN, posts, users
                #expect(Set(fetched.compactMap { $0.user?.userID }).count == 7)
                #expect(manager.coordinator.statementCount - start == 3)
            }
        }
    }

    @Test func batchesStreamThroughACursorAndKeepMemoryFlat() throws {
        try ExampleSchema.withManager { manager in
            let loader = try Connection(manager.coordinator.pool.configuration)
            let rows: [[(any PostgresEncodable)?]] = (0..<5_000).map { ["bulk-\($0)", $0 % 100] }
            try loader.copy(into: "users", columns: ["user_id", "age"], rows: rows)
            loader.close()
            for context in [manager.newPrivateContext(), manager.mainContext] {
                try context.performAndWait {
                    var request = FetchRequest<User>(predicate: try FetchPredicate(format: "age >= 50"))
                    request.fetchBatchSize = 300
                    var seen = 0
                    var largestRegistered = 0
                    var batches = 0
                    try context.fetch(request) { batch in
                        seen += batch.count
                        batches += 1
                        largestRegistered = max(largestRegistered, context.registeredObjects.count)
                        #expect(batch.allSatisfy { ($0.age ?? 0) >= 50 })
                    }
                    #expect(seen == 2_500)
                    #expect(batches == 9)
                    #expect(largestRegistered <= 300)
                    #expect(context.registeredObjects.isEmpty)
                }
            }
        }
    }

    @Test func aNullInANonOptionalAttributeIsAnErrorNamingEntityKeyAndRow() throws {
        try ExampleSchema.withManager { manager in
            try manager.coordinator.pool.withConnection { connection in
                try connection.execute("ALTER TABLE samples ALTER COLUMN int DROP NOT NULL")
                try connection.execute(
                    """
                    INSERT INTO samples (id, text, int, int64, int32, int16, double, float, decimal, flag, date, uuid,
                                         data, json)
                    VALUES (7, 'x', NULL, 1, 1, 1, 1, 1, 1, true, now(), gen_random_uuid(), '\\x00', '{}')
                    """)
            }
            let context = manager.newPrivateContext()
            context.performAndWait {
                #expect {
                    try context.fetch(FetchRequest<Sample>())
                } throws: { error in
                    guard let error = error as? ManagedObjectError, error.code == .invalidStoredValue else {
                        return false
                    }
                    return error.entity == "Sample" && error.key == "int" && error.primaryKey == 7
                }
            }
        }
    }
}
