import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// How controllers and object observers end (released, stopped, manager closed), the
/// async stream, and per-object observation.
@Suite("Object controllers: lifetime, streams, object observation")
struct ControllerLifecycleTests {
    typealias T = ControllerTesting

    func everyone() -> FetchRequest<User> {
        FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")])
    }

    @Test(.onItsOwnThread) func aReleasedControllerStopsObservingAndEndsItsStream() async throws {
        try await ExampleSchema.withManagerAsync { manager in
            let main = manager.mainContext
            weak var released: ManagedObjectController<User>?
            var stream: AsyncStream<ControllerChanges>?
            do {
                let controller = ManagedObjectController(fetchRequest: everyone(), context: main)
                stream = controller.changes
                try await main.perform { try controller.performFetch() }
                released = controller
            }
            // `perform` resumes this task from inside the queue's block, which lets go of its
            // closure (and the controller it captured) only when it returns: wait for that.
            let start = ContinuousClock.now
            while released != nil, start.duration(to: .now) < patience { try await Task.sleep(for: .milliseconds(5)) }
            // Required: a controller still held would keep the stream below open for good.
            try #require(released == nil, "nothing else holds a controller: no cycle through the context")
            var received: [ControllerChanges.Kind] = []
            for await changes in try #require(stream) { received.append(changes.kind) }
            #expect(received == [.fetched], "the stream ended when the controller went")
            try T.insertUsers(manager, [("after", 1)])
            try await main.perform {}  // the merge runs with no controller to tell
        }
    }

    @Test(.onItsOwnThread) func theChangeStreamDeliversChangeSetsToAsyncCode() async throws {
        try await ExampleSchema.withManagerAsync { manager in
            let main = manager.mainContext
            let controller = ManagedObjectController(fetchRequest: everyone(), context: main)
            let stream = controller.changes
            let reader = Task(executorPreference: OwnThreadExecutor.current) {
                var seen: [ControllerChanges] = []
                for await changes in stream {
                    seen.append(changes)
                    if seen.count == 3 { break }
                }
                return seen
            }
            try await main.perform { try controller.performFetch() }
            try T.insertUsers(manager, [("s1", 1)])
            try T.insertUsers(manager, [("s0", 2)])
            let seen = await reader.value
            #expect(seen.map(\.kind) == [.fetched, .changed, .changed])
            #expect(seen[1].inserted == [0] && seen[2].inserted == [0])
            #expect(seen[2].insertedObjectIDs.count == 1 && seen[2].objectCount == 2)
        }
    }

