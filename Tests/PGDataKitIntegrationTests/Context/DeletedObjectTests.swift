import Foundation
import PGDataKit
import Testing

/// Touching an object whose row is deleted is `ManagedObjectError.objectDeleted`,
/// whoever deleted it: its own context (it used to accept the value silently), another
/// context of the process, or another process (see `ControllerLifecycleTests`).
@Suite("Objects whose rows are deleted")
struct DeletedObjectTests {
    @Test func anObjectItsOwnContextDeletedAndSavedRefusesChanges() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let user = User(context: context)
                user.userID = "gone"
                user.name = "Ada"
                try context.save()
                user.delete()
                try user.setValue("still here", forKey: "name")  // deleted, not yet saved: allowed
                try context.save()
                #expect(user.isDeleted)
                #expect(user.managedObjectContext == nil)
                #expect(throws: ManagedObjectError.objectDeleted(user.objectID)) { try user.setValue("x", forKey: "name") }
                #expect(throws: ManagedObjectError.objectDeleted(user.objectID)) { try user.value(forKey: "name") }
                // The typed setter cannot throw: it logs a warning and the value is saved nowhere.
                let statements = manager.coordinator.statementCount
                user.name = "Bob"
                #expect(!context.hasChanges)
                try context.save()
                #expect(manager.coordinator.statementCount == statements)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 0)
        }
    }

    @Test func anObjectAnotherContextDeletedRefusesChangesAfterTheMerge() throws {
        try ExampleSchema.withManager { manager in
            let writer = manager.newPrivateContext()
            try writer.performAndWait { () throws in
                let user = User(context: writer)
                user.userID = "gone"
                try writer.save()
            }
            let main = manager.mainContext
            let held = try main.performAndWait { try #require(try User.first(in: main, where: "userID == 'gone'")) }
            try writer.performAndWait { () throws in
                try #require(try User.first(in: writer, where: "userID == 'gone'")).delete()
                try writer.save()
            }
            main.performAndWait {
                #expect(held.isDeleted)
                #expect(throws: ManagedObjectError.objectDeleted(held.objectID)) { try held.setValue("x", forKey: "name") }
            }
        }
    }
}
