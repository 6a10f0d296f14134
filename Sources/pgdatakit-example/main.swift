import PGDataKit

final class User: ManagedObject {
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
    @Relationship(inverse: "user", deleteRule: .cascade) var posts: Set<Post>
}

final class Post: ManagedObject {
    override class var tableName: String { "posts" }
    @Attribute(unique: true) var postID: String = ""
    @Attribute var title: String?
    @Relationship(inverse: "posts") var user: User?
}

let url = try EmbeddedPostgres.environmentOrSharedURL()   // $DATABASE_URL or a throwaway server

// No SQL to write: on a database without the model's tables, createsSchema creates them
// (for development; production schemas are reviewed migrations, `Model.schemaSQL()`).
let manager = try ContextManager(
    configuration: ConnectionConfiguration(url), entities: [User.self, Post.self], createsSchema: true)

// A private context is one transaction: insert, relate, save — all or nothing.
let context = manager.newPrivateContext()
try context.performAndWait {
    let user = try User.insertOrFetch(key: "userID", value: "u1", in: context)
    user.name = "Ada"
    let post = try Post.insertOrFetch(key: "postID", value: "p1", in: context)
    post.title = "Hello"
    post.user = user                  // user.posts now contains post too
    try context.save()
}

// Read it in the main context: a fetch sees every committed save (and from its
// first read on, the main context merges each save into the objects it holds).
let names = try manager.mainContext.performAndWait {
    try manager.mainContext.fetchAll(User.self).map { $0.name ?? "" }
}
print(names)  // ["Ada"]
manager.close()  // stops the change listener and closes the pool
