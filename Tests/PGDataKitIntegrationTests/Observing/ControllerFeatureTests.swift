import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Sections, paging, large changes, pending changes and controllers of given objects.
@Suite("Object controllers: sections, paging, large changes")
struct ControllerFeatureTests {
    typealias T = ControllerTesting

    @Test func sectionsFollowTheSectionKeyWithSectionInsertsAndDeletes() throws {
        try ExampleSchema.withManager { manager in
            try T.insertUsers(manager, [("a", 30), ("b", 30), ("c", 40), ("d", 50)])
            let main = manager.mainContext
            let request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("age"), FetchSortDescriptor("userID")])
            let controller = ManagedObjectController(fetchRequest: request, context: main, sectionNameKeyPath: "age")
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            func sections() -> [String] {
                main.performAndWait { controller.sections.map { "\($0.name):\($0.numberOfObjects)" } }
            }
            #expect(sections() == ["30:2", "40:1", "50:1"])
            #expect(main.performAndWait { controller.object(at: ControllerIndexPath(section: 0, item: 1))?.userID } == "b")
            #expect(main.performAndWait { controller.object(at: ControllerIndexPath(section: 0, item: 2)) } == nil)
            #expect(main.performAndWait { controller.object(at: ControllerIndexPath(section: 7, item: 0)) } == nil)
            #expect(main.performAndWait { controller.indexPath(forObjectAt: 2) } == ControllerIndexPath(section: 1, item: 0))

            // c moves from 40 to 30: section 40 disappears.
            try T.updateUsers(manager, ["c"]) { $0.age = 30 }
            try T.wait("c moved", on: main) { recorder.changeSets.count == 2 }
            var changes = main.performAndWait { recorder.changeSets[1] }
            #expect(sections() == ["30:3", "50:1"])
            #expect(changes.deletedSections == [1] && changes.insertedSections.isEmpty)
            #expect(changes.updatedIndexPaths == [ControllerIndexPath(section: 0, item: 2)])

            // A new user aged 45 makes a new section between them.
            try T.insertUsers(manager, [("e", 45)])
            try T.wait("e entered", on: main) { recorder.changeSets.count == 3 }
            changes = main.performAndWait { recorder.changeSets[2] }
            #expect(sections() == ["30:3", "45:1", "50:1"])
            #expect(changes.insertedSections == [1] && changes.deletedSections.isEmpty)
            #expect(changes.insertedIndexPaths == [ControllerIndexPath(section: 1, item: 0)])

