import Foundation
import PGDataKit
import Testing

/// The Swift blocks of ContextsAndTransactions.md, compiled and run.
@Suite("Docs: contexts and transactions")
struct ContextsDocTests {
    @Test(.onItsOwnThread) func asyncPerform() async throws {
        try await ExampleSchema.withManagerAsync { manager in
            let count = try await manager.mainContext.perform {
                try manager.mainContext.fetchAll(User.self).count
            }
            #expect(count == 0)
        }
    }

    @Test func plainThread() throws {
        try ExampleSchema.withManager { manager in
            Thread.detachNewThread {
                let context = manager.newPrivateContext()
                try? context.performAndWait {
                    User(context: context).userID = "from-a-thread"
                    try context.save()
                }
            }
            try ControllerTesting.wait("the thread's user is saved", on: manager.mainContext, timeout: .seconds(60)) {
                try manager.mainContext.fetchAll(User.self).contains { $0.userID == "from-a-thread" }
            }
        }
    }

    @Test func pinnedSnapshotReport() throws {
        try ExampleSchema.withManager { manager in
            try ControllerTesting.insertUsers(manager, [("a", 1), ("b", 2)])
            let main = manager.mainContext
            let report = try main.performAndWait {
                try main.withPinnedSnapshot {
                    let total = try User.count(in: main)
                    let users = try main.fetchAll(User.self)    // the very users counted
                    return "\(users.count) of \(total) users"
                }
            }
            #expect(report == "2 of 2 users")
            #expect(main.performAndWait { !main.isSnapshotPinned })
        }
    }

    @Test func pinnedSnapshotLost() throws {
        try ExampleSchema.withManager { manager in
            try ControllerTesting.insertUsers(manager, [("a", 1)])
            let main = manager.mainContext
            do {
                try main.performAndWait {
                    try main.pinSnapshot()
                    let users = try main.fetchAll(User.self)
                    for user in users { print(user.userID, user.posts.count) }
                    try main.unpinSnapshot()    // one merge of what others saved meanwhile
                }
            } catch SnapshotError.Code.lost {
                try main.performAndWait { try main.unpinSnapshot() }    // start the report over
            }
            #expect(main.performAndWait { !main.isSnapshotPinned })
        }
    }

    /// What the child-context example edits with.
    struct Form {
        var name: String?
        var age: Int?
        var isValid: Bool
    }

    @Test func childContextEdit() throws {
        try ExampleSchema.withManager { manager in
            let userID = try manager.mainContext.performAndWait {
                let user = User(context: manager.mainContext)
                user.userID = "u1"
                try manager.mainContext.save()
                return user.objectID
            }
            for form in [Form(name: "Ada", age: 36, isValid: true), Form(name: "Bad", age: -1, isValid: false)] {
                let editor = manager.mainContext.newChildContext(name: "edit")
                try editor.performAndWait {
                    guard let user = try editor.existingObject(with: userID) as? User else { return }
                    user.name = form.name
                    user.age = form.age
                    if form.isValid {
                        try editor.save()        // into the main context: its hasChanges is now true
                    } else {
                        editor.rollback()        // the main context never saw the edit
                    }
                }
                try manager.mainContext.performAndWait { try manager.mainContext.save() }   // to the database
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'Ada' AND age = 36", in: manager) == 1)
        }
    }

    @Test func childContextImport() throws {
        try ExampleSchema.withManager { manager in
            let records: [JSONValue] = [["id": "u1", "name": "Ada"], ["id": "u2", "name": "Bob"]]
            let scratch = manager.mainContext.newChildContext(name: "import")
            try scratch.performAndWait {
                try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "id", in: scratch) { record, user in
                    user.name = record["name"]?.stringValue
                }
                try scratch.save()
            }
            try manager.mainContext.performAndWait { try manager.mainContext.save() }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name IS NOT NULL", in: manager) == 2)
        }
    }
}
