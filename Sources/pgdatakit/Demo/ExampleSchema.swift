import Foundation
import PGDataKit
import PGDataKitCommands

/// The example dataset (users with a unique remote id, and their posts), as the demo and
/// `import` use it. The demo's database gets its tables from this model
/// (`createsSchema`); `migrations/` holds the same schema as applied history for
/// `pgdatakit migrate` (a test checks that the folder leaves no difference to the model).
enum ExampleSchema: CommandModel {
    /// The entities, for the demo and the embedded commands (`migrate`, `schema`, `import`).
    static let entities: [ManagedObject.Type] = [User.self, Post.self]
}

/// A user of the example schema.
final class User: ManagedObject {
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
    @Relationship(inverse: "user", deleteRule: .nullify) var posts: Set<Post>
}

/// A post of the example schema.
final class Post: ManagedObject {
    override class var tableName: String { "posts" }
    @Attribute(unique: true) var postID: String = ""
    @Attribute var title: String?
    @Relationship(inverse: "posts") var user: User?
}
