import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// What a child context routes through its parent, what it refuses, and what it keeps
/// from other processes (issue 30).
@Suite("Child contexts: routed and refused calls, other processes")
struct ChildContextCallTests {
    /// Calls that need the database directly throw `ChildContextError.unsupported` naming
    /// the call, and change nothing.
    @Test(.onItsOwnThread) func callsThatNeedTheDatabaseAreRefused() async throws {
        try await ExampleSchema.withManagerAsync { manager in
            _ = try saveUsers([("u1", "Ann", 20)], in: manager)
            let child = manager.mainContext.newChildContext()
            func refused(_ error: any Error) -> String? {
                guard let error = error as? ChildContextError, error.code == .unsupported else { return nil }
                return error.call
            }
            try child.performAndWait { () throws in
                do {
                    try User.deleteAll(in: child)
                    Issue.record("deleteAll was not refused")
                } catch {
                    #expect(refused(error) == "deleteAll(in:where:)")
                    #expect("\(error)".contains("not available in a child context"))
                }
                var batches = FetchRequest<User>()
                batches.fetchBatchSize = 10
                do {
                    try child.fetch(batches) { _ in Issue.record("no batch expected") }
                    Issue.record("fetch(_:inBatches:) was not refused")
                } catch {
                    #expect(refused(error) == "fetch(_:inBatches:)")
                }
                let controller = ManagedObjectController(fetchRequest: FetchRequest<User>(), context: child)
                do {
                    try controller.performFetch()
                    Issue.record("a controller over a child was not refused")
                } catch {
                    #expect(refused(error) == "ManagedObjectController.performFetch()")
                }
            }
            do {
                _ = try await child.importRecords([["user_id": "u2"]], mapper: ObjectMapper<User>(uniqueKey: \.userID))
                Issue.record("an import operation in a child was not refused")
            } catch {
                #expect(refused(error) == "importRecords(_:mapper:options:progress:) / ImportOperation")
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 1)
            child.performAndWait { #expect(!child.hasChanges) }
        }
    }

    /// Reads of saved data only (aggregates, distinct values, dictionaries) go through the
    /// root context, as in any context; `refresh` re-reads the parent's current values.
    @Test func storeReadsGoThroughTheRootAndRefreshReadsTheParent() throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("u1", "Ann", 20), ("u2", "Bob", 30)], in: manager)
            let parent = manager.newPrivateContext()
            try parent.performAndWait { () throws in
                (try parent.existingObject(with: ids[1]) as? User)?.age = 90
            }
            // Saved elsewhere after the private parent's transaction began: not seen.
            try parent.performAndWait { _ = try parent.fetchAll(User.self) }
            _ = try saveUsers([("late", "Late", 70)], in: manager)
            let child = parent.newChildContext()
            try child.performAndWait { () throws in
                let oldest: Int? = try User.aggregate(.max, of: "age", in: child)
                #expect(oldest == 30)
                #expect(try User.distinctValues(of: "age", as: Int.self, in: child) == [20, 30])
                let user = try #require(try child.existingObject(with: ids[1]) as? User)
                #expect(user.age == 90)
                user.age = 91
                try child.refresh(user, mergeChanges: true)
                #expect(user.age == 91 && user.hasChanges)
                try child.refresh(user, mergeChanges: false)
                #expect(user.age == 90 && !user.hasChanges)
            }
            try parent.performAndWait { (try parent.existingObject(with: ids[1]) as? User)?.age = 95 }
            try child.performAndWait { () throws in
                let user = try #require(try child.existingObject(with: ids[1]) as? User)
                try child.refresh(user, mergeChanges: false)
                #expect(user.age == 95)
            }
        }
    }

    /// `insertOrUpdate` in a child looks keys up through the parent: the parent's unsaved
    /// object of a key is updated (not duplicated), a stored one too, links find the
    /// parent's unsaved objects; the child's save pushes the import into the parent,
    /// whose save writes each key once (new keys as upserts).
    @Test func anImportIntoAChildIsPushedToTheParent() throws {
        try ExampleSchema.withManager { manager in
            _ = try saveUsers([("u1", "Ann", 20)], in: manager)
            let main = manager.mainContext
            let (pendingID, linkedID) = main.performAndWait { () -> (ObjectID, ObjectID) in
                let user = User(context: main)
                user.userID = "u5"
                let linked = User(context: main)
                linked.userID = "u7"
                return (user.objectID, linked.objectID)
            }
            let child = main.newChildContext()
            try child.performAndWait { () throws in
                let records: [JSONValue] = [
                    ["UserID": "u1", "Name": "Ann B."], ["UserID": "u5", "Name": "Five"], ["UserID": "u6", "Name": "Six"],
                ]
                let users = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: child) {
                    record, user in user.name = record["Name"]?.stringValue
                }
                #expect(users.map(\.userID) == ["u1", "u5", "u6"])
                #expect(users[1].objectID == pendingID && !users[1].isInserted)
                #expect(users[2].isInserted && child.insertedObjects.count == 1)
                let link = ObjectMap<Post>.relationship("UserID", to: \.user, matching: \User.userID, whenMissing: .fail)
                let posts = try Post.insertOrUpdate(
                    [["PostID": "p1", "UserID": "u5"], ["PostID": "p2", "UserID": "u1"], ["PostID": "p3", "UserID": "u7"]],
                    uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: child, relationships: [link])
                #expect(posts[0].user === users[1] && posts[1].user === users[0])
                // u7 is an unsaved object of the parent that the child had not read.
                #expect(posts[2].user?.objectID == linkedID && posts[2].user?.managedObjectContext === child)
                try child.save()
            }
            try main.performAndWait { () throws in
                #expect(main.insertedObjects.count == 6)  // u5, u7, u6, p1, p2, p3
                let six = try #require(try User.first(in: main, where: "userID == 'u6'"))
                #expect(six.isInserted && six.storage.upsertAttributeIndex != nil)
                #expect((try main.existingObject(with: pendingID) as? User)?.name == "Five")
                try main.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 4)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name IN ('Ann B.', 'Five', 'Six')", in: manager) == 3)
            #expect(
                try ExampleSchema.count(
                    "SELECT count(*) FROM posts p JOIN users u ON u.id = p.user_id WHERE u.user_id IN ('u1', 'u5', 'u7')",
                    in: manager) == 3)
        }
    }

    /// An import key the parent deleted (not saved yet) is refused, as in the parent.
    @Test func anImportOfAKeyTheParentDeletedIsRefused() throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("u1", "Ann", 20)], in: manager)
            let main = manager.mainContext
            try main.performAndWait { main.delete(try main.existingObject(with: ids[0])) }
            let child = main.newChildContext()
            try child.performAndWait { () throws in
                #expect(throws: ChildContextError.objectGoneFromParent(ids[0], call: "insertOrUpdate / importRecords")) {
                    try User.insertOrUpdate([["UserID": "u1"]], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: child)
                }
                #expect(!child.hasChanges)
            }
        }
    }

    /// A child's save reaches neither the manager's merge into the main context (for a
    /// child of a private context) nor another manager's main context; the parent's save
    /// reaches both.
    @Test func aChildSaveStaysInTheProcessUntilTheParentSaves() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let writer = try ExampleSchema.makeManager(configuration)
            defer { writer.close() }
            let reader = try ContextManager(configuration: configuration, entities: ExampleSchema.entities)
            defer { reader.close() }
            let writerMerges = Mutex(0)
            let readerMerges = Mutex(0)
            let writerToken = writer.mainContext.observeObjectsDidChange { _ in writerMerges.withLock { $0 += 1 } }
            let readerToken = reader.mainContext.observeObjectsDidChange { _ in readerMerges.withLock { $0 += 1 } }
            defer {
                writerToken.cancel()
                readerToken.cancel()
            }
            let parent = writer.newPrivateContext()
            let child = parent.newChildContext()
            try child.performAndWait { () throws in
                User(context: child).userID = "from-child"
                try child.save()
            }
            // Long enough for a notification to arrive, had there been one.
            Thread.sleep(forTimeInterval: 0.5)
            #expect(writerMerges.withLock { $0 } == 0 && readerMerges.withLock { $0 } == 0)
            try reader.mainContext.performAndWait { () throws in
                #expect(try User.count(in: reader.mainContext, where: "userID == 'from-child'") == 0)
            }
            try parent.performAndWait { try parent.save() }
            let start = ContinuousClock.now
            while writerMerges.withLock({ $0 }) == 0 || readerMerges.withLock({ $0 }) == 0 {
                if start.duration(to: .now) > patience { throw TestFailure("the parent's save was not merged") }
                Thread.sleep(forTimeInterval: 0.01)
            }
            try reader.mainContext.performAndWait { () throws in
                #expect(try User.count(in: reader.mainContext, where: "userID == 'from-child'") == 1)
            }
        }
    }
}
