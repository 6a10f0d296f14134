import Foundation
import PGDataKit
import Testing

/// The Swift blocks of Fetching.md, compiled and run over 100 users (`u0`…`u99`, named
/// `a0`…`a99`, aged 0…99), a post without a title by `u40` and one with a title by `u50`.
@Suite("Docs: fetching")
struct FetchingDocTests {
    func withUsers(_ body: (ContextManager, ManagedObjectContext) throws -> Void) throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for (index, user) in ExampleSchema.insertUsers(100, in: context).enumerated() {
                    user.name = "a\(index)"
                    user.age = index
                }
                try context.save()
                let draft = Post(context: context)
                draft.postID = "draft"
                draft.user = try User.first(in: context, where: "userID == 'u40'")
                let published = Post(context: context)
                published.postID = "published"
                published.title = "Hello"
                published.user = try User.first(in: context, where: "userID == 'u50'")
                try context.save()
            }
            try body(manager, manager.newPrivateContext())
        }
    }

    @Test func fetchRequest() throws {
        try withUsers { _, context in
            var request = FetchRequest<User>(
                predicate: try FetchPredicate(format: "age > %d AND name BEGINSWITH[c] %@", 30, "a"),
                sortDescriptors: [FetchSortDescriptor("name", caseInsensitive: true), FetchSortDescriptor("age", ascending: false)])
            request.fetchLimit = 20
            request.fetchOffset = 40
            request.relationshipKeyPathsForPrefetching = ["posts"]   // one query for all users' posts
            let names = try context.performAndWait {
                try context.fetch(request).map { $0.name ?? "" }
            }
            // 69 users are older than 30; by name in code point order, the 41st is "a71".
            #expect(names.count == 20)
            #expect(names.first == "a71")
        }
    }

    @Test func swiftPredicate() throws {
        try withUsers { _, context in
            let minimum = 30
            let request = FetchRequest<User>(predicate: try FetchPredicate(#Predicate<User> { user in
                user.age != nil && user.age! > minimum && (user.name?.starts(with: "A") ?? false)
            }))
            let withDrafts = try FetchPredicate(#Predicate<User> { user in
                user.posts.contains { $0.title == nil }
            })
            let (found, drafters) = try context.performAndWait {
                (try context.fetch(request), try context.fetch(FetchRequest<User>(predicate: withDrafts)).map(\.userID))
            }
            #expect(found.isEmpty)   // the names start with a lowercase "a"
            #expect(drafters == ["u40"])
        }
    }

    @Test func oneLiners() throws {
        try withUsers { _, context in
            try context.performAndWait {
                let all = try User.fetchAll(in: context)
                let adults = try User.fetch(in: context, where: "age >= %d", 18, sortedBy: [FetchSortDescriptor("name")], limit: 10)
                let ada = try User.first(in: context, where: "name == %@", "Ada")
                let count = try User.count(in: context, where: "age > 30")
                let any = try User.exists(in: context, where: "name == nil")
                let ages = try User.distinctValues(of: "age", as: Int.self, in: context)          // [Int?], by the database
                let total: Int? = try User.aggregate(.sum, of: "age", in: context)     // .sum .average .min .max
                let byID = try User.fetchAsDictionary(keyedBy: "userID", as: String.self, in: context)  // [String: User]
                let user = try User.insertOrFetch(key: "userID", value: "u42", in: context)
                let removed = try Post.deleteAll(in: context, where: "title == nil")   // one DELETE
                #expect(all.count == 100)
                #expect(adults.count == 10)
                #expect(ada == nil)
                #expect(count == 69)
                #expect(!any)
                #expect(ages.count == 100)
                #expect(total == 4_950)
                #expect(byID.count == 100)
                #expect(user.name == "a42")
                #expect(removed == 1)
            }
        }
    }
}
