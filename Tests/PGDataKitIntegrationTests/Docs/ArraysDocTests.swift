import Foundation
import PGDataKit
import Testing

// The Swift blocks of TheObjectGraph.md's "Arrays", compiled and run here (in a
// namespace: the article's `Article` is not the example's).

enum ArrayArticles {
    final class Article: ManagedObject {
        override class var tableName: String { "articles" }
        @Attribute var tags: [String] = []   // text[] NOT NULL DEFAULT '{}'
        @Attribute var scores: [Int]?        // bigint[]
    }

    /// The article's second block, on `article` (saved with the tag "server") in `context`.
    static func tag(_ article: Article, in context: ManagedObjectContext) throws {
        article.tags.append("swift")   // a change of `tags`: saved with the article
        try context.save()

        let tagged = try Article.fetch(in: context, where: "ANY tags == %@", "swift")
        let alsoTagged = try Article.fetch(in: context, where: "%@ IN tags", "swift")
        let busy = try Article.count(in: context, where: "tags.@count >= 2")
        let swift = try context.fetch(FetchRequest<Article>(predicate: try FetchPredicate(#Predicate<Article> { $0.tags.contains("swift") })))
        #expect(tagged.map(\.tags) == [["server", "swift"]])
        #expect(alsoTagged.count == 1 && swift.count == 1 && busy == 1)
    }
}

@Suite("Docs: arrays")
struct ArraysDocTests {
    @Test func arrays() throws {
        let model = try Model(entities: [ArrayArticles.Article.self])
        let script = try model.schemaSQL()
        #expect(script.contains("    tags text[] NOT NULL DEFAULT '{}',\n"), "\(script)")
        #expect(script.contains("    scores bigint[],\n"), "\(script)")
        try TestDatabase.withConnection { connection in
            try connection.executeScript(script)
            let manager = try ContextManager(configuration: connection.configuration, entities: [ArrayArticles.Article.self])
            defer { manager.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let article = ArrayArticles.Article(context: context)
                article.tags = ["server"]
                ArrayArticles.Article(context: context).scores = [1]
                try context.save()
                try ArrayArticles.tag(article, in: context)
            }
        }
    }
}
