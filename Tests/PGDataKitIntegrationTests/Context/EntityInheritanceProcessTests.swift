import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Entity inheritance across processes (issue 48): saves of articles and videos reach
/// another OS process (`pgdatakit-test-helper content-watch`), whose main context holds
/// the hierarchy's objects, refreshes them in place, resolves new ones to their classes
/// and forgets deleted ones.
@Suite("Entity inheritance: merges in another process", .heavy)
struct EntityInheritanceProcessTests {
    typealias S = InheritanceSchema

    /// Waits until the watcher's last `prefix` line is `expected`.
    private func waitForLine(_ watcher: HelperProcess, _ prefix: String, _ expected: String) throws {
        try watcher.waitUntil("the watcher prints \(prefix)\(expected)") { lines in
            lines.last { $0.hasPrefix(prefix) } == prefix + expected
        }
    }

    @Test func savesOfBothKindsReachAnotherProcess() throws {
        try S.withDatabase { configuration in
            let manager = try ContextManager(configuration: configuration, entities: S.entities)
            defer { manager.close() }
            try S.seed(manager)
            let watcher = try HelperProcess.start("content-watch", configuration)
            defer { watcher.stop() }
            try watcher.waitUntil("the watcher is ready") { $0.contains { $0.hasPrefix("ready ") } }
            try waitForLine(
                watcher, "contents ",
                "Article:Alpha;rank=3;body=alpha body;slug=alpha;folder=inbox | Video:Apex;rank=2;seconds=60;folder=inbox"
                    + " | Article:Beta;rank=1;body=beta body;slug=beta;folder=archive | Video:Bravo;rank=4;seconds=90;folder=-")
            try waitForLine(watcher, "folders ", "archive=Beta;inbox=Alpha,Apex")

            // Inserts of both kinds, and updates of both kinds' own and inherited attributes.
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let byTitle = Dictionary(uniqueKeysWithValues: try context.fetchAll(FeedContent.self).map { ($0.title, $0) })
                let alpha = try #require(byTitle["Alpha"] as? FeedArticle)
                alpha.body = "merged"
                alpha.rank = 30
                let apex = try #require(byTitle["Apex"] as? FeedVideo)
                apex.seconds = 61
                apex.folder = nil
                let inbox = try #require(alpha.folder)
                S.article("Gamma", rank: 5, slug: "gamma", folder: inbox, in: context)
                S.video("Clip", rank: 6, seconds: 7, folder: inbox, in: context)
                try context.save()
            }
            try waitForLine(
                watcher, "contents ",
                "Article:Alpha;rank=30;body=merged;slug=alpha;folder=inbox | Video:Apex;rank=2;seconds=61;folder=-"
                    + " | Article:Beta;rank=1;body=beta body;slug=beta;folder=archive | Video:Bravo;rank=4;seconds=90;folder=-"
                    + " | Video:Clip;rank=6;seconds=7;folder=inbox | Article:Gamma;rank=5;body=gamma body;slug=gamma;folder=inbox")
            try waitForLine(watcher, "folders ", "archive=Beta;inbox=Alpha,Clip,Gamma")

            // Deletes of both kinds.
            try context.performAndWait {
                for title in ["Beta", "Clip"] {
                    try #require(try FeedContent.first(in: context, where: "title == %@", title)).delete()
                }
                try context.save()
            }
            try waitForLine(
                watcher, "contents ",
                "Article:Alpha;rank=30;body=merged;slug=alpha;folder=inbox | Video:Apex;rank=2;seconds=61;folder=-"
                    + " | Video:Bravo;rank=4;seconds=90;folder=-"
                    + " | Article:Gamma;rank=5;body=gamma body;slug=gamma;folder=inbox")
            try waitForLine(watcher, "folders ", "archive=;inbox=Alpha,Gamma")
            #expect(!watcher.lines.contains { $0.hasPrefix("error ") }, "\(watcher.lines.filter { $0.hasPrefix("error ") })")
        }
    }

    @Test func aControllerOverTheRootFollowsSavesOfAnotherProcess() throws {
        try S.withDatabase { configuration in
            let manager = try ContextManager(configuration: configuration, entities: S.entities)
            defer { manager.close() }
            try S.seed(manager)
            let main = manager.mainContext
            let controller = ManagedObjectController(
                fetchRequest: FetchRequest<FeedContent>(sortDescriptors: [FetchSortDescriptor("rank")]), context: main)
            let recorder = ControllerRecorder<FeedContent>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            let before = main.performAndWait { controller.objects }
            #expect(main.performAndWait { S.kinds(before) } == ["Article:Beta", "Video:Apex", "Article:Alpha", "Video:Bravo"])

            let writer = try HelperProcess.start(
                "content-save", configuration,
                ["article", "Gamma", "0", "gamma", "video", "Clip", "9", "3", "rank", "Bravo", "-1", "delete", "Apex"])
            let outcome = try writer.waitForExit()
            #expect(outcome.status == 0 && outcome.output == "saved\n", "\(outcome.output) \(outcome.error)")
            try ControllerTesting.wait("the other process's save arrives", on: main) { recorder.changeSets.count >= 2 }
            main.performAndWait {
                #expect(recorder.changeSets.count == 2 && recorder.errors.isEmpty, "\(recorder.errors)")
                let changes = recorder.changeSets[1]
                #expect(changes.deleted == [1] && changes.inserted == [1, 4] && changes.moved == [ControllerMove(from: 3, to: 0)])
                #expect(S.kinds(controller.objects) == ["Video:Bravo", "Article:Gamma", "Article:Beta", "Article:Alpha", "Video:Clip"])
                #expect((controller.objects.last as? FeedVideo)?.seconds == 3)
                #expect((controller.objects[1] as? FeedArticle)?.slug == "gamma")
                // The objects the controller held are the same instances, refreshed.
                #expect(controller.objects[0] === before[3] && before[1].isDeleted)
            }
        }
    }
}
