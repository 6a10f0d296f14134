import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Saves that delete one object: the row deleted with its version checked, the change
/// record written and the transaction committed in one statement and one round trip
/// (three before: the lock, the delete, the record), with the same record as before.
@Suite("One-object deletes: one round trip, nothing written on a version miss")
struct OneRowDeleteTests {
    /// Through a proxy that counts the client's round trips, a private and a main context
    /// each delete one saved object (of an entity without relationships, whose delete
    /// rules need no fetch of related objects) in one round trip; the row is gone, the change record
    /// is the one the general path writes (compared as JSON), and another manager's
    /// listener reads it as a delete of that ID.
    @Test func aOneObjectDeleteIsOneRoundTripWithTheUsualRecord() throws {
        try OneRowSaveRig.run { rig in
            let manager = rig.manager
            let setup = manager.newPrivateContext()
            let ids = try setup.performAndWait { () throws -> [ObjectID] in
                let samples = ["gone-private", "gone-main"].map { text -> Sample in
                    let sample = Sample(context: setup)
                    sample.text = text
                    return sample
                }
                try setup.save()
                return samples.map(\.objectID)
            }
            // The notifier's session goes through the proxy too: once it sent the inserts'
            // notification, held back while the deletes' round trips are counted.
            let announced = ContinuousClock.now + .seconds(10)
            while manager.coordinator.notifier.counts.payloads < 1, ContinuousClock.now < announced { usleep(1_000) }
            manager.coordinator.notifier.hold(true)
            for (id, context) in zip(ids, [manager.newPrivateContext(), manager.mainContext]) {
                // Fetched first (its version known), in a block of its own: a main context's
                // reads in one block share a transaction, which a save in that block ends first.
                let sample = try context.performAndWait { try context.existingObject(with: id) }
                let trips = rig.proxy.roundTrips
                try context.performAndWait {
                    context.delete(sample)
                    try context.save()
                }
                #expect(rig.proxy.roundTrips - trips == 1, "\(context.concurrencyType == .main ? "the main" : "a private") context's delete")
                let key = try #require(id.primaryKey)
                #expect(try rig.admin.query("SELECT count(*) FROM samples WHERE id = $1", [key])[0].decode(Int.self, at: 0) == 0)
                var expected = ContextChanges()
                expected.deleted = [id]
                try rig.expectLastRecord(expected)
            }
            manager.coordinator.notifier.hold(false)
            #expect(rig.hearing(3).dropFirst().map(\.deleted) == ids.map { [$0] })
        }
    }

    /// A row changed behind the context's back: the one-object delete deletes nothing and
    /// writes no record, then resolves as any save does: `.error` throws a merge conflict
    /// (the row stays), an object-trump policy deletes the row.
    @Test func aVersionMissDeletesNothingAndIsResolvedByThePolicy() throws {
        try ExampleSchema.withManager { manager in
            let admin = try Connection(manager.coordinator.pool.configuration)
            defer { admin.close() }
            func stored() throws -> (users: Int, records: Int) {
                let row = try admin.query(
                    "SELECT (SELECT count(*) FROM users WHERE user_id = 'moved'), (SELECT count(*) FROM pgdatakit_changes)")[0]
                return (try row.decode(Int.self, at: 0), try row.decode(Int.self, at: 1))
            }
            let main = manager.mainContext
            let user = try main.performAndWait { () throws -> User in
                let user = User(context: main)
                user.userID = "moved"
                try main.save()
                return user
            }
            // Another program (not this library: no change record) moves the row on.
            try admin.execute("UPDATE users SET age = 50, version = version + 1 WHERE user_id = 'moved'")
            let before = try stored()
            main.performAndWait {
                main.mergePolicy = .error
                main.delete(user)
                #expect(throws: MergeConflictError.self) { try main.save() }
            }
            #expect(try stored() == before)
            try main.performAndWait {
                main.mergePolicy = .mergeByPropertyObjectTrump
                try main.save()
            }
            #expect(try stored() == (0, before.records + 1))
        }
    }
}
