import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// `updateAll(in:set:where:)`: one `UPDATE` of the matching rows without loading them,
/// merged by this context, the main context and another coordinator like a save.
@Suite("Batch update")
struct UpdateAllTests {
    /// Runs `body` with a manager over a fresh database holding users u0…u9 (ages 0…9).
    func withUsers(_ body: (ContextManager, ConnectionConfiguration) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let seed = manager.newPrivateContext()
            try seed.performAndWait {
                for index in 0..<10 {
                    let user = User(context: seed)
                    user.userID = "u\(index)"
                    user.age = index
                    user.name = "name \(index)"
                }
                try seed.save()
            }
            try body(manager, configuration)
        }
    }

    @Test func oneStatementUpdatesTheMatchingRowsAndBumpsTheirVersions() throws {
        try withUsers { manager, configuration in
            let observer = try Connection(configuration)
            defer { observer.close() }
            let context = manager.newPrivateContext()
            let before = manager.coordinator.statementCount
            let renamed = try context.performAndWait {
                try User.updateAll(in: context, set: ["name": "Anonymous", "age": nil], where: "age < %@", 3)
            }
            // The BEGIN (sent with the UPDATE), the UPDATE, then the change record and the
            // COMMIT in one round trip: no row is read into an object.
            #expect(renamed == 3)
            #expect(manager.coordinator.statementCount - before == 4)
            let rows = try observer.query("SELECT user_id, name, age, version FROM users ORDER BY user_id").map {
                "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String?.self, at: 1) ?? "-") "
                    + "\(try $0.decode(Int?.self, at: 2).map(String.init) ?? "-") v\(try $0.decode(Int64.self, at: 3))"
            }
            #expect(rows.prefix(4) == ["u0 Anonymous - v2", "u1 Anonymous - v2", "u2 Anonymous - v2", "u3 name 3 3 v1"])
            // One change record names the three objects.
            let records = try observer.query("SELECT changes::text FROM pgdatakit_changes ORDER BY id DESC LIMIT 1")
            let changes = try ChangeLog.decode(try records[0].decode(String.self, at: 0))
            #expect(changes.updated.count == 3 && changes.inserted.isEmpty && changes.deleted.isEmpty)
        }
    }

    @Test func theContextTheMainContextAndAnotherCoordinatorSeeTheUpdate() throws {
        try withUsers { manager, configuration in
            let other = try ContextManager(configuration: configuration, entities: ExampleSchema.entities)
            defer { other.close() }
            let main = manager.mainContext
            let otherMain = other.mainContext
            let loaded = try main.performAndWait { try User.fetch(in: main, where: "userID == %@", "u1") }
            let remote = try otherMain.performAndWait { try User.fetch(in: otherMain, where: "userID == %@", "u1") }
            let context = manager.newPrivateContext()
            let mine = try context.performAndWait { () -> User? in
                let user = try User.first(in: context, where: "userID == %@", "u1")
                user?.name = "kept unsaved"
                _ = try User.updateAll(in: context, set: ["age": 40], where: "userID IN %@", ["u1", "u2"])
                return user
            }
            // This context re-read its object and kept its unsaved change on top.
            context.performAndWait {
                #expect(mine?.age == 40 && mine?.name == "kept unsaved" && mine?.hasChanges == true)
            }
            try eventually("the main context merged the update") {
                main.performAndWait { loaded.first?.age == 40 }
            }
            try eventually("another coordinator merged the update") {
                otherMain.performAndWait { remote.first?.age == 40 }
            }
        }
    }

    /// A private context whose snapshot predates another transaction's change of a
    /// matching row still updates (and deletes) every matching row: repeatable read
    /// refuses to write that row (40001), so the batch is redone in a read-committed
    /// transaction that waits for and re-checks the rows, as a save's redo does. The
    /// other transaction's change of another column stays.
    @Test func aBatchAfterAConcurrentChangeIsRedoneNotRefused() throws {
        try withUsers { manager, configuration in
            let observer = try Connection(configuration)
            defer { observer.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                #expect(try User.count(in: context) == 10)  // the context's snapshot is taken
                try observer.execute("UPDATE users SET name = 'elsewhere', version = version + 1 WHERE user_id = 'u3'")
                #expect(try User.updateAll(in: context, set: ["age": 70], where: "age < %@", 5) == 5)
            }
            let rows = try observer.query("SELECT user_id, age, name FROM users WHERE age = 70 ORDER BY user_id")
            #expect(try rows.map { try $0.decode(String.self, at: 0) } == ["u0", "u1", "u2", "u3", "u4"])
            #expect(try observer.query("SELECT name FROM users WHERE user_id = 'u3'")[0].decode(String.self, at: 0) == "elsewhere")
            try context.performAndWait {
                _ = try User.count(in: context)
                try observer.execute("UPDATE users SET name = 'again', version = version + 1 WHERE user_id = 'u4'")
                #expect(try User.deleteAll(in: context, where: "age == %@", 70) == 5)
            }
            #expect(try observer.query("SELECT count(*)::int FROM users")[0].decode(Int.self, at: 0) == 5)
        }
    }

    /// An edit made on a version read before the update is not lost silently: under
    /// `.error` its save throws a conflict, and the batch update stays.
    @Test func anEditReadBeforeTheUpdateConflictsUnderError() throws {
        try withUsers { manager, configuration in
            let editor = manager.newPrivateContext()
            editor.mergePolicy = .error
            let user = try editor.performAndWait { try User.first(in: editor, where: "userID == %@", "u5") }
            let updater = manager.newPrivateContext()
            try updater.performAndWait { _ = try User.updateAll(in: updater, set: ["age": 50], where: "userID == %@", "u5") }
            let outcome = editor.performAndWait { () -> String in
                user?.name = "edited"
                do {
                    try editor.save()
                    return "saved"
                } catch is MergeConflictError {
                    return "conflict"
                } catch {
                    return "\(error)"
                }
            }
            #expect(outcome == "conflict")
            let observer = try Connection(configuration)
            defer { observer.close() }
            let age = try observer.query("SELECT age FROM users WHERE user_id = 'u5'")[0].decode(Int.self, at: 0)
            #expect(age == 50)
        }
    }

    @Test func badValuesAndChildContextsAreRefusedBeforeAnythingIsSent() throws {
        try withUsers { manager, _ in
            let context = manager.newPrivateContext()
            let before = manager.coordinator.statementCount
            context.performAndWait {
                #expect(throws: ManagedObjectError.unknownKey(entity: "User", key: "nickname")) {
                    try User.updateAll(in: context, set: ["nickname": "x"])
                }
                #expect(throws: ManagedObjectError.self) { try User.updateAll(in: context, set: ["age": "old"]) }
                #expect(throws: ManagedObjectError.self) { try User.updateAll(in: context, set: ["userID": nil]) }
                #expect(throws: ManagedObjectError.self) { try User.updateAll(in: context, set: ["posts": nil]) }
            }
            #expect(manager.coordinator.statementCount == before)
            let child = context.newChildContext(name: "child")
            child.performAndWait {
                #expect(throws: ChildContextError.self) { try User.updateAll(in: child, set: ["age": 1]) }
            }
        }
    }

    /// The Fetching article's example.
    @Test func theArticlesExample() throws {
        try withUsers { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let renamed = try User.updateAll(in: context, set: ["name": "Anonymous"], where: "age < %@", 18)
                #expect(renamed == 10)
            }
        }
    }
}
