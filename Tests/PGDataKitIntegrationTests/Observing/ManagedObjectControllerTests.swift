import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Object controllers over a manager's main context, with saves from private contexts of
/// the same process (other processes: `ControllerProcessTests`).
@Suite("Object controllers")
struct ManagedObjectControllerTests {
    typealias T = ControllerTesting

    /// A controller of users aged 30 or more, by age, with a recorder attached, fetched.
    func adults(_ manager: ContextManager) throws -> (ManagedObjectController<User>, ControllerRecorder<User>, FetchRequest<User>) {
        let request = FetchRequest<User>(
            predicate: try FetchPredicate(format: "age >= 30"), sortDescriptors: [FetchSortDescriptor("age")])
        let controller = ManagedObjectController(fetchRequest: request, context: manager.mainContext)
        let recorder = ControllerRecorder<User>()
        recorder.attach(to: controller)
        try manager.mainContext.performAndWait { try controller.performFetch() }
        return (controller, recorder, request)
    }

    /// Waits for the recorder's `count`-th change set and returns it, after checking that
    /// the controller equals a fresh fetch.
    func changeSet(
        _ count: Int, _ controller: ManagedObjectController<User>, _ recorder: ControllerRecorder<User>,
        _ request: FetchRequest<User>
    ) throws -> ControllerChanges {
        let main = controller.context
        try T.wait("change set \(count) arrives", on: main) { recorder.changeSets.count >= count }
        let changes = main.performAndWait { recorder.changeSets[count - 1] }
        #expect(main.performAndWait { recorder.changeSets.count } == count, "one change set per save")
        #expect(main.performAndWait { controller.objects.map(\.objectID) } == (try T.freshIDs(request, in: main)))
        return changes
    }

    @Test func membershipFollowsInsertsUpdatesDeletesAndDeleteAllOfPrivateContexts() throws {
        try ExampleSchema.withManager { manager in
            try T.insertUsers(manager, [("a", 20), ("b", 30), ("c", 40), ("d", 50)])
            let (controller, recorder, request) = try adults(manager)
            let main = manager.mainContext
            #expect(T.userIDs(controller) == ["b", "c", "d"])
            #expect(main.performAndWait { recorder.calls } == [
                "delegate fetched [0, 1, 2]", "closure fetched [0, 1, 2]", "delegate change", "closure change",
            ])

            // An insert that matches enters at its sorted index; one that does not stays out.
            try T.insertUsers(manager, [("e", 35), ("f", 10)])
            var changes = try changeSet(2, controller, recorder, request)
            #expect(changes.inserted == [1] && changes.deleted.isEmpty && changes.updated.isEmpty)
            #expect(T.userIDs(controller) == ["b", "e", "c", "d"])

            // An update that makes an object match inserts it at its sorted index.
            try T.updateUsers(manager, ["a"]) { $0.age = 45 }
            changes = try changeSet(3, controller, recorder, request)
            #expect(changes.inserted == [3] && changes.deleted.isEmpty)
            #expect(T.userIDs(controller) == ["b", "e", "c", "a", "d"])

            // One that makes an object stop matching removes it (old index).
            try T.updateUsers(manager, ["c"]) { $0.age = 25 }
            changes = try changeSet(4, controller, recorder, request)
            #expect(changes.deleted == [2] && changes.inserted.isEmpty && changes.updated.isEmpty)
            #expect(T.userIDs(controller) == ["b", "e", "a", "d"])

            // A sort-key change is a move (and an update at the new index).
            try T.updateUsers(manager, ["b"]) { $0.age = 60 }
            changes = try changeSet(5, controller, recorder, request)
            #expect(changes.moved == [ControllerMove(from: 0, to: 3)])
            #expect(changes.updated == [3] && changes.inserted.isEmpty && changes.deleted.isEmpty)
            #expect(T.userIDs(controller) == ["e", "a", "d", "b"])

            // A change of another attribute is an update in place.
            try T.updateUsers(manager, ["e"]) { $0.name = "Eve" }
            changes = try changeSet(6, controller, recorder, request)
            #expect(changes.updated == [0] && changes.moved.isEmpty)
            #expect(main.performAndWait { controller.objects[0].name } == "Eve")

