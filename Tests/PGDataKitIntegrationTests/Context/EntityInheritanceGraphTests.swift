import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Entity inheritance (issue 48): a relationship to the abstract root holds both kinds,
/// delete rules apply to both, and saves of both kinds reach another manager's main
/// context. Data: `InheritanceSchema.seed`.
@Suite("Entity inheritance: relationships and merges")
struct EntityInheritanceGraphTests {
    typealias S = InheritanceSchema

    /// The folder with a name.
    private func folder(_ name: String, in context: ManagedObjectContext) throws -> FeedFolder {
        try #require(try FeedFolder.first(in: context, where: "name == %@", name))
    }

    @Test func aRelationshipToTheRootHoldsBothKinds() throws {
        try S.withManager { manager in
            try S.seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let inbox = try folder("inbox", in: context)
                #expect(S.kinds(inbox.items.sorted { $0.title < $1.title }) == ["Article:Alpha", "Video:Apex"])
                let alpha = try #require(inbox.items.first { $0.title == "Alpha" } as? FeedArticle)
                #expect(alpha.body == "alpha body" && alpha.folder === inbox)
                // The inverse follows in memory for either kind, then in the database.
                let bravo = try #require(try FeedVideo.first(in: context, where: "title == 'Bravo'"))
                bravo.folder = inbox
                #expect(inbox.items.count == 3)
                let archive = try folder("archive", in: context)
                archive.items.insert(alpha)
                #expect(alpha.folder === archive && !inbox.items.contains(alpha))
                try context.save()
            }
            try S.expectRows(manager, [
                    "Article:Alpha:3:alpha body:alpha:archive", "Video:Apex:2:60:inbox",
                    "Article:Beta:1:beta body:beta:archive", "Video:Bravo:4:90:inbox",
                ])
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                // Loaded from the database in a fresh context; predicates through the relationship.
                #expect(S.kinds(try folder("archive", in: reader).items.sorted { $0.title < $1.title }) == ["Article:Alpha", "Article:Beta"])
                #expect(try FeedFolder.fetch(in: reader, where: "ANY items.title == 'Bravo'").map(\.name) == ["inbox"])
                #expect(try FeedFolder.count(in: reader, where: "items.@count == 2") == 2)
                var request = FetchRequest<FeedFolder>(sortDescriptors: [FetchSortDescriptor("name")])
                request.relationshipKeyPathsForPrefetching = ["items"]
                let folders = try reader.fetch(request)
                #expect(folders.map { S.kinds($0.items.sorted { $0.title < $1.title }) } == [
                    ["Article:Alpha", "Article:Beta"], ["Video:Apex", "Video:Bravo"],
                ])
            }
        }
    }

    @Test func deleteRulesApplyToBothKinds() throws {
        try S.withManager { manager in
            try S.seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                // Deleting a content of either kind takes it out of its folder (nullify).
                let inbox = try folder("inbox", in: context)
                #expect(inbox.items.count == 2)
                try #require(inbox.items.first { $0 is FeedVideo }).delete()
                #expect(S.kinds(Array(inbox.items)) == ["Article:Alpha"])
                try context.save()
                #expect(S.kinds(Array(inbox.items)) == ["Article:Alpha"])
                // Deleting a folder deletes its contents, whatever their kind (cascade).
                let archive = try folder("archive", in: context)
                S.video("Clip", rank: 5, seconds: 1, folder: archive, in: context)
                try context.save()
                archive.delete()
                #expect(context.deletedObjects.count == 3)
                try context.save()
            }
            try S.expectRows(manager, ["Article:Alpha:3:alpha body:alpha:inbox", "Video:Bravo:4:90:-"])
            #expect(try S.integer("SELECT count(*) FROM folders", in: manager) == 1)
        }
    }

    @Test func aChildContextSavesBothKindsThroughItsParent() throws {
        try S.withManager { manager in
            try S.seed(manager)
            let parent = manager.newPrivateContext()
            let child = parent.newChildContext()
            try child.performAndWait {
                let inbox = try folder("inbox", in: child)
                S.article("Gamma", rank: 5, slug: "gamma", folder: inbox, in: child)
                S.video("Clip", rank: 6, seconds: 7, folder: inbox, in: child)
                try #require(try FeedVideo.first(in: child, where: "title == 'Apex'")).seconds = 61
                try #require(try FeedArticle.first(in: child, where: "title == 'Beta'")).delete()
                try child.save()
            }
            try parent.performAndWait {
                #expect(S.kinds(parent.insertedObjects.compactMap { $0 as? FeedContent }.sorted { $0.title < $1.title }) == [
                    "Video:Clip", "Article:Gamma",
                ])
                #expect(parent.deletedObjects.compactMap { ($0 as? FeedContent)?.title } == ["Beta"])
                #expect(try folder("inbox", in: parent).items.map(\.title).sorted() == ["Alpha", "Apex", "Clip", "Gamma"])
                try parent.save()
            }
            try S.expectRows(manager, [
                "Article:Alpha:3:alpha body:alpha:inbox", "Video:Apex:2:61:inbox", "Video:Bravo:4:90:-",
                "Video:Clip:6:7:inbox", "Article:Gamma:5:gamma body:gamma:inbox",
            ])
        }
    }

    @Test func savesOfBothKindsReachAnotherManagersMainContext() throws {
        try S.withDatabase { configuration in
            let writer = try ContextManager(configuration: configuration, entities: S.entities)
            defer { writer.close() }
            try S.seed(writer)
            // (Started after the seed: its main context merges only the saves below.)
            let watcher = try ContextManager(configuration: configuration, entities: S.entities)
            defer { watcher.close() }
            let main = watcher.mainContext
            let (held, inbox) = try main.performAndWait { () throws -> ([String: FeedContent], FeedFolder) in
                let held = Dictionary(uniqueKeysWithValues: try main.fetchAll(FeedContent.self).map { ($0.title, $0) })
                let inbox = try folder("inbox", in: main)
                #expect(inbox.items.count == 2)
                return (held, inbox)
            }
            let inserted = Collected<ObjectID>()
            let token = main.observeObjectsDidChange { changes in inserted.append(contentsOf: changes.inserted) }
            defer { token.cancel() }

            let context = writer.newPrivateContext()
            try context.performAndWait {
                let byTitle = Dictionary(uniqueKeysWithValues: try context.fetchAll(FeedContent.self).map { ($0.title, $0) })
                try #require(byTitle["Alpha"] as? FeedArticle).body = "merged body"
                try #require(byTitle["Apex"] as? FeedVideo).seconds = 61
                try #require(byTitle["Bravo"]).rank = 40
                try #require(byTitle["Beta"]).delete()
                let inbox = try folder("inbox", in: context)
                S.article("Gamma", rank: 5, slug: "gamma", folder: inbox, in: context)
                S.video("Clip", rank: 6, seconds: 7, folder: inbox, in: context)
                try context.save()
            }
            try ControllerTesting.wait("the main context merged both kinds", on: main) {
                (held["Alpha"] as? FeedArticle)?.body == "merged body" && (held["Apex"] as? FeedVideo)?.seconds == 61
                    && held["Bravo"]?.rank == 40 && held["Beta"]?.isDeleted == true && inserted.all.count == 2
            }
            try main.performAndWait {
                let ids = inserted.all
                #expect(Set(ids.map(\.entityName)) == ["Content"])
                let new = try ids.map { try #require(try main.object(with: $0) as? FeedContent) }
                #expect(S.kinds(new.sorted { $0.title < $1.title }) == ["Video:Clip", "Article:Gamma"])
                #expect((new.first { $0.title == "Clip" } as? FeedVideo)?.seconds == 7)
                // The loaded to-many relationship gained both.
                #expect(inbox.items.map(\.title).sorted() == ["Alpha", "Apex", "Clip", "Gamma"])
                #expect(S.kinds(try main.fetchAll(FeedContent.self).sorted { $0.title < $1.title }) == [
                    "Article:Alpha", "Video:Apex", "Video:Bravo", "Video:Clip", "Article:Gamma",
                ])
            }
        }
    }

    @Test func aRelationshipOfASubEntityMergesInAnotherManager() throws {
        try S.withDatabase(S.shapeEntities) { configuration in
            let writer = try ContextManager(configuration: configuration, entities: S.shapeEntities)
            defer { writer.close() }
            try ControllerTesting.save(writer) { context in
                let palette = KindPalette(context: context)
                palette.name = "warm"
                let circle = KindCircle(context: context)
                (circle.label, circle.code, circle.palette) = ("round", "c1", palette)
                KindShape(context: context).label = "plain"
            }
            let watcher = try ContextManager(configuration: configuration, entities: S.shapeEntities)
            defer { watcher.close() }
            let main = watcher.mainContext
            let (palette, round) = try main.performAndWait { () throws -> (KindPalette, KindCircle) in
                let palette = try #require(try main.fetchAll(KindPalette.self).first)
                #expect(palette.circles.map(\.label) == ["round"])
                return (palette, try #require(palette.circles.first))
            }
            // A new circle in the palette, a change of the circle's own attribute, a plain shape.
            try ControllerTesting.save(writer) { context in
                let palette = try #require(try context.fetchAll(KindPalette.self).first)
                let disc = KindCircle(context: context)
                (disc.label, disc.code, disc.radius, disc.palette) = ("disc", "c2", 1, palette)
                try #require(try KindCircle.first(in: context, where: "code == 'c1'")).radius = 9
                KindShape(context: context).label = "square"
            }
            try ControllerTesting.wait("the palette holds both circles", on: main) {
                palette.circles.map(\.label).sorted() == ["disc", "round"] && round.radius == 9
            }
            try main.performAndWait {
                let shapes = try KindShape.fetch(in: main, sortedBy: [FetchSortDescriptor("label")])
                #expect(shapes.map { "\(type(of: $0)):\($0.label)" } == ["KindCircle:disc", "KindShape:plain", "KindCircle:round", "KindShape:square"])
                #expect((shapes.first as? KindCircle)?.palette === palette)
            }
        }
    }

    @Test func aPrivateSaveReachesTheSameManagersMainContextAndAChildContext() throws {
        try S.withManager { manager in
            try S.seed(manager)
            let main = manager.mainContext
            let held = try main.performAndWait { try main.fetchAll(FeedContent.self) }
            let child = main.newChildContext()
            let childVideo = try child.performAndWait { try #require(try FeedVideo.first(in: child, where: "title == 'Apex'")) }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for content in try context.fetchAll(FeedContent.self) {
                    content.rank += 100
                    if let video = content as? FeedVideo { video.seconds += 1 }
                    if let article = content as? FeedArticle { article.body += "!" }
                }
                try context.save()
            }
            try ControllerTesting.wait("the main context sees every rank", on: main) { held.allSatisfy { $0.rank > 100 } }
            main.performAndWait {
                #expect(held.compactMap { ($0 as? FeedArticle)?.body }.sorted() == ["alpha body!", "beta body!"])
                #expect(held.compactMap { ($0 as? FeedVideo)?.seconds }.sorted() == [61, 91])
            }
            // A child context of the main context reads through its parent.
            try child.performAndWait {
                try child.refresh(childVideo, mergeChanges: false)
                #expect(childVideo.seconds == 61)
                #expect(S.kinds(try child.fetchAll(FeedContent.self).sorted { $0.title < $1.title }) == [
                    "Article:Alpha", "Video:Apex", "Article:Beta", "Video:Bravo",
                ])
            }
        }
    }
}
