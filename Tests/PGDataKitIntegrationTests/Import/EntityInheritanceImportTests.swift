import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Importing into a sub-entity (issue 48): articles keyed by their slug, linked to folders
/// by name; a second import updates rather than duplicates, and the videos in the same
/// table stay as they were. Data: `InheritanceSchema.seed`.
@Suite("Entity inheritance: imports into a sub-entity")
struct EntityInheritanceImportTests {
    typealias S = InheritanceSchema

    /// The videos' rows as `S.rows` gives them, after the seed.
    static let seededVideos = ["Video:Apex:2:60:inbox", "Video:Bravo:4:90:-"]

    /// The rows of one kind.
    private func rows(_ kind: String, _ manager: ContextManager) throws -> [String] {
        try S.rows(manager).filter { $0.hasPrefix(kind + ":") }
    }

    /// Checks the rows of one kind, showing both lists when they differ.
    private func expectRows(
        _ kind: String, _ manager: ContextManager, _ expected: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let actual = try rows(kind, manager)
        #expect(actual == expected, sourceLocation: sourceLocation)
    }

    private func setArticle(_ record: JSONValue, _ article: FeedArticle) {
        if let title = record["title"]?.stringValue { article.title = title }
        if let body = record["body"]?.stringValue { article.body = body }
        if let rank = record["rank"]?.intValue { article.rank = rank }
    }

    @Test func insertOrUpdateMatchesArticlesBySlugAndLinksTheirFolders() throws {
        try S.withManager { manager in
            try S.seed(manager)
            // "Apex" is a video's title: an article of that title is a new article.
            let records: [JSONValue] = [
                ["slug": "alpha", "title": "Alpha 2", "body": "imported", "folder": "archive"],
                ["slug": "delta", "title": "Delta", "rank": 8, "folder": "inbox"],
                ["slug": "apex", "title": "Apex", "rank": 2, "body": "not the video", "folder": "drafts"],
            ]
            let links: [ObjectMap<FeedArticle>] = [.relationship("folder", to: "folder", matching: "name")]
            let context = manager.newPrivateContext()
            let alphaID = try context.performAndWait { () throws -> ObjectID in
                let alpha = try #require(try FeedArticle.first(in: context, where: "slug == 'alpha'"))
                let articles = try FeedArticle.insertOrUpdate(
                    records, uniqueModelKey: "slug", uniqueRemoteKey: "slug", in: context, relationships: links, setArticle)
                #expect(articles.map(\.slug) == ["alpha", "delta", "apex"])
                #expect(articles[0] === alpha && articles[0].folder?.name == "archive")
                #expect(context.insertedObjects.count == 3)  // two articles and the "drafts" stub folder
                try context.save()
                return alpha.objectID
            }
            // (Delta's body is the attribute's default: the setter sets none.)
            try expectRows("Article", manager, [
                    "Article:Alpha 2:3:imported:alpha:archive", "Article:Apex:2:not the video:apex:drafts",
                    "Article:Beta:1:beta body:beta:archive", "Article:Delta:8::delta:inbox",
                ])
            try expectRows("Video", manager, Self.seededVideos)

            // Again, changed: updates in place, no duplicates, the videos untouched.
            let again = manager.newPrivateContext()
            try again.performAndWait {
                var changed = records
                changed[1] = ["slug": "delta", "title": "Delta", "rank": 9, "folder": "archive"]
                let articles = try FeedArticle.insertOrUpdate(
                    changed, uniqueModelKey: "slug", uniqueRemoteKey: "slug", in: again, relationships: links, setArticle)
                #expect(articles[0].objectID == alphaID)
                #expect(again.insertedObjects.isEmpty)
                #expect(again.updatedObjects.compactMap { ($0 as? FeedArticle)?.slug } == ["delta"])
                try again.save()
            }
            #expect(try S.integer("SELECT count(*) FROM contents WHERE entity = 'Article'", in: manager) == 4)
            let articles = try rows("Article", manager)
            #expect(articles.contains("Article:Delta:9::delta:archive"), "\(articles)")
            try expectRows("Video", manager, Self.seededVideos)
            #expect(try S.integer("SELECT count(*) FROM folders", in: manager) == 3)
        }
    }

    @Test func guaranteedInsertsOfArticlesAreUpsertsOnTheSlug() throws {
        try S.withManager { manager in
            try S.seed(manager)
            // The caller says the records are new; "beta" is not: its row is updated.
            let mapper = ObjectMapper<FeedArticle>(uniqueKey: "slug")
            let operation = manager.importOperation(
                [["slug": "beta", "title": "Beta", "rank": 21], ["slug": "new", "title": "New", "rank": 22]] as [JSONValue],
                mapper: mapper, options: ImportOptions(guaranteedInsert: true))
            operation.start()
            #expect(operation.error == nil, "\(operation.error.map { "\($0)" } ?? "")")
            try expectRows("Article", manager, [
                "Article:Alpha:3:alpha body:alpha:inbox", "Article:Beta:21:beta body:beta:archive", "Article:New:22::new:-",
            ])
            try expectRows("Video", manager, Self.seededVideos)
        }
    }

    @Test func mappersAndImportOperationsUpdatePruneAndLeaveVideosAlone() throws {
        try S.withManager { manager in
            try S.seed(manager)
            let mapper = ObjectMapper<FeedArticle>(
                uniqueKey: "slug", maps: [.relationship("folder", to: \.folder, matching: \FeedFolder.name)])
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let records: [JSONValue] = [
                    ["slug": "beta", "title": "Beta", "rank": 11, "body": "mapped", "folder": "inbox"],
                    ["slug": "omega", "title": "Omega", "rank": 12, "body": "new"],
                ]
                let articles = try FeedArticle.importRecords(records, mapper: mapper, in: context)
                #expect(S.kinds(articles) == ["Article:Beta", "Article:Omega"])
                try context.save()
                // Exported through the same mapper, the link as the folder's name.
                let exported = try mapper.export(articles[0])
                #expect(exported["slug"] == "beta" && exported["body"] == "mapped")
            }
            try expectRows("Article", manager, [
                "Article:Alpha:3:alpha body:alpha:inbox", "Article:Beta:11:mapped:beta:inbox", "Article:Omega:12:new:omega:-",
            ])

            // An operation in batches of one that prunes the articles missing from its input.
            let operation = manager.importOperation(
                [["slug": "omega", "title": "Omega", "rank": 13], ["slug": "zeta", "title": "Zeta", "folder": "inbox"]] as [JSONValue],
                mapper: mapper, options: ImportOptions(batchSize: 1, pruneMissingObjects: true))
            operation.start()
            #expect(operation.error == nil)
            let summary = try #require(operation.summary)
            #expect(summary.inserted == 1 && summary.updated == 1 && summary.deleted == 2, "\(summary)")
            try expectRows("Article", manager, ["Article:Omega:13:new:omega:-", "Article:Zeta:0::zeta:inbox"])
            try expectRows("Video", manager, Self.seededVideos)
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let inbox = try #require(try FeedFolder.first(in: reader, where: "name == 'inbox'"))
                #expect(S.kinds(inbox.items.sorted { $0.title < $1.title }) == ["Video:Apex", "Article:Zeta"])
            }
        }
    }
}
