import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Entity inheritance (issue 48): the schema of a hierarchy, its descriptions, object
/// IDs, abstract entities and saves of both kinds. Fetching: `EntityInheritanceFetchTests`;
/// relationships and merges: `EntityInheritanceGraphTests`; controllers, imports,
/// history and another process: the other `EntityInheritance…Tests`.
@Suite("Entity inheritance: one table per root entity with a discriminator")
struct EntityInheritanceTests {
    typealias S = InheritanceSchema

    /// `column:nullable` (`YES`/`NO`) for each column of a table, by name.
    private func columns(_ table: String, on connection: Connection) throws -> [String] {
        try connection.query(
            "SELECT column_name::text, is_nullable::text FROM information_schema.columns WHERE table_name = $1 ORDER BY 1",
            [table]
        ).map { "\(try $0.decode(String.self, at: 0)):\(try $0.decode(String.self, at: 1))" }
    }

    /// The tables of the public schema but the library's own.
    private func tables(on connection: Connection) throws -> [String] {
        try connection.query(
            """
            SELECT table_name::text FROM information_schema.tables
            WHERE table_schema = current_schema() AND table_name NOT LIKE 'pgdatakit%' ORDER BY 1
            """
        ).map { try $0.decode(String.self, at: 0) }
    }

    @Test func theSchemaIsOneTableWithADiscriminatorThatTheSchemaCheckAccepts() throws {
        let script = try Model(entities: S.entities).schemaSQL()
        #expect(!script.contains("\"article\"") && !script.contains("\"video\""), "\(script)")
        try S.withDatabase { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            #expect(try tables(on: connection) == ["contents", "folders"])
            #expect(
                try columns("contents", on: connection) == [
                    "body:YES", "entity:NO", "folder_id:YES", "id:NO", "rank:NO", "seconds:YES", "slug:YES", "title:NO",
                    "version:NO",
                ])
            // The discriminator holds the concrete entities only: not the abstract root,
            // not NULL, not a name outside the model.
            try connection.execute("INSERT INTO contents (entity, title, rank, seconds) VALUES ('Video', 'ok', 1, 5)")
            try connection.execute("INSERT INTO contents (entity, title, rank, body) VALUES ('Article', 'ok too', 1, 'b')")
            for wrong in ["'Content'", "NULL", "'Folder'", "'article'"] {
                #expect(throws: PostgresError.self, "entity \(wrong)") {
                    try connection.execute("INSERT INTO contents (entity, title, rank) VALUES (\(wrong), 'no', 1)")
                }
            }
            #expect(try connection.query("SELECT count(*) FROM contents")[0].decode(Int.self, at: 0) == 2)
            let manager = try ContextManager(configuration: configuration, entities: S.entities)
            defer { manager.close() }
            #expect(try manager.coordinator.validateSchema() == [])
        }
    }

    /// The schema check reads the hierarchy's table: a missing discriminator or column of
    /// a sub-entity is a mismatch naming it.
    @Test(arguments: [("entity", "Content"), ("seconds", "Video"), ("slug", "Article")])
    func theSchemaCheckFindsAMissingColumnOfTheHierarchy(column: String, entity: String) throws {
        try S.withDatabase { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.execute("ALTER TABLE contents DROP COLUMN \(column)")
            let error = #expect(throws: SchemaMismatchError.self) {
                _ = try ContextManager(configuration: configuration, entities: S.entities)
            }
            let missing = error?.mismatches.filter { $0.code == .missingColumn } ?? []
            #expect(missing.map(\.column) == [column], "\(error.map { "\($0)" } ?? "no error")")
            // (The discriminator belongs to the hierarchy: any of its entities may be named.)
            if column != "entity" { #expect(missing.first?.entity == entity) }
        }
    }

    @Test func aCustomDiscriminatorAndAConcreteRootWithARelationshipToASubEntity() throws {
        try S.withManager(S.shapeEntities) { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                KindShape(context: context).label = "plain"
                let palette = KindPalette(context: context)
                palette.name = "warm"
                let circle = KindCircle(context: context)
                circle.label = "round"
                circle.radius = 2.5
                circle.palette = palette
                try context.save()
            }
            #expect(try manager.coordinator.validateSchema() == [])
            let kinds = try manager.coordinator.pool.withConnection { connection in
                try connection.query("SELECT kind || ':' || label FROM shapes ORDER BY label").map { try $0.decode(String.self, at: 0) }
            }
            #expect(kinds == ["Shape:plain", "Circle:round"])
            let shape = try #require(manager.coordinator.model.entity(named: "Shape"))
            #expect(!shape.isAbstract && shape.discriminatorColumn == "kind" && shape.subentityNames == ["Circle"])
            #expect(manager.coordinator.model.entity(named: "Circle")?.discriminatorColumn == "kind")

            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let shapes = try KindShape.fetch(in: reader, sortedBy: [FetchSortDescriptor("label")])
                #expect(shapes.map { "\(type(of: $0)):\($0.label)" } == ["KindShape:plain", "KindCircle:round"])
                let circles = try reader.fetchAll(KindCircle.self)
                #expect(circles.map(\.label) == ["round"])
                #expect(circles.first?.radius == 2.5)
                #expect(try KindShape.count(in: reader) == 2 && KindCircle.count(in: reader) == 1)
                let palette = try #require(try reader.fetchAll(KindPalette.self).first)
                #expect(palette.circles.map(\.label) == ["round"])
                #expect(circles.first?.palette === palette)
                // Deleting the palette nullifies the circle's reference (delete rule).
                palette.delete()
                try reader.save()
            }
            let nulls = try manager.coordinator.pool.withConnection { connection in
                try connection.query("SELECT count(*) FROM shapes WHERE kind = 'Circle' AND palette_id IS NULL")[0].decode(Int.self, at: 0)
            }
            #expect(nulls == 1)
        }
    }

    @Test func rowsLeaveTheOtherKindsColumnsNull() throws {
        // As Core Data's SQLite store: a column of one kind is NULL in the other kinds' rows.
        try S.withManager { manager in
            try S.seed(manager)
            let articles = try S.integer("SELECT count(*) FROM contents WHERE entity = 'Article' AND seconds IS NOT NULL", in: manager)
            let videos = try S.integer(
                "SELECT count(*) FROM contents WHERE entity = 'Video' AND (body IS NOT NULL OR slug IS NOT NULL)", in: manager)
            #expect(articles == 0, "articles with seconds")
            #expect(videos == 0, "videos with a body or slug")
        }
        // So a sub-entity's unique attribute with a default does not make two rows of
        // another kind collide on that default.
        try S.withManager(S.shapeEntities) { manager throws in
            let context = manager.newPrivateContext()
            context.performAndWait {
                for label in ["a", "b"] { KindShape(context: context).label = label }
                let circle = KindCircle(context: context)
                circle.label = "c"
                circle.code = "c1"
                #expect(throws: Never.self) { try context.save() }
            }
            #expect(try S.integer("SELECT count(*) FROM shapes", in: manager) == 3)
            #expect(try S.integer("SELECT count(*) FROM shapes WHERE kind = 'Shape' AND code IS NULL", in: manager) == 2)
        }
    }

    @Test func entityDescriptionsDescribeTheHierarchy() throws {
        let model = try Model(entities: S.entities)
        let content = try #require(model.entity(named: "Content"))
        let article = try #require(model.entity(named: "Article"))
        let video = try #require(model.entity(named: "Video"))
        let folder = try #require(model.entity(named: "Folder"))
        #expect(content.isAbstract && !article.isAbstract && !video.isAbstract && !folder.isAbstract)
        #expect(content.superentityName == nil && article.superentityName == "Content" && video.superentityName == "Content")
        #expect(content.subentityNames == ["Article", "Video"] && article.subentityNames.isEmpty)
        #expect([content, article, video].map(\.discriminatorColumn) == ["entity", "entity", "entity"])
        #expect(folder.discriminatorColumn == nil && folder.superentityName == nil && folder.subentityNames.isEmpty)
        for sub in [article, video] {
            #expect(sub.tableName == "contents" && sub.primaryKeyColumn == "id" && sub.versionColumn == "version")
            // Inherited properties come first, then the sub-entity's own.
            #expect(sub.attribute(named: "title") != nil && sub.relationship(named: "folder") != nil)
        }
        #expect(article.attribute(named: "body") != nil && article.attribute(named: "seconds") == nil)
        #expect(video.attribute(named: "seconds") != nil && video.attribute(named: "slug") == nil)
        #expect(content.attribute(named: "body") == nil)
        #expect(model.entity(for: FeedArticle.self) === article)
    }

    @Test func objectIDsNameTheRootEntityAndResolveToTheConcreteClass() throws {
        try S.withManager { manager in
            let context = manager.newPrivateContext()
            let (articleID, videoID) = try context.performAndWait { () throws -> (ObjectID, ObjectID) in
                let article = S.article("Alpha", rank: 1, slug: "alpha", folder: nil, in: context)
                let video = S.video("Apex", rank: 2, seconds: 60, folder: nil, in: context)
                #expect(article.objectID.entityName == "Content" && video.objectID.entityName == "Content")
                try context.save()
                #expect(article.objectID.entityName == "Content" && !article.objectID.isTemporaryID)
                #expect(article.entity.name == "Article" && video.entity.name == "Video")
                return (article.objectID, video.objectID)
            }
            let fresh = manager.newPrivateContext()
            try fresh.performAndWait {
                let article = try #require(try fresh.object(with: articleID) as? FeedArticle)
                #expect(article.body == "alpha body" && article.slug == "alpha" && article.title == "Alpha")
                let video = try #require(try fresh.existingObject(with: videoID) as? FeedVideo)
                #expect(video.seconds == 60 && video.rank == 2)
                // The same IDs again give the registered instances; a fetch too.
                #expect(try fresh.object(with: articleID) === article)
                #expect(try fresh.fetchAll(FeedContent.self).contains { $0 === video })
                // Through the URI form, as another process would get it.
                let again = try #require(ObjectID(uriRepresentation: articleID.uriRepresentation))
                #expect(again == articleID)
            }
            let other = manager.newPrivateContext()
            try other.performAndWait {
                let byURI = try other.object(with: try #require(ObjectID(uriRepresentation: videoID.uriRepresentation)))
                #expect(S.kinds([try #require(byURI as? FeedContent)]) == ["Video:Apex"])
            }
        }
    }

    @Test func objectsOfTheAbstractEntityAreNotSavedButItCanBeFetched() throws {
        try S.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let abstract = FeedContent(context: context)
                abstract.title = "abstract"
                S.article("Alpha", rank: 1, slug: "alpha", folder: nil, in: context)
                let error = #expect(throws: (any Error).self) { try context.save() }
                #expect("\(error.map { "\($0)" } ?? "")".contains("Content"), "the error names the entity")
                // Nothing was written, and the changes stay for a retry.
                #expect(try S.integer("SELECT count(*) FROM contents", in: manager) == 0)
                #expect(context.insertedObjects.count == 2)
                // The abstract entity is fetched (pending objects of its sub-entities too).
                #expect(S.kinds(try context.fetchAll(FeedContent.self)).contains("Article:Alpha"))
                abstract.delete()
                try context.save()
            }
            try S.expectRows(manager, ["Article:Alpha:1:alpha body:alpha:-"])
            let reader = manager.newPrivateContext()
            try reader.performAndWait { () throws in
                #expect(S.kinds(try reader.fetchAll(FeedContent.self)) == ["Article:Alpha"])
                #expect(try FeedContent.count(in: reader) == 1)
            }
        }
    }

    @Test func savesInsertUpdateAndDeleteBothKinds() throws {
        try S.withManager { manager in
            try S.seed(manager)
            try S.expectRows(manager, [
                    "Article:Alpha:3:alpha body:alpha:inbox", "Video:Apex:2:60:inbox",
                    "Article:Beta:1:beta body:beta:archive", "Video:Bravo:4:90:-",
                ])
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let byTitle = Dictionary(uniqueKeysWithValues: try context.fetchAll(FeedContent.self).map { ($0.title, $0) })
                let alpha = try #require(byTitle["Alpha"] as? FeedArticle)
                alpha.body = "rewritten"
                alpha.rank = 7
                let apex = try #require(byTitle["Apex"] as? FeedVideo)
                apex.seconds = 61
                apex.title = "Apex 2"
                try #require(byTitle["Beta"]).delete()
                try #require(byTitle["Bravo"]).delete()
                try context.save()
            }
            try S.expectRows(manager, ["Article:Alpha:7:rewritten:alpha:inbox", "Video:Apex 2:2:61:inbox"])
            #expect(try S.integer("SELECT count(*) FROM contents WHERE version = 2", in: manager) == 2)
            // A stale copy of an updated row of either kind is a conflict (version column
            // of the root's table).
            let stale = manager.newPrivateContext()
            let fresher = manager.newPrivateContext()
            try stale.performAndWait {
                let video = try #require(try FeedVideo.first(in: stale, where: "seconds == 61"))
                try fresher.performAndWait {
                    try #require(try FeedVideo.first(in: fresher, where: "seconds == 61")).seconds = 62
                    try fresher.save()
                }
                video.seconds = 63
                #expect(throws: (any Error).self) { try stale.save() }
            }
            let rows = try S.rows(manager)
            #expect(rows.last == "Video:Apex 2:2:62:inbox")
        }
    }
}
