import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private typealias T = ControllerTesting

/// SQKDataKit's `filterReturnedObjectsBlock` and `deleteObjects` on a controller.
@Suite("Controller filter block and deleteObjects()")
struct ControllerFilterTests {
    @Test func theFilterDecidesWhatShowsAtFetchAndThroughChanges() throws {
        try ExampleSchema.withManager { manager in
            try T.insertUsers(manager, [("u1", 1), ("u2", 2), ("u3", 3), ("u4", 4)])
            let main = manager.mainContext
            main.performAndWait {}
            let controller = ManagedObjectController(
                fetchRequest: FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")]), context: main)
            controller.filter = { ($0.age ?? 1) % 2 == 0 }
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            #expect(T.userIDs(controller) == ["u2", "u4"])
            // u2 turns odd (leaves), u3 turns even (enters), a new even user enters.
            try T.updateUsers(manager, ["u2", "u3"]) { user in user.age = (user.age ?? 0) + 1 }
            try T.wait("the update arrives", on: main) { recorder.changeSets.count == 2 }
            #expect(T.userIDs(controller) == ["u3", "u4"])
            try T.insertUsers(manager, [("u5", 6), ("u6", 7)])
            try T.wait("the insert arrives", on: main) { recorder.changeSets.count == 3 }
            #expect(T.userIDs(controller) == ["u3", "u4", "u5"])
        }
    }

    @Test func deleteObjectsDeletesWhatTheControllerShows() throws {
        try ExampleSchema.withManager { manager in
            try T.insertUsers(manager, [("a1", 10), ("a2", 20), ("b1", 30)])
            let main = manager.mainContext
            main.performAndWait {}
            let controller = ManagedObjectController(
                fetchRequest: try FetchRequest<User>(format: "userID BEGINSWITH 'a'"), context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { () throws in
                try controller.performFetch()
                #expect(controller.deleteObjects() == 2)
                try main.save()
            }
            try T.wait("the deletion shows", on: main) { controller.objects.isEmpty }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 1)
        }
    }
}
