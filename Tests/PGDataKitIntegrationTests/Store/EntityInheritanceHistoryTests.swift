import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The durable history of an entity hierarchy (issue 48): records list the changes of
/// both kinds under the root's name, and their object IDs resolve to the right classes.
@Suite("Entity inheritance: durable history")
struct EntityInheritanceHistoryTests {
    typealias S = InheritanceSchema

    @Test func recordsListBothKindsAndTheirIDsResolveToTheirClasses() throws {
        try S.withManager { manager in
            let coordinator = manager.coordinator
            let start = try coordinator.currentHistoryToken()
            try S.seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let byTitle = Dictionary(uniqueKeysWithValues: try context.fetchAll(FeedContent.self).map { ($0.title, $0) })
                try #require(byTitle["Alpha"] as? FeedArticle).body = "changed"
                try #require(byTitle["Apex"] as? FeedVideo).seconds = 61
                try #require(byTitle["Beta"]).delete()
                try #require(byTitle["Bravo"]).delete()
                try context.save()
            }
            let page = try coordinator.history(after: start, limit: 100)
            #expect(page.records.count == 2 && !page.hasMore)
            let (seeded, edited) = (try #require(page.records.first), try #require(page.records.last))
            #expect(seeded.changes.inserted.count == 6 && seeded.changes.updated.isEmpty)
            #expect(Set(seeded.changes.inserted.map(\.entityName)) == ["Content", "Folder"])
            #expect(edited.changes.updated.count == 2 && edited.changes.deleted.count == 2 && edited.changes.inserted.isEmpty)
            #expect(Set(edited.changes.updated.union(edited.changes.deleted).map(\.entityName)) == ["Content"])
            // The records name each object's kind too.
            #expect(seeded.changes.inserted.map { seeded.changes.entityName(of: $0) }.sorted() == [
                "Article", "Article", "Folder", "Folder", "Video", "Video",
            ])
            #expect(edited.changes.updated.map { edited.changes.entityName(of: $0) }.sorted() == ["Article", "Video"])
            #expect(edited.changes.deleted.map { edited.changes.entityName(of: $0) }.sorted() == ["Article", "Video"])

            // Another context resolves the IDs: the inserted ones still stored and the
            // updated ones as their classes, with what the save changed; deleted ones are gone.
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let stored = seeded.changes.inserted.filter { $0.entityName == "Content" }.compactMap { id in
                    try? reader.object(with: id) as? FeedContent
                }
                #expect(S.kinds(stored.sorted { $0.title < $1.title }) == ["Article:Alpha", "Video:Apex"])
                let updated = try edited.changes.updated.map { try #require(try reader.object(with: $0) as? FeedContent) }
                #expect(S.kinds(updated.sorted { $0.title < $1.title }) == ["Article:Alpha", "Video:Apex"])
                #expect(updated.compactMap { ($0 as? FeedArticle)?.body } == ["changed"])
                #expect(updated.compactMap { ($0 as? FeedVideo)?.seconds } == [61])
                for id in edited.changes.updated {
                    let keys = edited.changes.changedKeys[id] ?? []
                    #expect(keys == ["body"] || keys == ["seconds"], "\(keys)")
                }
                for id in edited.changes.deleted {
                    #expect(throws: (any Error).self) { try reader.existingObject(with: id) }
                }
            }
        }
    }

    @Test func aCoordinatorWithoutEntitiesReadsTheRootsName() throws {
        try S.withDatabase { configuration in
            let feeder = try StoreCoordinator(model: try Model(entities: []), configuration: configuration)
            defer { feeder.close() }
            let start = try feeder.currentHistoryToken()
            let manager = try ContextManager(configuration: configuration, entities: S.entities)
            defer { manager.close() }
            try S.seed(manager)
            let page = try feeder.history(after: start, limit: 10)
            let record = try #require(page.records.first)
            let keys = record.changes.inserted.filter { $0.entityName == "Content" }.compactMap(\.primaryKey).sorted()
            #expect(keys.count == 4)
            let kinds = record.changes.inserted.filter { $0.entityName == "Content" }.map { record.changes.entityName(of: $0) }
            #expect(kinds.sorted() == ["Article", "Article", "Video", "Video"])
            let stored = try manager.coordinator.pool.withConnection { connection in
                try connection.query("SELECT id FROM contents ORDER BY id").map { try $0.decode(Int64.self, at: 0) }
            }
            #expect(keys == stored)
        }
    }
}
