import Foundation
import PGDataKit
import Testing

// The Swift blocks of TheObjectGraph.md's "Enums and Codable values", compiled and run
// here (in a namespace: the article's `Post` is not the example's).

enum PostStates {
    enum Status: String, AttributeEnum { case draft, published }   // text
    enum Priority: Int, AttributeEnum { case low = 1, high = 2 }   // bigint
    struct Address: Codable, Equatable, AttributeCodable {         // jsonb
        var city: String
        var zip: String
    }

    final class Post: ManagedObject {
        override class var tableName: String { "posts" }
        @Attribute var status: Status = .draft
        @Attribute var priority: Priority?
        @Attribute var address: Address?
        @Attribute var home: Address = Address(city: "", zip: "")
    }

    /// The article's second block, on `post` (saved as a draft) in `context`.
    static func publish(_ post: Post, in context: ManagedObjectContext) throws {
        post.status = .published
        post.home.city = "Oslo"   // a change of `home`: saved with the post
        try context.save()

        let published = try Post.fetch(in: context, where: "status == %@", Status.published)
        let draft = Status.draft
        let drafts = try context.fetch(FetchRequest<Post>(predicate: try FetchPredicate(#Predicate<Post> { $0.status == draft })))
        #expect(published.map(\.home.city) == ["Oslo"])
        #expect(drafts.count == 1)
    }
}

@Suite("Docs: enums and Codable values")
struct EnumsAndCodableDocTests {
    @Test func enumsAndCodableValues() throws {
        let model = try Model(entities: [PostStates.Post.self])
        let script = try model.schemaSQL()
        #expect(script.contains("    status text NOT NULL DEFAULT 'draft',\n"), "\(script)")
        #expect(script.contains("    priority bigint,\n"), "\(script)")
        #expect(script.contains("    address jsonb,\n"), "\(script)")
        #expect(script.contains("    home jsonb NOT NULL DEFAULT '{\"city\":\"\",\"zip\":\"\"}'::jsonb,\n"), "\(script)")
        try TestDatabase.withConnection { connection in
            try connection.executeScript(script)
            let manager = try ContextManager(configuration: connection.configuration, entities: [PostStates.Post.self])
            defer { manager.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let post = PostStates.Post(context: context)
                PostStates.Post(context: context).priority = .high
                try context.save()
                try PostStates.publish(post, in: context)
            }
        }
    }
}
