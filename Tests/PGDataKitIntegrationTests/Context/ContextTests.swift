import Foundation
import PGDataKit
import Testing

@Suite("Contexts: snapshots, identity across contexts, merging, notifications")
struct ContextTests {
    @Test func fetchesDoNotSeeUncommittedChangesAndKeepTheirSnapshot() throws {
        try ExampleSchema.withManager { manager in
            let reader = manager.newPrivateContext()
            let writer = manager.newPrivateContext()
            try reader.performAndWait { () throws in #expect(try reader.fetchAll(User.self).isEmpty) }
            try writer.performAndWait {
                let user = User(context: writer)
                user.userID = "w1"
                _ = try writer.fetchAll(User.self)  // writer's transaction is open, nothing saved
            }
            try reader.performAndWait { () throws in #expect(try reader.fetchAll(User.self).isEmpty) }
            try writer.performAndWait { try writer.save() }
            // Committed now, but the reader's transaction keeps its snapshot.
            try reader.performAndWait { () throws in
                #expect(reader.hasOpenTransaction)
                #expect(try reader.fetchAll(User.self).isEmpty)
                reader.reset()  // a new transaction on the next read
                #expect(try reader.fetchAll(User.self).map(\.userID) == ["w1"])
            }
        }
    }

    @Test func pendingInsertsAndDeletesShowInFetches() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let saved = User(context: context)
                saved.userID = "saved"
                try context.save()
                let pending = User(context: context)
                pending.userID = "pending"
                saved.delete()
                #expect(try context.fetchAll(User.self).map(\.userID) == ["pending"])
            }
        }
    }

    @Test func fetchingAgainKeepsIdentityAndUnsavedChanges() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "same"
                try context.save()
                user.name = "unsaved"
                let fetched = try context.fetchAll(User.self)
                #expect(fetched.count == 1)
                #expect(fetched[0] === user)
                #expect(fetched[0].name == "unsaved")
            }
        }
    }

    @Test func objectIDsCrossContexts() throws {
        try ExampleSchema.withManager { manager in
            let writer = manager.newPrivateContext()
            let id = try writer.performAndWait { () throws -> ObjectID in
                let user = User(context: writer)
                user.userID = "crossing"
                user.age = 7
                try writer.save()
                return user.objectID
            }
            #expect(id.entityName == "User")
            #expect(id.uriRepresentation.absoluteString == "x-pgdatakit://User/\(id.primaryKey ?? -1)")
            let other = manager.newPrivateContext()
            try other.performAndWait {
                let user = try #require(try other.object(with: id) as? User)
                #expect(user.age == 7)
                #expect(user.managedObjectContext === other)
                #expect(try other.object(with: id) === user)
            }
            let main = manager.mainContext
            try main.performAndWait { () throws in
                #expect((try main.existingObject(with: id) as? User)?.userID == "crossing")
            }
            // A temporary ID means nothing to another context.
            let unsaved = writer.performAndWait { () -> ObjectID in
                let user = User(context: writer)
                user.userID = "unsaved"
                return user.objectID
            }
            other.performAndWait {
                #expect(throws: ManagedObjectError.objectNotFound(unsaved)) { try other.object(with: unsaved) }
            }
        }
    }

    @Test func privateSavesMergeIntoTheMainContext() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            let seed = manager.newPrivateContext()
            let ids = try seed.performAndWait { () throws -> [ObjectID] in
                let kept = User(context: seed)
                kept.userID = "kept"
                kept.name = "before"
                let removed = User(context: seed)
                removed.userID = "removed"
                try seed.save()
                return [kept.objectID, removed.objectID]
            }
            let (kept, removed) = try main.performAndWait { () throws -> (User, User) in
                let users = try main.fetchAll(User.self)
                return (try #require(users.first { $0.userID == "kept" }), try #require(users.first { $0.userID == "removed" }))
            }
            let changes = ChangeCollector()
            let token = main.observeObjectsDidChange { changes.append($0) }
            defer { token.cancel() }

            let editor = manager.newPrivateContext()
            try editor.performAndWait {
                let user = try #require(try editor.existingObject(with: ids[0]) as? User)
                user.name = "after"
                try editor.existingObject(with: ids[1]).delete()
                try editor.save()
            }
            try main.performAndWait { () throws in
                #expect(kept.name == "after")
                #expect(!kept.hasChanges)
                #expect(removed.isDeleted)
                #expect(removed.managedObjectContext == nil)
                #expect(try main.fetchAll(User.self).map(\.userID) == ["kept"])
            }
            let merged = try #require(changes.all.first)
            #expect(merged.updated == [ids[0]])
            #expect(merged.deleted == [ids[1]])
            #expect(merged.changedKeys[ids[0]] == ["name"])
        }
    }

    @Test func mergeRefreshesWithOneQueryPerEntity() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            let seed = manager.newPrivateContext()
            try seed.performAndWait {
                for index in 0..<50 {
                    let user = User(context: seed)
                    user.userID = "m\(index)"
                }
                try seed.save()
            }
            try main.performAndWait { () throws in #expect(try main.fetchAll(User.self).count == 50) }
            // Hold the main queue while the editor saves, so that the merge it queues
            // runs after `before` is read.
            let holding = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            main.perform {
                holding.signal()
                release.wait()
            }
            holding.wait()
            let editor = manager.newPrivateContext()
            try editor.performAndWait {
                for user in try editor.fetchAll(User.self) { user.age = 1 }
                try editor.save()
            }
            let before = manager.coordinator.statementCount
            release.signal()
            try main.performAndWait { () throws in
                #expect(try main.fetchAll(User.self).allSatisfy { $0.age == 1 })
            }
            // The merge's single refresh query, then the fetch above.
            #expect(manager.coordinator.statementCount - before == 2)
        }
    }

    @Test func shouldMergeOnSaveOffLeavesTheMainContextAlone() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            let seed = manager.newPrivateContext()
            let id = try seed.performAndWait { () throws -> ObjectID in
                let user = User(context: seed)
                user.userID = "quiet"
                user.name = "before"
                try seed.save()
                return user.objectID
            }
            let user = try main.performAndWait { try #require(try main.existingObject(with: id) as? User) }
            let editor = manager.newPrivateContext()
            try editor.performAndWait {
                editor.shouldMergeOnSave = false
                (try editor.existingObject(with: id) as? User)?.name = "after"
                try editor.save()
            }
            try main.performAndWait {
                #expect(user.name == "before")
                try main.refresh(user, mergeChanges: false)
                #expect(user.name == "after")
            }
        }
    }

    @Test(.onItsOwnThread) func didSaveIsObservableByClosureAndStream() async throws {
        try await ExampleSchema.withManagerAsync { manager in
            let context = manager.newPrivateContext()
            let collected = ChangeCollector()
            let token = context.observeDidSave { collected.append($0) }
            defer { token.cancel() }
            let stream = context.didSaveNotifications
            let id = try await context.perform { () throws -> ObjectID in
                let user = User(context: context)
                user.userID = "observed"
                try context.save()
                return user.objectID
            }
            var iterator = stream.makeAsyncIterator()
            let streamed = await iterator.next()
            #expect(streamed?.inserted == [id])
            #expect(collected.all.map(\.inserted) == [[id]])
            try await context.perform {
                (try context.existingObject(with: id) as? User)?.age = 3
                try context.save()
            }
            let second = await iterator.next()
            #expect(second?.updated == [id])
            #expect(second?.changedKeys[id] == ["age"])
        }
    }

    @Test func performAndWaitIsReentrantAndKnowsItsQueue() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            #expect(!context.isOnQueue)
            let value = context.performAndWait { () -> Int in
                #expect(context.isOnQueue)
                return context.performAndWait { 42 }
            }
            #expect(value == 42)
            #expect(throws: ManagedObjectError.self) {
                try context.performAndWait { throw ManagedObjectError.unknownEntity("x") }
            }
        }
    }
}

/// Collects change sets from observers on other threads.
final class ChangeCollector: @unchecked Sendable {
    // Safe: `changes` is only touched under `lock`.
    private let lock = NSLock()
    private var changes: [ContextChanges] = []

    func append(_ change: ContextChanges) {
        lock.lock()
        changes.append(change)
        lock.unlock()
    }

    var all: [ContextChanges] {
        lock.lock()
        defer { lock.unlock() }
        return changes
    }
}
