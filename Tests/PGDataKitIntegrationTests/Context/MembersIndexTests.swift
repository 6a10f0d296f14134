import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A one-to-many relationship read from many owners costs one pass over the registry
/// per change, not one per owner (it used to scan every registered object per call),
/// and always answers what the objects hold now.
@Suite("One-to-many members")
struct MembersIndexTests {
    @Test func readingEveryOwnersMembersBuildsOneIndexAndFollowsChanges() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                var users: [User] = []
                for index in 0..<300 {
                    let user = User(context: context)
                    user.userID = "u\(index)"
                    users.append(user)
                    for number in 0..<(index % 4) {
                        let post = Post(context: context)
                        post.postID = "p\(index)-\(number)"
                        post.user = user
                    }
                }
                try context.save()
                // Loaded for all at once (one query), as a controller or an export would.
                let builds = context.bookkeeping.membersIndexBuilds
                var request = FetchRequest<User>()
                request.relationshipKeyPathsForPrefetching = ["posts"]
                _ = try context.fetch(request)
                for (index, user) in users.enumerated() { #expect(user.posts.count == index % 4) }
                // One pass over the registry for the 300 owners (the prefetch's or the
                // first read's), not one per owner.
                #expect(context.bookkeeping.membersIndexBuilds - builds <= 1)
                // Fetching the owners again registers no new object: the index stays.
                let built = context.bookkeeping.membersIndexBuilds
                #expect(try context.fetch(FetchRequest<User>()).count == 300)
                #expect(try context.fetchAll(User.self).count == 300)
                for (index, user) in users.enumerated() { #expect(user.posts.count == index % 4) }
                #expect(context.bookkeeping.membersIndexBuilds == built)
                // A change is seen at once.
                let moved = try #require(users[3].posts.first)
                moved.user = users[0]
                #expect(users[0].posts.map(\.postID) == [moved.postID])
                #expect(users[3].posts.count == 2)
                moved.delete()
                #expect(users[0].posts.isEmpty)
                let fresh = Post(context: context)
                fresh.postID = "new"
                fresh.user = users[1]
                #expect(Set(users[1].posts.map(\.postID)) == ["p1-0", "new"])
                try context.save()
                // Saved, fetched afresh in another context (keys, not objects): the same.
                let other = manager.newPrivateContext()
                try other.performAndWait { () throws in
                    let posts = try other.fetchAll(Post.self)
                    let owners = try other.fetchAll(User.self)
                    #expect(owners.map(\.posts.count).reduce(0, +) == posts.count)
                }
            }
        }
    }
}
