import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Records what a controller reports — delegate calls and closure calls in the order they
/// came, every change set, and whether each call ran on the context's queue. Used on the
/// context's queue only (the callbacks run there; the tests read it in `performAndWait`).
final class ControllerRecorder<T: ManagedObject>: ManagedObjectControllerDelegate, @unchecked Sendable {
    typealias Object = T

    var calls: [String] = []
    var changeSets: [ControllerChanges] = []
    var errors: [String] = []
    var offQueueCalls = 0
    /// The controller's object IDs after each change set.
    var snapshots: [[ObjectID]] = []

    /// Becomes the controller's delegate and sets its closures.
    func attach(to controller: ManagedObjectController<T>) {
        controller.delegate = self
        controller.onFetched = { [unowned self] controller, indexes in record(controller, "closure fetched", indexes) }
        controller.onUpdated = { [unowned self] controller, indexes in record(controller, "closure updated", indexes) }
        controller.onInserted = { [unowned self] controller, indexes in record(controller, "closure inserted", indexes) }
        controller.onDeleted = { [unowned self] controller, indexes in record(controller, "closure deleted", indexes) }
        controller.onChange = { [unowned self] controller, changes in
            if !controller.context.isOnQueue { offQueueCalls += 1 }
            calls.append("closure change")
            changeSets.append(changes)
            snapshots.append(controller.objects.map(\.objectID))
        }
        controller.onError = { [unowned self] _, error in errors.append("\(error)") }
    }

    private func record(_ controller: ManagedObjectController<T>, _ name: String, _ indexes: IndexSet) {
        if !controller.context.isOnQueue { offQueueCalls += 1 }
        calls.append("\(name) \(Array(indexes))")
    }

    func controller(_ controller: ManagedObjectController<T>, didFetchObjectsAt indexes: IndexSet) {
        record(controller, "delegate fetched", indexes)
    }
    func controller(_ controller: ManagedObjectController<T>, didUpdateObjectsAt indexes: IndexSet) {
        record(controller, "delegate updated", indexes)
    }
    func controller(_ controller: ManagedObjectController<T>, didInsertObjectsAt indexes: IndexSet) {
        record(controller, "delegate inserted", indexes)
    }
    func controller(_ controller: ManagedObjectController<T>, didDeleteObjectsAt indexes: IndexSet) {
        record(controller, "delegate deleted", indexes)
    }
    func controller(_ controller: ManagedObjectController<T>, didChange changes: ControllerChanges) {
        calls.append("delegate change")
    }
}

enum ControllerTesting {
    /// Saves in a new private context of `manager` (merged into the main context after
    /// commit).
    static func save(_ manager: ContextManager, _ body: (ManagedObjectContext) throws -> Void) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            try body(context)
            try context.save()
        }
    }

    /// Inserts users with these ids and ages (name = "name-<id>") in one save.
    static func insertUsers(_ manager: ContextManager, _ users: [(String, Int?)]) throws {
        try save(manager) { context in
            for (userID, age) in users {
                let user = User(context: context)
                user.userID = userID
                user.name = "name-\(userID)"
                user.age = age
            }
        }
    }

    /// Changes users, found by user id, in one save.
    static func updateUsers(_ manager: ContextManager, _ userIDs: [String], _ change: (User) -> Void) throws {
        try save(manager) { context in
            let users = try User.fetch(in: context, where: "userID IN %@", userIDs)
            #expect(users.count == userIDs.count)
            users.forEach(change)
        }
    }

    /// Waits (polling the context's queue) until `condition` holds there.
    static func wait(
        _ what: String, on context: ManagedObjectContext, timeout: Duration = patience, _ condition: () throws -> Bool
    ) throws {
        let start = ContinuousClock.now
        while true {
            if try context.performAndWait(condition) { return }
            if start.duration(to: .now) > timeout { throw TestFailure("timed out after \(timeout) waiting until \(what)") }
            usleep(2_000)
        }
    }

    /// The IDs a fresh fetch of the request returns.
    static func freshIDs<T: ManagedObject>(_ request: FetchRequest<T>, in context: ManagedObjectContext) throws -> [ObjectID] {
        try context.performAndWait { try context.fetch(request).map(\.objectID) }
    }

    /// The user ids of a controller's objects, in order.
    static func userIDs(_ controller: ManagedObjectController<User>) -> [String] {
        controller.context.performAndWait { controller.objects.map(\.userID) }
    }
}
