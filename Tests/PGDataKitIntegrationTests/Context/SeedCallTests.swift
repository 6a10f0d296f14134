import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Calls the seed helpers had that ported code expects (issue 30).
@Suite("Seed calls: insertOrFetch(where:), clone()")
struct SeedCallTests {
    /// RHManagedObject's `newOrExistingEntityWithPredicate:`.
    @Test func insertOrFetchWherePredicate() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let saved = User(context: context)
                saved.userID = "saved"
                saved.age = 40
                try context.save()
                let found = try User.insertOrFetch(in: context, where: "age > %d", 30)
                #expect(found === saved)
                let pending = User(context: context)
                pending.userID = "pending"
                pending.name = "Pen"
                #expect(try User.insertOrFetch(in: context, where: "name == 'Pen'") === pending)
                let made = try User.insertOrFetch(where: try FetchPredicate(format: "age > 100"), in: context)
                #expect(made.isInserted && made !== saved && made !== pending)
                #expect(context.insertedObjects.count == 2)
                #expect(throws: FetchPredicateError.self) { try User.insertOrFetch(in: context, where: "nosuchkey == 1") }
            }
        }
    }

    /// RHManagedObject's `clone`: attributes and many-to-one relationships copied, unique
    /// keys left as a new object's.
    @Test func cloneCopiesAttributesButNotUniqueKeys() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let user = User(context: context)
                user.userID = "owner"
                let post = Post(context: context)
                post.postID = "p1"
                post.title = "Hello"
                post.user = user
                try context.save()
                let copy = try post.clone()
                #expect(copy.isInserted && copy !== post)
                #expect(copy.title == "Hello" && copy.postID == "")
                #expect(copy.user === user)
                #expect(user.posts.count == 2)
                copy.postID = "p2"
                try context.save()
                let ownerCopy = try user.clone()
                #expect(ownerCopy.userID == "" && ownerCopy.posts.isEmpty)  // to-many not copied
                #expect(user.posts.count == 2)
                context.delete(ownerCopy)
                post.delete()
                try context.save()
                #expect(throws: ManagedObjectError.objectDeleted(post.objectID)) { try post.clone() }
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts WHERE title = 'Hello'", in: manager) == 1)
        }
    }

    /// SQKDataKit's delete-all also takes the context's unsaved inserts that match, as an
    /// option; by default only rows go.
    @Test(arguments: [false, true])
    func deleteAllWithOrWithoutUnsavedInserts(including: Bool) throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                for (id, age) in [("s10", 10), ("s40", 40)] {
                    let user = User(context: context)
                    user.userID = id
                    user.age = age
                }
                try context.save()
                for (id, age) in [("m12", 12), ("m50", 50)] {
                    let user = User(context: context)
                    user.userID = id
                    user.age = age
                }
                let deleted = try User.deleteAll(
                    in: context, where: try FetchPredicate(format: "age < 18"), includingUnsavedInserts: including)
                #expect(deleted == 1)
                #expect(Set(context.insertedObjects.compactMap { ($0 as? User)?.userID }) == (including ? ["m50"] : ["m12", "m50"]))
                try context.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == (including ? 2 : 3))
        }
    }
}

/// Vokoder's `overwriteObjectsWithServerChanges = NO`: new keys are inserted, existing
/// ones left as they are, including a row another context inserts before the save.
@Suite("Imports that do not update existing objects")
struct ImportWithoutOverwriteTests {
    @Test func insertOrUpdateLeavesExistingObjectsUntouched() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            let racing = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let old = User(context: context)
                old.userID = "old"
                old.name = "stored"
                try context.save()
                let users = try User.insertOrUpdate(
                    [["UserID": "old", "Name": "record"], ["UserID": "new", "Name": "record"], ["UserID": "raced", "Name": "record"]],
                    uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, updatesExisting: false
                ) { record, user in user.name = record["Name"]?.stringValue }
                #expect(users.map(\.userID) == ["old", "new", "raced"])
                #expect(users[0] === old && old.name == "stored" && !old.hasChanges)
                // Another context inserts "raced" after the import looked: it is left as written.
                try racing.performAndWait { () throws in
                    let user = User(context: racing)
                    user.userID = "raced"
                    user.name = "elsewhere"
                    try racing.save()
                }
                try context.save()
                #expect(users[2].name == "elsewhere")
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'record'", in: manager) == 1)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 3)
        }
    }

    @Test(.onItsOwnThread) func anImportOperationLeavesExistingObjectsUntouched() async throws {
        try await ExampleSchemaAsync.withImportManager { manager in
            _ = try await manager.importRecords(ImportSchema.userRecords(0..<10), mapper: userMapper)
            var options = ImportOptions(batchSize: 4)
            options.updatesExistingObjects = false
            let summary = try await manager.importRecords(
                ImportSchema.userRecords(5..<15, name: "Changed"), mapper: userMapper, options: options)
            #expect(summary.inserted == 5)
            #expect(summary.updated == 0)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name LIKE 'Changed%'", in: manager) == 5)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE version > 1", in: manager) == 0)
        }
    }
}

