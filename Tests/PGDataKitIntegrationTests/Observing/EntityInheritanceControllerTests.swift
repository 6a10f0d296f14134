import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Object controllers over an entity hierarchy (issue 48): one over the root sees inserts,
/// updates, moves and deletes of both kinds, from its own process's contexts and from
/// another manager; one over a sub-entity ignores the other kind. Data:
/// `InheritanceSchema.seed` (by rank: Beta 1, Apex 2, Alpha 3, Bravo 4).
@Suite("Entity inheritance: object controllers")
struct EntityInheritanceControllerTests {
    typealias S = InheritanceSchema
    typealias T = ControllerTesting

    /// A fetched controller of `request` over the main context, with a recorder.
    private func controller<Object: ManagedObject>(
        _ request: FetchRequest<Object>, _ manager: ContextManager
    ) throws -> (ManagedObjectController<Object>, ControllerRecorder<Object>) {
        let controller = ManagedObjectController(fetchRequest: request, context: manager.mainContext)
        let recorder = ControllerRecorder<Object>()
        recorder.attach(to: controller)
        try manager.mainContext.performAndWait { try controller.performFetch() }
        return (controller, recorder)
    }

    /// Waits for the recorder's `count`-th change set and returns it, after checking that
    /// it is the only new one and that the controller equals a fresh fetch.
    private func changeSet<Object: ManagedObject>(
        _ count: Int, _ controller: ManagedObjectController<Object>, _ recorder: ControllerRecorder<Object>
    ) throws -> ControllerChanges {
        let main = controller.context
        try T.wait("change set \(count) arrives", on: main) { recorder.changeSets.count >= count }
        let changes = main.performAndWait { recorder.changeSets[count - 1] }
        #expect(main.performAndWait { recorder.changeSets.count } == count, "one change set per save")
        #expect(main.performAndWait { recorder.errors } == [])
        let request = try #require(controller.fetchRequest)
        #expect(main.performAndWait { controller.objects.map(\.objectID) } == (try T.freshIDs(request, in: main)))
        return changes
    }

    /// The controller's objects as `Kind:title` (see `InheritanceSchema.kinds`).
    private func kinds<Object: FeedContent>(_ controller: ManagedObjectController<Object>) -> [String] {
        controller.context.performAndWait { S.kinds(controller.objects) }
    }

    /// Saves in a new private context of `manager`, with the contents by title.
    private func save(_ manager: ContextManager, _ body: ([String: FeedContent], ManagedObjectContext) throws -> Void) throws {
        try T.save(manager) { context in
            try body(Dictionary(uniqueKeysWithValues: try context.fetchAll(FeedContent.self).map { ($0.title, $0) }), context)
        }
    }

