import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Saves that update one row: one statement with the change record, one round trip.
@Suite("One-row saves: one round trip, nothing written on a version miss")
struct OneRowSaveTests {
    /// Through a proxy that counts the client's round trips (its `Sync` and `Query`
    /// messages), a private and a main context each save one changed object in one
    /// round trip: `BEGIN`, the statement (update, change record, notification) and
    /// `COMMIT` together. The server shows the row written once and one change record.
    @Test func aOneRowUpdateIsOneRoundTrip() throws {
        try OneRowSaveRig.run { rig in
            let (admin, proxy, manager) = (rig.admin, rig.proxy, rig.manager)
            func stored() throws -> (version: Int64, age: Int, records: Int) {
                let row = try admin.query(
                    "SELECT version, age, (SELECT count(*) FROM pgdatakit_changes) FROM users WHERE user_id = 'one'")[0]
                return (try row.decode(Int64.self, at: 0), try row.decode(Int.self, at: 1), try row.decode(Int.self, at: 2))
            }
            let context = manager.newPrivateContext()
            let user = try context.performAndWait { () throws -> User in
                let user = User(context: context)
                user.userID = "one"
                user.age = 0
                try context.save()
                return user
            }
            // The saves' notifications follow their commits on the notifier's own session
            // (`ChangeNotifier`): held back while the saves are counted, then sent together.
            let announced = ContinuousClock.now + .seconds(10)
            while manager.coordinator.notifier.counts.payloads < 1, ContinuousClock.now < announced { usleep(1_000) }
            manager.coordinator.notifier.hold(true)
            let sentBefore = manager.coordinator.notifier.counts
            let notificationsBefore = manager.coordinator.notifier.notificationCount
            for age in 1...3 {
                let before = try stored()
                let trips = proxy.roundTrips
                try context.performAndWait {
                    user.age = age
                    try context.save()
                }
                #expect(proxy.roundTrips - trips == 1, "a private context's one-row save")
                let after = try stored()
                #expect(after.version == before.version + 1 && after.age == age && after.records == before.records + 1)
                #expect(context.performAndWait { user.storage.version } == after.version)
            }

            let main = manager.mainContext
            let held = try main.performAndWait { try #require(try User.first(in: main, where: "userID == 'one'")) }
            let before = try stored()
            let trips = proxy.roundTrips
            try main.performAndWait {
                held.name = "main"
                try main.save()
            }
            #expect(proxy.roundTrips - trips == 1, "the main context's one-row save")
            let after = try stored()
            #expect(after.version == before.version + 1 && after.records == before.records + 1)
            let notifierTrips = proxy.roundTrips
            manager.coordinator.notifier.hold(false)
            let deadline = ContinuousClock.now + .seconds(10)
            while manager.coordinator.notifier.counts.payloads < sentBefore.payloads + 4, ContinuousClock.now < deadline {
                usleep(1_000)
            }
            let sent = manager.coordinator.notifier.counts
            #expect(sent.payloads - sentBefore.payloads == 4)
            #expect(sent.transactions - sentBefore.transactions == 1, "four saves' notifications in one transaction")
            #expect(
                manager.coordinator.notifier.notificationCount - notificationsBefore == 1,
                "their payloads in one notification (ChangeLog.combined)")
            #expect(proxy.roundTrips - notifierTrips == 1, "the notifier's one round trip")
        }
    }

    /// A row changed behind the context's back (its version moved on): the one-row save
    /// writes nothing — no row, no change record, no notification — and then resolves
    /// as any save does: `.error` throws a merge conflict, an object-trump policy writes
    /// again on top of the stored row.
    @Test func aVersionMissWritesNothingAndIsResolvedByThePolicy() throws {
        try ExampleSchema.withManager { manager in
            let admin = try Connection(manager.coordinator.pool.configuration)
            defer { admin.close() }
            let main = manager.mainContext
            let user = try main.performAndWait { () throws -> User in
                let user = User(context: main)
                user.userID = "missed"
                user.age = 1
                try main.save()
                return user
            }
            func records() throws -> Int { try admin.query("SELECT count(*) FROM pgdatakit_changes")[0].decode(Int.self, at: 0) }
            // Another program (not this library: no change record) moves the row on.
            try admin.execute("UPDATE users SET age = 50, version = version + 1 WHERE user_id = 'missed'")
            let before = try records()
            main.performAndWait {
                main.mergePolicy = .error
                user.name = "mine"
                #expect(throws: MergeConflictError.self) { try main.save() }
            }
            #expect(try records() == before)
            #expect(try admin.query("SELECT name IS NULL FROM users WHERE user_id = 'missed'")[0].decode(Bool.self, at: 0))

            try main.performAndWait {
                main.mergePolicy = .mergeByPropertyObjectTrump
                try main.save()
            }
            #expect(try records() == before + 1)
            let row = try admin.query("SELECT name, age, version FROM users WHERE user_id = 'missed'")[0]
            #expect(try row.decode(String.self, at: 0) == "mine")
            #expect(try row.decode(Int.self, at: 1) == 50)
            #expect(try row.decode(Int64.self, at: 2) == 3)
            #expect(main.performAndWait { user.storage.version } == 3)
        }
    }

    /// A save that changes one object's to-one relationship (its foreign key), with or
    /// without attributes, is one round trip too: the row gets the new key, the record
    /// names the relationship as a changed key (as the general path's does), and the
    /// object's committed key moves on (a second save of the same object sends nothing).
    @Test func aForeignKeyChangeIsOneRoundTrip() throws {
        try OneRowSaveRig.run { rig in
            let manager = rig.manager
            manager.coordinator.notifier.hold(true)
            let context = manager.newPrivateContext()
            let (post, alice, bob) = try context.performAndWait { () throws -> (Post, User, User) in
                let alice = User(context: context)
                alice.userID = "alice"
                let bob = User(context: context)
                bob.userID = "bob"
                let post = Post(context: context)
                post.postID = "p1"
                post.user = alice
                try context.save()
                return (post, alice, bob)
            }
            func stored() throws -> (user: Int64?, title: String?) {
                let row = try rig.admin.query("SELECT user_id, title FROM posts WHERE post_id = 'p1'")[0]
                return (try row.decode(Int64?.self, at: 0), try row.decode(String?.self, at: 1))
            }
            var storedTitle: String?
            for (target, title) in [(bob, nil), (nil, "none"), (alice, "alice again")] as [(User?, String?)] {
                let trips = rig.proxy.roundTrips
                try context.performAndWait {
                    post.user = target
                    if let title { post.title = title }
                    try context.save()
                }
                #expect(rig.proxy.roundTrips - trips == 1, "to \(target?.userID ?? "none")")
                storedTitle = title ?? storedTitle
                let row = try stored()
                #expect(row.user == target?.objectID.primaryKey)
                #expect(row.title == storedTitle)
                var expected = ContextChanges()
                expected.updated = [post.objectID]
                expected.changedKeys = [post.objectID: title == nil ? ["user"] : ["title", "user"]]
                try rig.expectLastRecord(expected)
                let statements = manager.coordinator.statementCount
                try context.performAndWait { try context.save() }
                #expect(manager.coordinator.statementCount == statements, "nothing left to save")
            }
            #expect(context.performAndWait { alice.posts.map(\.postID) } == ["p1"])
            manager.coordinator.notifier.hold(false)
        }
    }
}
