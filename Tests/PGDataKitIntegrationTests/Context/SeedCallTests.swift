import Foundation
import Testing

@testable import PGDataKit

/// Calls the seed helpers had that ported code expects (issue 30).
@Suite("Seed calls: insertOrFetch(where:), clone()")
struct SeedCallTests {
    /// RHManagedObject's `newOrExistingEntityWithPredicate:`.
    @Test func insertOrFetchWherePredicate() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let saved = User(context: context)
                saved.userID = "saved"
                saved.age = 40
                try context.save()
                let found = try User.insertOrFetch(in: context, where: "age > %d", 30)
                #expect(found === saved)
                let pending = User(context: context)
                pending.userID = "pending"
                pending.name = "Pen"
                #expect(try User.insertOrFetch(in: context, where: "name == 'Pen'") === pending)
                let made = try User.insertOrFetch(where: try FetchPredicate(format: "age > 100"), in: context)
                #expect(made.isInserted && made !== saved && made !== pending)
                #expect(context.insertedObjects.count == 2)
                #expect(throws: FetchPredicateError.self) { try User.insertOrFetch(in: context, where: "nosuchkey == 1") }
            }
        }
    }

    /// RHManagedObject's `clone`: attributes and many-to-one relationships copied, unique
    /// keys left as a new object's.
    @Test func cloneCopiesAttributesButNotUniqueKeys() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let user = User(context: context)
                user.userID = "owner"
                let post = Post(context: context)
                post.postID = "p1"
                post.title = "Hello"
                post.user = user
                try context.save()
                let copy = try post.clone()
                #expect(copy.isInserted && copy !== post)
                #expect(copy.title == "Hello" && copy.postID == "")
                #expect(copy.user === user)
                #expect(user.posts.count == 2)
                copy.postID = "p2"
                try context.save()
                let ownerCopy = try user.clone()
                #expect(ownerCopy.userID == "" && ownerCopy.posts.isEmpty)  // to-many not copied
                #expect(user.posts.count == 2)
                context.delete(ownerCopy)
                post.delete()
                try context.save()
                #expect(throws: ManagedObjectError.objectDeleted(post.objectID)) { try post.clone() }
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts WHERE title = 'Hello'", in: manager) == 1)
        }
    }

    /// SQKDataKit's delete-all also takes the context's unsaved inserts that match, as an
    /// option; by default only rows go.
    @Test(arguments: [false, true])
    func deleteAllWithOrWithoutUnsavedInserts(including: Bool) throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                for (id, age) in [("s10", 10), ("s40", 40)] {
                    let user = User(context: context)
                    user.userID = id
                    user.age = age
                }
                try context.save()
                for (id, age) in [("m12", 12), ("m50", 50)] {
                    let user = User(context: context)
                    user.userID = id
                    user.age = age
                }
                let deleted = try User.deleteAll(
                    in: context, where: try FetchPredicate(format: "age < 18"), includingUnsavedInserts: including)
                #expect(deleted == 1)
                #expect(Set(context.insertedObjects.compactMap { ($0 as? User)?.userID }) == (including ? ["m50"] : ["m12", "m50"]))
                try context.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == (including ? 2 : 3))
        }
    }
}
