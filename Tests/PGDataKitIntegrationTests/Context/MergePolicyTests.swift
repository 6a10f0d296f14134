import Foundation
@testable import PGDataKit
@testable import PGDataKitPostgres
import Testing

/// Two private contexts read the same user; `first` changes name and age, `second`
/// changes name and saves first. Then `first` saves under `policy`.
private func conflictingEdit(
    policy: MergePolicy, manager: ContextManager
) throws -> (
    result: Result<Void, any Error>, stored: (name: String?, age: Int?, version: Int), first: ManagedObjectContext
) {
    let seed = manager.newPrivateContext()
    let id = try seed.performAndWait { () throws -> ObjectID in
        let user = User(context: seed)
        user.userID = "contested"
        user.name = "original"
        user.age = 30
        try seed.save()
        return user.objectID
    }
    let first = manager.newPrivateContext()
    let second = manager.newPrivateContext()
    try first.performAndWait {
        let user = try #require(try first.existingObject(with: id) as? User)
        user.name = "first's name"
        user.age = 31
    }
    try second.performAndWait {
        let user = try #require(try second.existingObject(with: id) as? User)
        user.name = "second's name"
        try second.save()
    }
    let result = first.performAndWait { () -> Result<Void, any Error> in
        first.mergePolicy = policy
        return Result { try first.save() }
    }
    let stored = try manager.coordinator.pool.withConnection { connection in
        let row = try connection.query("SELECT name, age, version FROM users WHERE user_id = 'contested'")[0]
        return (try row.decode(String?.self, at: 0), try row.decode(Int?.self, at: 1), try row.decode(Int.self, at: 2))
    }
    return (result, stored, first)
}

@Suite("Merge policies with two private contexts editing one row")
struct MergePolicyTests {
    @Test func errorPolicyThrowsWithConflictDetailsAndWritesNothing() throws {
        try ExampleSchema.withManager { manager in
            let (result, stored, _) = try conflictingEdit(policy: .error, manager: manager)
            guard case .failure(let error) = result, let conflictError = error as? MergeConflictError else {
                Issue.record("expected a MergeConflictError, got \(result)")
                return
            }
            let conflict = try #require(conflictError.conflicts.first)
            #expect(conflictError.conflicts.count == 1)
            #expect(conflict.snapshotVersion == 1)
            #expect(conflict.storeVersion == 2)
            #expect(conflict.snapshotValues["name"] as? String == "original")
            #expect(conflict.objectValues["name"] as? String == "first's name")
            #expect(conflict.objectValues["age"] as? Int == 31)
            #expect(conflict.storeValues?["name"] as? String == "second's name")
            // Values can be personal data: only the debug description shows them.
            #expect(conflictError.description.contains("changed: age, name"))
            #expect(!conflictError.description.contains("second's name"))
            #expect(!conflictError.description.contains("first's name"))
            #expect(conflictError.debugDescription.contains("store \"second's name\""))
            #expect(conflictError.debugDescription.contains("ours \"first's name\""))
            #expect(stored.name == "second's name")
            #expect(stored.age == 30)
            #expect(stored.version == 2)
        }
    }

