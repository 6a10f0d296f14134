import Hummingbird
import PGDataKit

/// A user (the library's example schema: `users`).
final class User: ManagedObject {
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
    @Relationship(inverse: "user", deleteRule: .cascade) var posts: Set<Post>
}

/// A post (the library's example schema: `posts`).
final class Post: ManagedObject {
    override class var tableName: String { "posts" }
    @Attribute(unique: true) var postID: String = ""
    @Attribute var title: String?
    @Relationship(inverse: "posts") var user: User?
}

/// A user as the API shows it. Managed objects stay on their context's queue; what
/// leaves `perform` is a plain Sendable value.
struct UserBody: ResponseCodable {
    var id: Int64?
    var userID: String
    var name: String?
    var age: Int?

    init(_ user: User) {
        id = user.objectID.primaryKey
        userID = user.userID
        name = user.name
        age = user.age
    }
}

/// What `POST /users` and `PATCH /users/:userID` take.
struct UserInput: Decodable, Sendable {
    var userID: String?
    var name: String?
    var age: Int?
}

/// A post as the API shows it.
struct PostBody: ResponseCodable {
    var id: Int64?
    var postID: String
    var title: String?
    var userID: String?

    init(_ post: Post) {
        id = post.objectID.primaryKey
        postID = post.postID
        title = post.title
        userID = post.user?.userID
    }
}

/// What `POST /posts` and `PATCH /posts/:postID` take.
struct PostInput: Decodable, Sendable {
    var postID: String?
    var title: String?
    var userID: String?
}

/// What `POST /import/users` answers.
struct ImportBody: ResponseCodable {
    var records: Int
    var inserted: Int
    var updated: Int
    var unchanged: Int
}