            // Deleting d empties section 50; the old index path names it.
            try T.save(manager) { context in try #require(try User.first(in: context, where: "userID == 'd'")).delete() }
            try T.wait("d left", on: main) { recorder.changeSets.count == 4 }
            changes = main.performAndWait { recorder.changeSets[3] }
            #expect(changes.deletedSections == [2])
            #expect(changes.deletedIndexPaths == [ControllerIndexPath(section: 2, item: 0)])
            #expect(sections() == ["30:3", "45:1"])
        }
    }

    @Test func theSectionKeyMustBeTheFirstSortKey() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            let request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("name")])
            let controller = ManagedObjectController(fetchRequest: request, context: main, sectionNameKeyPath: "age")
            #expect(throws: ManagedObjectControllerError.sectionKeyPathNotSorted(sectionNameKeyPath: "age", firstSortKey: "name")) {
                try main.performAndWait { try controller.performFetch() }
            }
        }
    }

    @Test func pagingGrowsTheWindowByPagesAndKeepsItTrue() throws {
        try ExampleSchema.withManager { manager in
            try T.insertUsers(manager, (0..<10).map { ("p\($0)", $0 * 10) })
            let main = manager.mainContext
            let request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("age")])
            #expect(throws: ManagedObjectControllerError.invalidPageSize(0)) {
                try PagingManagedObjectController(fetchRequest: request, context: main, pageSize: 0)
            }
            let pages = try PagingManagedObjectController(fetchRequest: request, context: main, pageSize: 3)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: pages)
            try main.performAndWait { try pages.performFetch() }
            #expect(T.userIDs(pages) == ["p0", "p1", "p2"])
            #expect(main.performAndWait { pages.fetchLimit == 3 && pages.hasMorePages })

            try main.performAndWait { try pages.loadNextPage() }
            var changes = main.performAndWait { recorder.changeSets[1] }
            #expect(changes.inserted == [3, 4, 5] && changes.deleted.isEmpty)
            #expect(main.performAndWait { pages.fetchLimit } == 6)
            #expect(main.performAndWait { recorder.calls.contains("delegate inserted [3, 4, 5]") })

            // A user sorting inside the window enters; one beyond it does not.
            try T.insertUsers(manager, [("in", 15), ("out", 95)])
            try T.wait("the insert arrives", on: main) { recorder.changeSets.count == 3 }
            changes = main.performAndWait { recorder.changeSets[2] }
            #expect(changes.inserted == [2])
            #expect(T.userIDs(pages) == ["p0", "p1", "in", "p2", "p3", "p4", "p5"])

            // A user moving from beyond the window into it enters; one moving out leaves.
            try T.updateUsers(manager, ["p9", "p0"]) { user in user.age = user.userID == "p9" ? 1 : 99 }
            try T.wait("the update arrives", on: main) { recorder.changeSets.count == 4 }
            changes = main.performAndWait { recorder.changeSets[3] }
            #expect(changes.inserted == [0] && changes.deleted == [0])
            #expect(T.userIDs(pages) == ["p9", "p1", "in", "p2", "p3", "p4", "p5"])

            // The next page reads the first 9 again: p6, p7 follow.
            try main.performAndWait { try pages.loadNextPage() }
            #expect(T.userIDs(pages) == ["p9", "p1", "in", "p2", "p3", "p4", "p5", "p6", "p7"])
            var all = request
            all.fetchLimit = 9
            #expect(main.performAndWait { pages.objects.map(\.objectID) } == (try T.freshIDs(all, in: main)))
            try main.performAndWait { try pages.loadNextPage() }
            try main.performAndWait { try pages.loadNextPage() }
            #expect(main.performAndWait { pages.objects.count == 12 && !pages.hasMorePages })
        }
    }

    @Test func aThousandChangesInOneSaveAreOneLargeChangeAndOneMembershipStatement() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let writer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, automaticallyMergesRemoteChanges: false)
            defer { writer.close() }
            try T.insertUsers(manager, (0..<1000).map { ("m\($0)", 20) })
            let main = manager.mainContext
            main.performAndWait {}
            let request = FetchRequest<User>(
                predicate: try FetchPredicate(format: "age < 50"), sortDescriptors: [FetchSortDescriptor("userID")])
            let controller = ManagedObjectController(fetchRequest: request, context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            #expect(main.performAndWait { recorder.changeSets[0].isLargeChange })  // 1,000 fetched > 100

            // Another coordinator ages every user in one save: half of them stop matching.
            let statements = manager.coordinator.statementCount
            try T.save(writer) { context in
                for user in try User.fetchAll(in: context) {
                    user.age = Int(user.userID.dropFirst()).map { $0 % 2 == 0 ? 60 : 21 }
                }
            }
            try T.wait("the save arrives", on: main) { recorder.changeSets.count == 2 }
            usleep(100_000)
            #expect(manager.coordinator.statementCount - statements == 2, "one refresh, one membership statement")
            let calls = main.performAndWait { recorder.calls }
            #expect(calls.filter { $0 == "delegate change" }.count == 2, "fetch + one change set")
            let changes = main.performAndWait { recorder.changeSets[1] }
            #expect(changes.isLargeChange)
            #expect(changes.deleted.count == 500 && changes.updated.count == 500 && changes.inserted.isEmpty)
            #expect(main.performAndWait { controller.objects.map(\.objectID) } == (try T.freshIDs(request, in: main)))

            // Under the threshold the flag stays off.
            try T.updateUsers(writer, ["m1", "m3"]) { $0.age = 22 }
            try T.wait("the small save arrives", on: main) { recorder.changeSets.count == 3 }
            #expect(main.performAndWait { !recorder.changeSets[2].isLargeChange && recorder.changeSets[2].updated.count == 2 })
        }
    }

    @Test func pendingChangesOfTheContextCountAsInAFetch() throws {
        try ExampleSchema.withManager { manager in
            try T.insertUsers(manager, [("a", 40), ("b", 50)])
            let main = manager.mainContext
            main.performAndWait {}
            var request = FetchRequest<User>(
                predicate: try FetchPredicate(format: "age >= 30"), sortDescriptors: [FetchSortDescriptor("age")])
            let withPending = ManagedObjectController(fetchRequest: request, context: main)
            request.includesPendingChanges = false
            let storedOnly = ManagedObjectController(fetchRequest: request, context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: withPending)
            try main.performAndWait {
                let unsaved = User(context: main)
                unsaved.userID = "unsaved"
                unsaved.age = 45
                try #require(try User.first(in: main, where: "userID == 'b'")).age = 10  // unsaved: b no longer matches
                try withPending.performFetch()
                try storedOnly.performFetch()
            }
            #expect(T.userIDs(withPending) == ["a", "unsaved"])
            #expect(T.userIDs(storedOnly) == ["a", "b"])

            // Another context changes a and b: the unsaved edit of b still decides for the
            // controller that includes pending changes.
            try T.updateUsers(manager, ["a", "b"]) { $0.name = "changed elsewhere" }
            try T.wait("the merge arrives", on: main) { recorder.changeSets.count == 2 }
            #expect(T.userIDs(withPending) == ["a", "unsaved"])
            #expect(T.userIDs(storedOnly) == ["a", "b"])

            // Saving the main context: the saved objects are updates, b leaves the other.
            try main.performAndWait { try main.save() }
            try T.wait("the save is processed", on: main) { recorder.changeSets.count == 3 }
            #expect(T.userIDs(withPending) == ["a", "unsaved"])
            #expect(T.userIDs(storedOnly) == ["a", "unsaved"])
            #expect(main.performAndWait { withPending.objects.allSatisfy { !$0.objectID.isTemporaryID } })
            // The once-unsaved object is found under its permanent ID.
            #expect(main.performAndWait { withPending.objects.last.flatMap { withPending.index(of: $0) } } == 1)
        }
    }

    @Test func aControllerOfGivenObjectsReportsTheirSavesAndDeletions() throws {
        try ExampleSchema.withManager { manager in
            try T.insertUsers(manager, [("a", 1), ("b", 2), ("c", 3)])
            let main = manager.mainContext
            main.performAndWait {}
            #expect(Self.givenObjectsError([]) == .noObjects)
            let stranger = User()
            #expect(Self.givenObjectsError([stranger]) == .objectOutsideContext(stranger.objectID))
            let controller = try main.performAndWait { () throws -> ManagedObjectController<User> in
                let users = try User.fetch(
                    in: main, where: "userID IN {'c', 'a'}", sortedBy: [FetchSortDescriptor("userID", ascending: false)])
                return try ManagedObjectController(objects: users)
            }
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            #expect(T.userIDs(controller) == ["c", "a"])

            try T.updateUsers(manager, ["a", "b"]) { $0.name = "saved" }
            try T.wait("the update arrives", on: main) { recorder.changeSets.count == 2 }
            #expect(main.performAndWait { recorder.changeSets[1].updated } == [1])

            try T.save(manager) { context in try #require(try User.first(in: context, where: "userID == 'c'")).delete() }
            try T.wait("the delete arrives", on: main) { recorder.changeSets.count == 3 }
            #expect(main.performAndWait { recorder.changeSets[2].deleted } == [0])
            #expect(T.userIDs(controller) == ["a"])

            try T.insertUsers(manager, [("d", 4)])
            main.performAndWait {}
            usleep(50_000)
            #expect(main.performAndWait { recorder.changeSets.count } == 3, "nothing enters a set of given objects")
        }
    }

    /// The error `ManagedObjectController(objects:)` throws for these objects.
    static func givenObjectsError(_ objects: [User]) -> ManagedObjectControllerError? {
        do {
            _ = try ManagedObjectController(objects: objects)
            return nil
        } catch {
            return error as? ManagedObjectControllerError
        }
    }

    @Test(arguments: [
        [FetchSortDescriptor("name")], [FetchSortDescriptor("name", ascending: false)],
        [FetchSortDescriptor("name", caseInsensitive: true), FetchSortDescriptor("age", ascending: false)],
        [FetchSortDescriptor("age"), FetchSortDescriptor("name", caseInsensitive: true, )],
    ])
    func theControllersOrderIsTheDatabasesAndStaysSoThroughChanges(sort: [FetchSortDescriptor]) throws {
        try ExampleSchema.withManager { manager in
            let names: [String?] = [
                nil, "", "a", "A", "Z", "z", "é", "e\u{301}", "e", "ẞ", "ß", "İ", "i", "😀", "ab", "a b", "Ab", "abc",
            ]
            try ControllerTesting.save(manager) { context in
                for (index, name) in names.enumerated() {
                    let user = User(context: context)
                    user.userID = "n\(index)"
                    user.name = name
                    user.age = index % 3 == 0 ? nil : (index % 5) - 2
                }
            }
            let main = manager.mainContext
            main.performAndWait {}
            let request = FetchRequest<User>(sortDescriptors: sort)
            let controller = ManagedObjectController(fetchRequest: request, context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            #expect(main.performAndWait { controller.objects.map(\.objectID) } == (try T.freshIDs(request, in: main)))
            // Renames move objects to where the database sorts them.
            try T.updateUsers(manager, ["n2", "n5", "n9"]) { user in user.name = user.userID == "n2" ? "É" : user.userID == "n5" ? nil : "a" }
            try T.wait("the renames arrive", on: main) { recorder.changeSets.count == 2 }
            #expect(main.performAndWait { controller.objects.map(\.objectID) } == (try T.freshIDs(request, in: main)))
        }
    }
}
