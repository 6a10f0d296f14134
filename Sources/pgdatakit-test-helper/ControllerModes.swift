// Modes of the test helper for the object-controller tests: a process that saves once
// (`controller-save`) and a process that holds a controller and prints every change set
// (`controller-watch`).
import Foundation
import PGDataKit

/// `controller-save URL OP…`: one save in a private context with these operations, in
/// order: `insert ID AGE`, `age ID AGE`, `delete ID`, `age-where FORMAT AGE`; or
/// `delete-all FORMAT` (its own statement, committed at once). Prints `saved`.
func controllerSave(_ manager: ContextManager, _ operations: [String]) {
    let context = manager.newPrivateContext()
    do {
        try context.performAndWait {
            var rest = operations[...]
            func next() -> String {
                guard let value = rest.popFirst() else { fail("missing operand in \(operations)") }
                return value
            }
            func user(_ userID: String) throws -> HelperUser {
                guard let user = try HelperUser.first(in: context, where: "userID == %@", userID) else {
                    fail("no user \(userID)")
                }
                return user
            }
            while let operation = rest.popFirst() {
                switch operation {
                case "insert":
                    let created = HelperUser(context: context)
                    created.userID = next()
                    created.name = "name-\(created.userID)"
                    created.age = Int(next())
                case "age": try user(next()).age = Int(next())
                case "delete": try user(next()).delete()
                case "age-where":
                    let format = next()
                    let age = Int(next())
                    for found in try HelperUser.fetch(in: context, where: format) { found.age = age }
                case "delete-all": _ = try HelperUser.deleteAll(in: context, where: next())
                default: fail("unknown operation \(operation)")
                }
            }
            try context.save()
        }
    } catch {
        fail("\(error)")
    }
    emit("saved")
}

/// `controller-watch URL FORMAT SORTKEY`: a controller over the main context of users
/// matching FORMAT, sorted by SORTKEY. Prints `change N deleted=… inserted=… updated=…
/// moved=from>to,… large=0|1 objects=id,…` for the fetch and each change set, `ready PID`
/// with its listener's backend pid once fetched, and `listener PID` whenever the
/// listener's backend changes (after a reconnect). Its manager waits half a second before
/// reconnecting a dropped listener, so saves made meanwhile come only through the
/// catch-up.
func controllerWatch(_ url: String, _ arguments: [String]) -> Never {
    guard arguments.count >= 2 else { fail("controller-watch needs a predicate format and a sort key") }
    let manager: ContextManager
    do {
        manager = try ContextManager(
            configuration: ConnectionConfiguration(url), entities: [HelperUser.self],
            changeLog: ChangeLogOptions(reconnectDelay: .milliseconds(500)))
    } catch {
        fail("\(error)")
    }
    let main = manager.mainContext
    let request: FetchRequest<HelperUser>
    do {
        request = FetchRequest(
            predicate: try FetchPredicate(format: arguments[0]), sortDescriptors: [FetchSortDescriptor(arguments[1])])
    } catch {
        fail("\(error)")
    }
    let controller = ManagedObjectController(fetchRequest: request, context: main)
    let count = Counter()
    controller.onChange = { controller, changes in
        count.add()
        func list(_ indexes: IndexSet) -> String { indexes.map(String.init).joined(separator: ",") }
        let moved = changes.moved.map { "\($0.from)>\($0.to)" }.joined(separator: ",")
        emit(
            "change \(count.value) deleted=\(list(changes.deleted)) inserted=\(list(changes.inserted)) "
                + "updated=\(list(changes.updated)) moved=\(moved) large=\(changes.isLargeChange ? 1 : 0) "
                + "objects=\(controller.objects.map(\.userID).joined(separator: ","))")
    }
    controller.onError = { _, error in emit("error \(error)") }
    do {
        try main.performAndWait { try controller.performFetch() }
    } catch {
        fail("\(error)")
    }
    var reported = manager.coordinator.listenerBackendPID
    emit("ready \(reported.map(String.init) ?? "none")")
    while true {
        withExtendedLifetime(controller) { _ = usleep(5_000) }
        let current = manager.coordinator.listenerBackendPID
        if let current, current != reported {
            reported = current
            emit("listener \(current)")
        }
    }
}