    @Test func rowsLockedForAnUpdateStillTakeNewChildRowsButRowsLockedForDeletionDoNot() throws {
        // A save resolving conflicts locks the rows it will write. A row about to be
        // updated (no key changes) must not hold up another transaction inserting a row
        // that references it: that wait, in a cycle, was a deadlock found only after 1 s.
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let context = manager.newPrivateContext()
            let key = try context.performAndWait { () throws -> Int64 in
                let user = User(context: context)
                user.userID = "parent"
                try context.save()
                return try #require(user.objectID.primaryKey)
            }
            let coordinator = manager.coordinator
            let users = try #require(coordinator.model.entity(named: "User"))
            let other = try Connection(configuration)
            defer { other.close() }
            try other.execute("SET lock_timeout = '2s'")
            for forDeletion in [false, true] {
                let holder = try coordinator.beginTransaction(isolation: .readCommitted)
                defer { coordinator.rollbackAndRelease(holder) }
                #expect(try coordinator.lockObjects(of: users, keys: [key], forDeletion: forDeletion, on: holder).count == 1)
                let insert = { try other.execute("INSERT INTO posts (post_id, user_id) VALUES ($1, $2)", ["child-\(forDeletion)", key]) }
                if forDeletion {
                    let error = #expect(throws: PostgresError.self) { try insert() }
                    #expect(error?.sqlState == .lockNotAvailable)
                } else {
                    #expect(throws: Never.self) { try insert() }
                }
            }
        }
    }

    @Test func aSaveWithoutConflictsResolvesNone() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                context.mergePolicy = .mergeByPropertyObjectTrump
                User(context: context).userID = "alone"
                try context.save()
                #expect(context.resolvedConflicts.isEmpty)
            }
        }
    }

    @Test func errorPolicyKeepsTheContextDirtyForRetry() throws {
        try ExampleSchema.withManager { manager in
            let (_, _, first) = try conflictingEdit(policy: .error, manager: manager)
            try first.performAndWait {
                #expect(first.hasChanges)
                let user = try #require(first.updatedObjects.first as? User)
                #expect(user.name == "first's name")
                // Refreshing with merge keeps our edits on top of the new row; then it saves.
                try first.refresh(user, mergeChanges: true)
                #expect(user.name == "first's name")
                try first.save()
            }
            #expect(try ExampleSchema.count("SELECT version FROM users WHERE user_id = 'contested'", in: manager) == 3)
        }
    }

    /// What each resolving policy leaves in the row: `second` saved a new name first
    /// (version 2); `first` changed name and age.
    struct Resolution: Sendable, CustomStringConvertible {
        let policy: MergePolicy
        let name: String
        let age: Int
        let version: Int
        var description: String { "\(policy)" }
    }

    @Test(arguments: [
        // Store trump: the store's name, our age.
        Resolution(policy: .mergeByPropertyStoreTrump, name: "second's name", age: 31, version: 3),
        // Object trump: our name and age.
        Resolution(policy: .mergeByPropertyObjectTrump, name: "first's name", age: 31, version: 3),
        // Overwrite: the whole object as we have it.
        Resolution(policy: .overwrite, name: "first's name", age: 31, version: 3),
        // Rollback: the store's values, nothing written.
        Resolution(policy: .rollback, name: "second's name", age: 30, version: 2),
    ])
    func resolvingPolicyLeavesTheExpectedRow(_ expected: Resolution) throws {
        try ExampleSchema.withManager { manager in
            let (result, stored, first) = try conflictingEdit(policy: expected.policy, manager: manager)
            try result.get()
            // The context says what its last save settled, and how.
            let resolved = first.performAndWait { first.resolvedConflicts }
            #expect(resolved.map(\.objectValues.keys.count) == [2])
            #expect(resolved.first?.storeValues?["name"] as? String == "second's name")
            #expect(stored.name == expected.name)
            #expect(stored.age == expected.age)
            #expect(stored.version == expected.version)
        }
    }

    @Test func updatingARowDeletedElsewhereIsAConflictThatNamesTheDeletion() throws {
        try ExampleSchema.withManager { manager in
            let seed = manager.newPrivateContext()
            let id = try seed.performAndWait { () throws -> ObjectID in
                let user = User(context: seed)
                user.userID = "gone"
                try seed.save()
                return user.objectID
            }
            let editor = manager.newPrivateContext()
            try editor.performAndWait {
                let user = try #require(try editor.existingObject(with: id) as? User)
                user.name = "edited"
            }
            let deleter = manager.newPrivateContext()
            try deleter.performAndWait {
                try deleter.existingObject(with: id).delete()
                try deleter.save()
            }
            try editor.performAndWait {
                do {
                    try editor.save()
                    Issue.record("expected a conflict")
                } catch let error as MergeConflictError {
                    #expect(error.conflicts.first?.storeValues == nil)
                    #expect(error.description.contains("deleted"))
                }
                // Refreshing tells the object is gone, without crashing.
                let user = try #require(editor.registeredObjects.first as? User)
                #expect(throws: ManagedObjectError.objectNotFound(id)) { try editor.refresh(user, mergeChanges: false) }
                #expect(user.isDeleted)
                #expect(user.managedObjectContext == nil)
                #expect(user.name == "edited")  // the last known value stays readable
                #expect(throws: ManagedObjectError.objectNotFound(id)) { try editor.existingObject(with: id) }
                #expect(!editor.hasChanges)
            }
        }
    }
}
