import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The examples of Observing.md compile and run: each Swift block of the article appears
/// below, line for line, in `runTheExamples`.
@Suite("Docs: Observing examples")
struct ObservingReadmeTests {
    @Test func everySwiftBlockOfTheArticleIsInThisFile() throws {
        let file = "\(DocSnippets.catalog)/Observing.md"
        #expect(try DocSnippets.swiftBlocks(in: file).count == 4)
        for block in try DocSnippets.blocksMissing(from: #filePath, in: file) {
            Issue.record("Observing.md block not in this file:\n\(block)")
        }
    }

    @Test(.onItsOwnThread) func theExamplesRun() async throws {
        try await ExampleSchema.withManagerAsync { manager in
            try ControllerTesting.insertUsers(manager, [("u1", 30), ("u2", 12)])
            manager.mainContext.performAndWait {}
            try await runTheExamples(manager)
        }
    }

    func runTheExamples(_ manager: ContextManager) async throws {
        let main = manager.mainContext
        let request = FetchRequest<User>(
            predicate: try FetchPredicate(format: "age >= %d", 18),
            sortDescriptors: [FetchSortDescriptor("age"), FetchSortDescriptor("name")])
        let adults = ManagedObjectController(fetchRequest: request, context: main)
        adults.onFetched = { controller, indexes in print("fetched \(indexes.count) adults") }
        adults.onInserted = { controller, indexes in
            for index in indexes { print("new adult:", controller.objects[index].userID) }
        }
        adults.onUpdated = { _, indexes in print("saved at", Array(indexes)) }    // new indexes
        adults.onDeleted = { _, indexes in print("left from", Array(indexes)) }   // old indexes
        adults.onChange = { controller, changes in
            if changes.isLargeChange { print("reload all \(controller.objects.count)") }
            for move in changes.moved { print("moved \(move.from) → \(move.to)") }
        }
        try main.performAndWait { try adults.performFetch() }

        final class AdultList: ManagedObjectControllerDelegate {
            func controller(_ controller: ManagedObjectController<User>, didInsertObjectsAt indexes: IndexSet) {
                print("inserted at", Array(indexes))
            }
            func controller(_ controller: ManagedObjectController<User>, didChange changes: ControllerChanges) {
                print("\(changes.objectCount) adults")
            }
        }
        let list = AdultList()
        adults.delegate = list   // held weakly; called before the closures

        let watcher = Task {
            for await changes in adults.changes {               // ends when the controller stops
                print(changes.kind, changes.insertedObjectIDs)  // IDs cross queues; objects do not
            }
        }

        let byAge = ManagedObjectController(
            fetchRequest: FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("age"), FetchSortDescriptor("name")]),
            context: main, sectionNameKeyPath: "age")   // the first sort key
        let pages = try PagingManagedObjectController(
            fetchRequest: FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("name")]), context: main, pageSize: 50)
        try main.performAndWait {
            try byAge.performFetch()
            for section in byAge.sections { print(section.name, section.numberOfObjects) }
            try pages.performFetch()                             // the first 50
            if pages.hasMorePages { try pages.loadNextPage() }   // 50 more, reported as inserted
        }

        let (watched, token) = try main.performAndWait { () throws -> (ManagedObjectController<User>, ObserverToken) in
            let ada = try User.insertOrFetch(key: "userID", value: "ada", in: main)
            try main.save()
            let watched = try ManagedObjectController(objects: [ada])   // SQKDataKit's initWithManagedObjects:
            watched.onDeleted = { _, _ in print("Ada was deleted") }
            try watched.performFetch()
            let token = ada.observeChanges { changedKeys in             // RHManagedObject's did-update block
                print(ada.isDeleted ? "Ada is gone" : "Ada changed \(changedKeys.sorted())")
            }
            return (watched, token)
        }
        // keep `watched` and `token` while you observe; token.cancel() ends it

        // Not in the article: a save reaches them, then everything ends.
        try ControllerTesting.insertUsers(manager, [("u3", 40)])
        try ControllerTesting.wait("the adults controller sees u3", on: main) { adults.objects.contains { $0.userID == "u3" } }
        #expect(main.performAndWait { adults.objects.map(\.userID) } == ["u1", "u3"])
        #expect(main.performAndWait { byAge.sections.map(\.name) } == ["", "12", "30", "40"])
        #expect(main.performAndWait { watched.objects.map(\.userID) } == ["ada"])
        adults.stop()
        await watcher.value
        token.cancel()
        withExtendedLifetime((list, pages)) {}
    }
}
