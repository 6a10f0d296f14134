import Foundation
import PGDataKit
import Testing

// The entity-inheritance blocks of TheObjectGraph.md, compiled and run here (in a
// namespace: other tests declare entities of the same names).

enum InheritanceDoc {
    class Content: ManagedObject {
        override class var isAbstract: Bool { true }
        override class var tableName: String { "contents" }
        @Attribute var title: String = ""
        @Attribute var rank: Int = 0
        @Relationship(inverse: "items") var folder: Folder?
    }

    final class Article: Content {
        @Attribute var body: String = ""
    }

    final class Video: Content {
        @Attribute var seconds: Int = 0
    }

    final class Folder: ManagedObject {
        @Attribute var name: String = ""
        @Relationship(inverse: "folder") var items: Set<Content>
    }
}

@Suite("Docs: entity inheritance")
struct InheritanceDocTests {
    typealias Content = InheritanceDoc.Content
    typealias Article = InheritanceDoc.Article
    typealias Video = InheritanceDoc.Video
    typealias Folder = InheritanceDoc.Folder

    @Test func theArticlesExampleRunsOnTheTableItsScriptMakes() throws {
        try TestDatabase.withFreshDatabase(migrations: false) { configuration in
            let schema = try Model(entities: [Content.self, Article.self, Video.self, Folder.self]).schemaSQL()
            #expect(schema.contains("entity text NOT NULL CHECK (entity IN ('Article', 'Video')),"))
            #expect(schema.contains("body text,") && schema.contains("seconds bigint,"))
            #expect(!schema.contains("CREATE TABLE article") && !schema.contains("CREATE TABLE video"))
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.executeScript(schema)
            let manager = try ContextManager(configuration: configuration, entities: [Content.self, Article.self, Video.self, Folder.self])
            defer { manager.close() }
            #expect(try manager.coordinator.validateSchema().isEmpty)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let folder = Folder(context: context)
                folder.name = "inbox"
                for (index, title) in ["b", "a", "c"].enumerated() {
                    let article = Article(context: context)
                    (article.title, article.rank, article.body, article.folder) = (title, index, "text \(title)", folder)
                }
                let video = Video(context: context)
                (video.title, video.rank, video.seconds, video.folder) = ("v", 5, 90, folder)
                try context.save()
                #expect(video.objectID.entityName == "Content" && video.entity.name == "Video")
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let context = reader
                let model = try Model(entities: [Content.self, Article.self, Video.self, Folder.self])
                let script = try model.schemaSQL()   // CREATE TABLE contents (… entity text NOT NULL CHECK …)
                let ranked = try Content.fetch(in: context, where: "rank > 0", sortedBy: [FetchSortDescriptor("title")])
                let seconds = ranked.compactMap { ($0 as? Video)?.seconds }   // the videos among them
                let articles = try Article.fetchAll(in: context)              // … WHERE t."entity" = 'Article'
                #expect(script == schema)
                #expect(ranked.map(\.title) == ["a", "c", "v"])
                #expect(ranked.map { String(describing: type(of: $0)) } == ["Article", "Article", "Video"])
                #expect(seconds == [90])
                #expect(Set(articles.map(\.body)) == ["text a", "text b", "text c"])
                let folder = try #require(try Folder.first(in: context, where: "name == 'inbox'"))
                #expect(folder.items.count == 4 && folder.items.filter { $0 is Video }.count == 1)
                #expect(try Video.count(in: context) == 1 && Content.count(in: context) == 4)
                let abstract = Content(context: context)
                abstract.title = "nothing"
                #expect { try context.save() } throws: { ($0 as? ManagedObjectError)?.code == .abstractEntity }
            }
            let rows = try connection.query("SELECT entity, count(*) FROM contents GROUP BY entity ORDER BY entity")
            #expect(try rows.map { "\(try $0.decode(String.self, at: 0))=\(try $0.decode(Int.self, at: 1))" } == ["Article=3", "Video=1"])
        }
    }
}
