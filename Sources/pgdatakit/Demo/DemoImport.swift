import Foundation
import PGDataKit

/// The demo's import step: users by remote id, then posts linked to their users.
enum DemoImport {
    /// Inserts or updates `users` (id, name) and `posts` (id, user id, title) in one save;
    /// returns the number of records.
    static func importBatch(
        users: [(String, String)], posts: [(String, String, String)], in context: ManagedObjectContext
    ) throws -> Int {
        for attempt in 0..<10 {
            do {
                try context.performAndWait {
                    let allUserKeys = Array(Set(users.map(\.0) + posts.map(\.1)))
                    var byKey: [String: User] = [:]
                    for user in try User.fetch(in: context, where: "userID IN %@", allUserKeys) {
                        byKey[user.userID] = user
                    }
                    func user(_ key: String) -> User {
                        if let user = byKey[key] { return user }
                        let user = User(context: context)
                        user.userID = key
                        byKey[key] = user
                        return user
                    }
                    for (key, name) in users { user(key).name = name }
                    var postsByKey: [String: Post] = [:]
                    for post in try Post.fetch(in: context, where: "postID IN %@", Array(Set(posts.map(\.0)))) {
                        postsByKey[post.postID] = post
                    }
                    for (key, userKey, title) in posts {
                        let post = postsByKey[key] ?? {
                            let post = Post(context: context)
                            post.postID = key
                            postsByKey[key] = post
                            return post
                        }()
                        post.title = title
                        post.user = user(userKey)
                    }
                    context.mergePolicy = .mergeByPropertyObjectTrump
                    try context.save()
                }
                return users.count + posts.count
            } catch let error as PostgresError where error.sqlState == .uniqueViolation && attempt < 9 {
                // Another worker inserted one of the keys first: read again and update it.
                context.performAndWait { context.reset() }
            }
        }
        return 0
    }
}