    /// As documented on `ManagedObjectController` and in Observing.md: before
    /// `performFetch()` a controller reports nothing (SQKDataKit's follows saves from its
    /// creation); a save made meanwhile is in the fetch, reported as fetched, and saves
    /// after the fetch are reported as changes.
    @Test func aControllerReportsChangesOnlyAfterPerformFetch() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            let controller = ManagedObjectController(fetchRequest: everyone(), context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            // A fetched controller on the same context shows when the save has been merged.
            let witness = ManagedObjectController(fetchRequest: everyone(), context: main)
            try main.performAndWait { try witness.performFetch() }
            try T.insertUsers(manager, [("early", 1)])
            try T.wait("the merge reaches the fetched controller", on: main) { witness.objects.count == 1 }
            main.performAndWait {
                #expect(recorder.calls.isEmpty && recorder.changeSets.isEmpty)
                #expect(controller.objects.isEmpty)
            }
            try main.performAndWait { try controller.performFetch() }
            #expect(T.userIDs(controller) == ["early"])
            #expect(main.performAndWait { recorder.calls } == [
                "delegate fetched [0]", "closure fetched [0]", "delegate change", "closure change",
            ])
            try T.insertUsers(manager, [("late", 2)])
            try T.wait("the save reaches the controller", on: main) { recorder.changeSets.count == 2 }
            #expect(main.performAndWait { recorder.changeSets[1].inserted } == [1])
            #expect(T.userIDs(controller) == ["early", "late"])
        }
    }

    @Test func stopEndsCallbacksAndStreamsAndRefusesFetches() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            let controller = ManagedObjectController(fetchRequest: everyone(), context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            controller.stop()
            #expect(controller.isStopped)
            try T.insertUsers(manager, [("late", 1)])
            main.performAndWait {}
            #expect(main.performAndWait { recorder.changeSets.count } == 1)
            #expect(throws: ManagedObjectControllerError.stopped) { try main.performAndWait { try controller.performFetch() } }
        }
    }

    @Test(.onItsOwnThread) func aControllerOfAClosedManagerStops() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let manager = try ExampleSchema.makeManager(configuration)
        let main = manager.mainContext
        let controller = ManagedObjectController(fetchRequest: everyone(), context: main)
        let stream = controller.changes
        try await main.perform { try controller.performFetch() }
        manager.close()
        var kinds: [ControllerChanges.Kind] = []
        for await changes in stream { kinds.append(changes.kind) }  // ends: the manager closed
        #expect(kinds == [.fetched])
        #expect(controller.isStopped)
        await #expect(throws: ManagedObjectControllerError.stopped) { try await main.perform { try controller.performFetch() } }
        // A controller made after the close is stopped from the start.
        let late = ManagedObjectController(fetchRequest: everyone(), context: main)
        #expect(late.isStopped)
    }

    @Test func aDeletedObjectIsNeverShownAndTouchingItIsAnError() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let writer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, automaticallyMergesRemoteChanges: false)
            defer { writer.close() }
            try T.insertUsers(manager, [("keep", 1), ("gone", 2)])
            let main = manager.mainContext
            main.performAndWait {}
            let controller = ManagedObjectController(fetchRequest: everyone(), context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            let first = main.performAndWait { controller.objects.first }  // "gone" sorts before "keep"
            let held = try #require(first)
            try T.save(writer) { context in try #require(try User.first(in: context, where: "userID == 'gone'")).delete() }
            try T.wait("the delete arrives", on: main) { recorder.changeSets.count == 2 }
            main.performAndWait {
                #expect(controller.objects.map(\.userID) == ["keep"])
                #expect(controller.objects.allSatisfy { !$0.isDeleted })
                #expect(held.isDeleted)
                #expect(throws: ManagedObjectError.objectDeleted(held.objectID)) { try held.setValue("x", forKey: "name") }
                #expect(controller.index(of: held) == nil)
                #expect(recorder.changeSets[1].deletedObjectIDs == [held.objectID])
            }
        }
    }

    @Test func objectObserversHearLocalSavesMergesAndRemoteSavesThenTheDeletion() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let writer = try ContextManager(
                configuration: configuration, entities: ExampleSchema.entities, automaticallyMergesRemoteChanges: false)
            defer { writer.close() }
            try T.insertUsers(manager, [("watched", 1), ("other", 2)])
            let main = manager.mainContext
            main.performAndWait {}
            final class Heard: @unchecked Sendable {
                // Used on the main context's queue only.
                var events: [String] = []
            }
            let heard = Heard()
            let token = try main.performAndWait { () throws -> ObserverToken in
                let user = try #require(try User.first(in: main, where: "userID == 'watched'"))
                return user.observeChanges { keys in
                    heard.events.append(user.isDeleted ? "deleted" : keys.sorted().joined(separator: ","))
                }
            }
            // The main context's own save.
            try main.performAndWait {
                try #require(try User.first(in: main, where: "userID == 'watched'")).name = "local"
                try main.save()
            }
            // A private context's save, merged.
            try T.updateUsers(manager, ["watched"]) { $0.age = 5 }
            // Another coordinator's save, through the change log; and one of another object.
            try T.updateUsers(writer, ["watched"]) { user in
                user.age = 6
                user.name = "remote"
            }
            try T.updateUsers(writer, ["other"]) { $0.age = 7 }
            try T.wait("three changes are heard", on: main) { heard.events.count == 3 }
            // Deletion: called once more, then never again.
            try T.save(writer) { context in try #require(try User.first(in: context, where: "userID == 'watched'")).delete() }
            try T.wait("the deletion is heard", on: main) { heard.events.count == 4 }
            try T.updateUsers(writer, ["other"]) { $0.age = 8 }
            try T.wait("the last merge ran", on: main) {
                (try User.first(in: main, where: "userID == 'other'"))?.age == 8
            }
            #expect(main.performAndWait { heard.events } == ["name", "age", "age,name", "deleted"])

            // A cancelled token hears nothing (registered and cancelled in one block, so
            // no merge runs in between).
            try main.performAndWait {
                let other = try #require(try User.first(in: main, where: "userID == 'other'"))
                other.observeChanges { _ in heard.events.append("other") }.cancel()
            }
            try T.updateUsers(manager, ["other"]) { $0.age = 9 }
            main.performAndWait {}
            #expect(main.performAndWait { heard.events.count } == 4)
            withExtendedLifetime(token) {}
        }
    }
}