    @Test func aControllerOverTheRootFollowsBothKindsSavedInItsProcess() throws {
        try S.withManager { manager in
            try S.seed(manager)
            let (controller, recorder) = try controller(
                FetchRequest<FeedContent>(sortDescriptors: [FetchSortDescriptor("rank")]), manager)
            #expect(kinds(controller) == ["Article:Beta", "Video:Apex", "Article:Alpha", "Video:Bravo"])

            try save(manager) { _, context in
                S.article("Gamma", rank: 0, slug: "gamma", folder: nil, in: context)
                S.video("Clip", rank: 9, seconds: 3, folder: nil, in: context)
            }
            var changes = try changeSet(2, controller, recorder)
            #expect(changes.inserted == [0, 5] && changes.deleted.isEmpty && changes.updated.isEmpty)
            #expect(kinds(controller) == ["Article:Gamma", "Article:Beta", "Video:Apex", "Article:Alpha", "Video:Bravo", "Video:Clip"])

            // Changes of the sub-entities' own attributes are updates in place.
            try save(manager) { contents, _ in
                try #require(contents["Apex"] as? FeedVideo).seconds = 61
                try #require(contents["Alpha"] as? FeedArticle).body = "changed"
            }
            changes = try changeSet(3, controller, recorder)
            #expect(changes.updated == [2, 3] && changes.moved.isEmpty && changes.inserted.isEmpty)
            #expect(controller.context.performAndWait { (controller.objects[2] as? FeedVideo)?.seconds } == 61)

            // A sort-key change of a video is a move.
            try save(manager) { contents, _ in try #require(contents["Bravo"]).rank = -1 }
            changes = try changeSet(4, controller, recorder)
            #expect(changes.moved == [ControllerMove(from: 4, to: 0)])
            #expect(kinds(controller) == ["Video:Bravo", "Article:Gamma", "Article:Beta", "Video:Apex", "Article:Alpha", "Video:Clip"])

            // Deletes of both kinds leave (old indexes).
            try save(manager) { contents, _ in
                try #require(contents["Gamma"]).delete()
                try #require(contents["Clip"]).delete()
            }
            changes = try changeSet(5, controller, recorder)
            #expect(changes.deleted == [1, 5] && changes.inserted.isEmpty)
            #expect(kinds(controller) == ["Video:Bravo", "Article:Beta", "Video:Apex", "Article:Alpha"])
        }
    }

    @Test func aControllerOverTheRootWithAPredicateFollowsSavesOfAnotherManager() throws {
        try S.withDatabase { configuration in
            let manager = try ContextManager(configuration: configuration, entities: S.entities)
            defer { manager.close() }
            let other = try ContextManager(configuration: configuration, entities: S.entities)
            defer { other.close() }
            try S.seed(manager)
            let (controller, recorder) = try controller(
                FetchRequest<FeedContent>(
                    predicate: try FetchPredicate(format: "rank >= 2"), sortDescriptors: [FetchSortDescriptor("rank")]), manager)
            #expect(kinds(controller) == ["Video:Apex", "Article:Alpha", "Video:Bravo"])

            // An article starts matching, a video is inserted, a video stops matching.
            try save(other) { contents, context in
                try #require(contents["Beta"]).rank = 10
                S.video("Clip", rank: 3, seconds: 3, folder: nil, in: context)
                try #require(contents["Apex"]).rank = 0
            }
            var changes = try changeSet(2, controller, recorder)
            #expect(changes.deleted == [0] && changes.inserted == [1, 3])
            #expect(kinds(controller) == ["Article:Alpha", "Video:Clip", "Video:Bravo", "Article:Beta"])

            // Deletes of both kinds from the other manager.
            try save(other) { contents, _ in
                try #require(contents["Alpha"]).delete()
                try #require(contents["Bravo"]).delete()
            }
            changes = try changeSet(3, controller, recorder)
            #expect(changes.deleted == [0, 2] && changes.inserted.isEmpty)
            #expect(kinds(controller) == ["Video:Clip", "Article:Beta"])
        }
    }

    @Test func aControllerOverASubEntityIgnoresTheOtherKind() throws {
        try S.withDatabase { configuration in
            let manager = try ContextManager(configuration: configuration, entities: S.entities)
            defer { manager.close() }
            let other = try ContextManager(configuration: configuration, entities: S.entities)
            defer { other.close() }
            try S.seed(manager)
            // Every content matches the predicate; only articles belong.
            let (controller, recorder) = try controller(
                FetchRequest<FeedArticle>(
                    predicate: try FetchPredicate(format: "rank > 0"), sortDescriptors: [FetchSortDescriptor("title")]),
                manager)
            #expect(kinds(controller) == ["Article:Alpha", "Article:Beta"])

            // Saves of videos only (here and in the other manager), then of an article.
            try save(manager) { contents, context in
                S.video("Abyss", rank: 1, seconds: 1, folder: nil, in: context)
                try #require(contents["Apex"]).title = "Aaa"
            }
            try save(other) { contents, _ in try #require(contents["Bravo"]).delete() }
            try save(other) { _, context in S.article("Able", rank: 1, slug: "able", folder: nil, in: context) }
            let changes = try changeSet(2, controller, recorder)
            #expect(changes.inserted == [0] && changes.deleted.isEmpty && changes.updated.isEmpty)
            #expect(kinds(controller) == ["Article:Able", "Article:Alpha", "Article:Beta"])
            // Nothing came for the videos' saves, before or after.
            usleep(300_000)
            #expect(controller.context.performAndWait { recorder.changeSets.count } == 2)
        }
    }
}
