import Foundation
import PGDataKit
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
            #expect(conflictError.description.contains("second's name"))
            #expect(stored.name == "second's name")
            #expect(stored.age == 30)
            #expect(stored.version == 2)
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

    @Test func storeTrumpKeepsTheStoresNameAndOurAge() throws {
        try ExampleSchema.withManager { manager in
            let (result, stored, _) = try conflictingEdit(policy: .mergeByPropertyStoreTrump, manager: manager)
            try result.get()
            #expect(stored.name == "second's name")
            #expect(stored.age == 31)
            #expect(stored.version == 3)
        }
    }

    @Test func objectTrumpKeepsOurNameAndAge() throws {
        try ExampleSchema.withManager { manager in
            let (result, stored, _) = try conflictingEdit(policy: .mergeByPropertyObjectTrump, manager: manager)
            try result.get()
            #expect(stored.name == "first's name")
            #expect(stored.age == 31)
            #expect(stored.version == 3)
        }
    }

    @Test func overwriteWritesTheWholeObject() throws {
        try ExampleSchema.withManager { manager in
            let (result, stored, _) = try conflictingEdit(policy: .overwrite, manager: manager)
            try result.get()
            #expect(stored.name == "first's name")
            #expect(stored.age == 31)
            #expect(stored.version == 3)
        }
    }

    @Test func rollbackTakesTheStoresValues() throws {
        try ExampleSchema.withManager { manager in
            let (result, stored, _) = try conflictingEdit(policy: .rollback, manager: manager)
            try result.get()
            #expect(stored.name == "second's name")
            #expect(stored.age == 30)
            #expect(stored.version == 2)
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