/// SQKDataKit's and RHManagedObject's delete-store, for tests: refused unless the
/// database is named.
@Suite("Resetting a store for tests")
struct StoreResetTests {
    @Test func resetEmptiesTheModelsTablesOnlyWhenTheDatabaseIsNamed() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let user = User(context: context)
                user.userID = "u"
                let post = Post(context: context)
                post.postID = "p"
                post.user = user
                try context.save()
            }
            let name = try manager.coordinator.pool.withConnection { connection in
                try connection.query("SELECT current_database()")[0].decode(String.self, at: 0)
            }
            try manager.coordinator.pool.withConnection { connection in
                _ = try connection.execute("CREATE TABLE unrelated (n integer)")
                _ = try connection.execute("INSERT INTO unrelated VALUES (1)")
            }
            #expect(throws: StoreResetError(connectedDatabase: name, requestedDatabase: "production")) {
                try manager.coordinator.resetStore(database: "production")
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 1)
            try manager.coordinator.resetStore(database: name)
            for table in ["users", "posts", "samples", "pgdatakit_changes"] {
                #expect(try ExampleSchema.count("SELECT count(*) FROM \(table)", in: manager) == 0, "\(table)")
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM unrelated", in: manager) == 1)
            let fresh = manager.newPrivateContext()
            try fresh.performAndWait { () throws in
                let user = User(context: fresh)
                user.userID = "again"
                try fresh.save()
                #expect(user.objectID.primaryKey == 1)  // keys start again
            }
        }
    }
}

/// Vokoder's mapper behaviours as options of `ObjectMapper` (PGDataKit's defaults kept).
@Suite("Mapper options from Vokoder")
struct MapperOptionTests {
    @Test func missingMembersUnknownMembersAndNilOnExport() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                var mapper = ObjectMapper<User>(uniqueKey: \.userID)
                _ = try User.importRecords([["userID": "u1", "name": "Ada", "age": 36]], mapper: mapper, in: context)
                // Default: a missing member leaves the attribute.
                let kept = try User.importRecords([["userID": "u1"]], mapper: mapper, in: context)
                #expect(kept[0].name == "Ada" && kept[0].age == 36)
                mapper.missingMembersSetNil = true
                let cleared = try User.importRecords([["userID": "u1", "age": 37]], mapper: mapper, in: context)
                #expect(cleared[0].name == nil && cleared[0].age == 37 && cleared[0].userID == "u1")
                // Default: an unknown member is ignored; with the option it is an error.
                _ = try User.importRecords([["userID": "u2", "nickname": "x"]], mapper: mapper, in: context)
                mapper.rejectsUnknownMembers = true
                #expect {
                    try User.importRecords([["userID": "u3"], ["userID": "u4", "nickname": "x"]], mapper: mapper, in: context)
                } throws: { error in
                    guard let error = error as? ImportError, error.code == .unknownMember else { return false }
                    return error.recordIndex == 1 && error.key == "nickname" && error.entity == "User"
                }
                #expect(try User.importRecords([["user_id": "u5", "name": "Bo"]], mapper: mapper, in: context).count == 1)
                // Export: nil as null by default, left out with the option.
                #expect(try mapper.export(cleared[0])["name"] == .null)
                mapper.exportOmitsNil = true
                #expect(try mapper.export(cleared[0])["name"] == nil)
                #expect(try mapper.export(cleared[0])["age"] == 37)
            }
        }
    }
}

extension MapperOptionTests {
    /// Vokoder skips malformed values and imports the record; PGDataKit stops, unless
    /// `onMalformedValue` is set, which then hears each skipped value.
    @Test func malformedValuesAreSkippedAndReportedWhenLenient() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                var mapper = ObjectMapper<User>(uniqueKey: \.userID)
                let records: [JSONValue] = [["userID": "u1", "name": "Ada", "age": "old"], ["userID": "u2", "age": 3.5, "name": 7]]
                #expect(throws: ImportError.self) { try User.importRecords(records, mapper: mapper, in: context) }
                let skipped = Mutex<[String]>([])
                mapper.onMalformedValue = { error in
                    guard error.code == .typeMismatch, let index = error.recordIndex, let key = error.key else { return }
                    skipped.withLock { $0.append("\(index):\(key)") }
                }
                let users = try User.importRecords(records, mapper: mapper, in: context)
                #expect(users.map(\.userID) == ["u1", "u2"])
                #expect(users[0].name == "Ada" && users[0].age == nil && users[1].name == nil)
                #expect(skipped.withLock { $0 }.sorted() == ["0:age", "1:age", "1:name"])
                try context.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 2)
        }
    }
}