            // A deleted object leaves.
            try T.save(manager) { context in try #require(try User.first(in: context, where: "userID == 'd'")).delete() }
            changes = try changeSet(7, controller, recorder, request)
            #expect(changes.deleted == [2] && changes.deletedObjectIDs.count == 1)
            #expect(T.userIDs(controller) == ["e", "a", "b"])

            // deleteAll (one DELETE statement) removes what it deleted.
            let context = manager.newPrivateContext()
            let removed = try context.performAndWait { try User.deleteAll(in: context, where: "age > 40") }
            #expect(removed == 2)
            changes = try changeSet(8, controller, recorder, request)
            #expect(changes.deleted == [1, 2] && changes.inserted.isEmpty)
            #expect(T.userIDs(controller) == ["e"])

            // Every callback ran on the main context's queue, the delegate before the closure.
            #expect(main.performAndWait { recorder.offQueueCalls } == 0)
            let calls = main.performAndWait { recorder.calls }
            #expect(calls.suffix(4) == ["delegate deleted [1, 2]", "closure deleted [1, 2]", "delegate change", "closure change"])
            withExtendedLifetime(controller) {}
        }
    }

    /// A manager here and a writer — another coordinator on the same database, so its
    /// statements do not count here and its saves arrive through the change log, as
    /// another process's would.
    func withManagerAndWriter(_ body: (ContextManager, ContextManager) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let writer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, automaticallyMergesRemoteChanges: false)
            defer { writer.close() }
            try body(manager, writer)
        }
    }

    @Test func oneMembershipStatementPerChangeSetSharedByTheControllersOfAnEntity() throws {
        try withManagerAndWriter { manager, writer in
            try T.insertUsers(manager, (0..<20).map { ("u\($0)", $0 * 5) })
            let main = manager.mainContext
            main.performAndWait {}  // the seed's merge is done
            let (controller, recorder, request) = try adults(manager)
            var statements = manager.coordinator.statementCount

            // An update of a shown object: the merge refreshes it (one query) and the
            // controller asks which changed rows match now (one query).
            try T.updateUsers(writer, ["u10"]) { $0.age = 3 }
            try T.wait("the update arrives", on: main) { recorder.changeSets.count == 2 }
            #expect(manager.coordinator.statementCount - statements == 2)
            _ = try changeSet(2, controller, recorder, request)

            // An insert: nothing to refresh, one membership statement.
            statements = manager.coordinator.statementCount
            try T.insertUsers(writer, [("u-new", 33)])
            try T.wait("the insert arrives", on: main) { recorder.changeSets.count == 3 }
            #expect(manager.coordinator.statementCount - statements == 1)
            #expect(try changeSet(3, controller, recorder, request).inserted.count == 1)

            // A change no predicate key sees: the merge's refresh only.
            statements = manager.coordinator.statementCount
            try T.updateUsers(writer, ["u12"]) { $0.name = "renamed" }
            try T.wait("the rename arrives", on: main) { recorder.changeSets.count == 4 }
            #expect(manager.coordinator.statementCount - statements == 1)
            #expect(try changeSet(4, controller, recorder, request).updated.count == 1)

            // Three more controllers of users: still one membership statement for all four.
            var others: [(ManagedObjectController<User>, ControllerRecorder<User>)] = []
            for minimum in [0, 50, 90] {
                let other = ManagedObjectController(
                    fetchRequest: FetchRequest<User>(
                        predicate: try FetchPredicate(format: "age >= %d", minimum),
                        sortDescriptors: [FetchSortDescriptor("name")]),
                    context: main)
                let otherRecorder = ControllerRecorder<User>()
                otherRecorder.attach(to: other)
                try main.performAndWait { try other.performFetch() }
                others.append((other, otherRecorder))
            }
            statements = manager.coordinator.statementCount
            try T.updateUsers(writer, ["u1"]) { $0.age = 95 }
            try T.wait("the update arrives", on: main) {
                recorder.changeSets.count == 5 && others.allSatisfy { $0.1.changeSets.count == 2 }
            }
            #expect(manager.coordinator.statementCount - statements == 2, "one refresh, one membership statement")
            for (position, (other, otherRecorder)) in others.enumerated() {
                let changes = main.performAndWait { otherRecorder.changeSets[1] }
                // u1 (5 → 95) was shown by "age >= 0" already; it enters the other two.
                #expect(changes.inserted.count == (position == 0 ? 0 : 1), "\(changes)")
                #expect(changes.updated.count == (position == 0 ? 1 : 0), "\(changes)")
                let expected = try T.freshIDs(try #require(other.fetchRequest), in: main)
                #expect(main.performAndWait { other.objects.map(\.objectID) } == expected)
            }
            withExtendedLifetime(controller) {}
        }
    }
}
