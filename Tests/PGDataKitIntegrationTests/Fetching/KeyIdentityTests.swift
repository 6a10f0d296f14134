import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A text key means what PostgreSQL's unique index says: "café" with a precomposed é and
/// with e plus a combining accent are two rows (a deterministic collation compares
/// bytes), though Swift's `String` holds them equal. Every path that looks an object up
/// by its key must keep them two, and SQL and memory must agree.
@Suite("Keys compared as PostgreSQL compares them")
struct KeyIdentityTests {
    static let composed = "caf\u{E9}"
    static let decomposed = "cafe\u{301}"

    private static func scalars(_ text: String?) -> [Unicode.Scalar] { Array((text ?? "").unicodeScalars) }

    @Test func insertOrFetchKeepsTheTwoKeysApart() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let first = try User.insertOrFetch(key: "userID", value: Self.composed, in: context)
                let second = try User.insertOrFetch(key: "userID", value: Self.decomposed, in: context)
                #expect(first !== second)
                #expect(try User.insertOrFetch(key: "userID", value: Self.composed, in: context) === first)
                try context.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 2)
            let again = manager.newPrivateContext()
            try again.performAndWait { () throws in
                let found = try User.insertOrFetch(key: "userID", value: Self.decomposed, in: again)
                #expect(Self.scalars(found.userID) == Self.scalars(Self.decomposed))
                #expect(again.insertedObjects.isEmpty)
            }
        }
    }

    @Test func predicatesAgreeInSQLAndInMemory() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let saved = User(context: context)
                saved.userID = Self.composed
                try context.save()
                let pending = User(context: context)
                pending.userID = Self.decomposed
                for (format, argument) in [
                    ("userID == %@", Self.composed as Any), ("userID IN %@", [Self.composed] as Any),
                    ("userID != %@", Self.decomposed as Any),
                ] {
                    var request = FetchRequest<User>(predicate: try FetchPredicate(format: format, argument))
                    #expect(try context.fetch(request).map { Self.scalars($0.userID) } == [Self.scalars(Self.composed)], "\(format)")
                    request.includesPendingChanges = false
                    #expect(try context.fetch(request).count == 1, "SQL: \(format)")
                }
                var byDecomposed = FetchRequest<User>(predicate: try FetchPredicate(format: "userID == %@", Self.decomposed))
                #expect(try context.fetch(byDecomposed).map { $0 === pending } == [true])
                byDecomposed.includesPendingChanges = false
                #expect(try context.fetch(byDecomposed).isEmpty)
            }
        }
    }

    @Test func fetchAsDictionaryKeepsBothRows() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                for key in [Self.composed, Self.decomposed] { User(context: context).userID = key }
                try context.save()
                // A String-keyed dictionary cannot hold both: an error, not a lost row.
                #expect(throws: ManagedObjectError.equivalentKeys(entity: "User", key: "userID")) {
                    try User.fetchAsDictionary(keyedBy: "userID", as: String.self, in: context)
                }
                let byKey = try User.fetchAsDictionary(keyedBy: "userID", as: ExactText.self, in: context)
                #expect(byKey.count == 2)
                #expect(byKey[ExactText(Self.decomposed)].map { Self.scalars($0.userID) } == Self.scalars(Self.decomposed))
                // Plain duplicates of a non-unique attribute still keep the last.
                let named = try User.fetchAsDictionary(keyedBy: "userID", as: String.self, in: context, where: try FetchPredicate(format: "userID == %@", Self.composed))
                #expect(named.count == 1)
            }
        }
    }

    @Test func controllersKeepTheTwoKeysApart() throws {
        try ExampleSchema.withManager { manager in
            let writer = manager.newPrivateContext()
            try writer.performAndWait { () throws in
                for key in [Self.composed, Self.decomposed] { User(context: writer).userID = key }
                try writer.save()
            }
            let main = manager.mainContext
            try main.performAndWait { () throws in
                let sorted = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")])
                let sections = ManagedObjectController(fetchRequest: sorted, context: main, sectionNameKeyPath: "userID")
                try sections.performFetch()
                #expect(sections.sections.count == 2)
                let one = ManagedObjectController(
                    fetchRequest: FetchRequest<User>(predicate: try FetchPredicate(format: "userID == %@", Self.decomposed)),
                    context: main)
                try one.performFetch()
                #expect(one.objects.map { Self.scalars($0.userID) } == [Self.scalars(Self.decomposed)])
            }
        }
    }

    @Test func importedRelationshipsLinkToTheirOwnRow() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            let cache = ImportKeyCache()
            try context.performAndWait { () throws in
                for (key, name) in [(Self.composed, "composed"), (Self.decomposed, "decomposed")] {
                    let user = User(context: context)
                    user.userID = key
                    user.name = name
                }
                try context.save()
                for round in 0..<2 {
                    let posts = try Post.insertOrUpdate(
                        [["PostID": .string("p\(round)a"), "UserID": .string(Self.composed)],
                         ["PostID": .string("p\(round)b"), "UserID": .string(Self.decomposed)]],
                        uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context,
                        relationships: [.relationship("UserID", to: \.user, matching: \User.userID)], keyCache: cache)
                    #expect(posts.map { $0.user?.name } == ["composed", "decomposed"], "round \(round)")
                    try context.save()
                }
            }
        }
    }
}

/// Core Data's uniquing: one object per row. Two new objects of one save that end with
/// the same unique key cannot both stand for one row: the save is refused as the
/// database refuses two plain inserts, and the context keeps its changes.
@Suite("Two new objects, one key")
struct OneObjectPerRowTests {
    @Test(arguments: [false, true])
    func twoImportedObjectsGivenOneKeyAreRefused(changeByName: Bool) throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let users = try User.insertOrUpdate(
                    [["UserID": "k1", "Name": "first"], ["UserID": "k2", "Name": "second"]], uniqueModelKey: \.userID,
                    uniqueRemoteKey: "UserID", in: context) { record, user in user.name = record["Name"]?.stringValue }
                if changeByName { try users[1].setValue("k1", forKey: "userID") } else { users[1].userID = "k1" }
                #expect {
                    try context.save()
                } throws: { error in
                    (error as? PostgresError)?.sqlState == .uniqueViolation
                }
                #expect(context.insertedObjects.count == 2)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 0)
        }
    }
}

extension OneObjectPerRowTests {
    /// One key in two batches of one call is one object; an imported object later given
    /// the key of a saved object of the same context used to merge into that row, two
    /// objects for one row.
    @Test(arguments: [1, 1_000])
    func oneKeyInTwoBatchesIsOneObject(batchSize: Int) throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let users = try User.insertOrUpdate(
                    [["UserID": "k1", "Name": "first"], ["UserID": "k2"], ["UserID": "k1", "Name": "again"]],
                    uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, batchSize: batchSize
                ) { record, user in user.name = record["Name"]?.stringValue }
                #expect(users.count == 2)
                #expect(context.insertedObjects.count == 2)
                try context.save()
                let second = try User.insertOrUpdate(
                    [["UserID": "k3"]], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context)
                second[0].userID = "k1"
                // It would stand for k1's row beside the first object: refused.
                #expect { try context.save() } throws: { ($0 as? PostgresError)?.sqlState == .uniqueViolation }
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 2)
        }
    }
}
