import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The README's "Observing" examples compile and run: each Swift block of that section
/// appears below, line for line, in `runTheExamples`.
@Suite("README: Observing examples")
struct ObservingReadmeTests {
    @Test func everySwiftBlockOfTheSectionIsInThisFile() throws {
        let readme = try String(contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "\n## Observing\n"))
        let end = readme.range(of: "\n## ", range: start.upperBound..<readme.endIndex)?.lowerBound ?? readme.endIndex
        let section = readme[start.upperBound..<end]
        let blocks = section.components(separatedBy: "```swift\n").dropFirst().compactMap {
            $0.components(separatedBy: "```").first
        }
        #expect(blocks.count == 4)
        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        let sourceLines = source.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for block in blocks {
            let lines = block.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            let found = sourceLines.indices.contains { index in
                index + lines.count <= sourceLines.count && Array(sourceLines[index..<(index + lines.count)]) == lines
            }
            #expect(found, "README block not in this file:\n\(block)")
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

        // Not in the README: a save reaches them, then everything ends.
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
