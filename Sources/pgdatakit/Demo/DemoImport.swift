import Foundation
import PGDataKit

/// The demo's import step: users by remote id, then posts linked to their users, with
/// `insertOrUpdate` (one `= ANY` fetch per batch; new keys saved with `ON CONFLICT`, so
/// workers importing the same keys at once end with one row per key).
enum DemoImport {
    /// Imports `users` (id, name) and `posts` (id, user id, title) in one save; returns
    /// the number of records. Deadlocks, serialization failures and lost connections
    /// that did not commit are retried (`isTransient`); an unknown outcome
    /// (`SaveOutcomeUnknownError`) is not: a retry could apply the save twice.
    static func importBatch(
        users: [(String, String)], posts: [(String, String, String)], in context: ManagedObjectContext
    ) throws -> Int {
        let userRecords: [JSONValue] = users.map { .object(["UserID": .string($0.0), "Name": .string($0.1)]) }
        let postRecords: [JSONValue] = posts.map {
            .object(["PostID": .string($0.0), "UserID": .string($0.1), "Title": .string($0.2)])
        }
        for attempt in 0..<10 {
            do {
                try context.performAndWait {
                    context.mergePolicy = .mergeByPropertyObjectTrump
                    try User.insertOrUpdate(userRecords, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) {
                        record, user in user.name = record["Name"]?.stringValue
                    }
                    try Post.insertOrUpdate(
                        postRecords, uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context,
                        relationships: [.relationship("UserID", to: \.user, matching: \User.userID)]
                    ) { record, post in
                        post.title = record["Title"]?.stringValue
                    }
                    try context.save()
                }
                return users.count + posts.count
            } catch let error as PostgresError where error.isTransient && attempt < 9 {
                context.performAndWait { context.reset() }
            }
        }
        return 0
    }
}
