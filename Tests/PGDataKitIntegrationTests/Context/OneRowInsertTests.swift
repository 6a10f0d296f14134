import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Saves that insert one object: its key drawn, its row and change record written and
/// the transaction committed in one statement and one round trip (three before: the key,
/// the row, the record), with the same row, record and notification as before.
@Suite("One-object inserts: one round trip, the record as any save writes it")
struct OneRowInsertTests {
    /// Through a proxy that counts the client's round trips, a private and a main context
    /// each insert one object in one round trip; the row carries the key the object's
    /// permanent ID names, the change record is the one a save that reserved the key
    /// first writes (compared as JSON), and another manager's listener reads it as an
    /// insert of that ID.
    @Test func aOneObjectInsertIsOneRoundTripWithTheUsualRecord() throws {
        try OneRowSaveRig.run { rig in
            // The saves' notifications follow their commits on the notifier's own session
            // (`ChangeNotifier`), through the proxy too: held back while the saves' round
            // trips are counted, then sent.
            rig.manager.coordinator.notifier.hold(true)
            var saved: [ObjectID] = []
            for (name, context) in [("private", rig.manager.newPrivateContext()), ("main", rig.manager.mainContext)] {
                let trips = rig.proxy.roundTrips
                let id = try context.performAndWait { () throws -> ObjectID in
                    let user = User(context: context)
                    user.userID = "one-\(name)"
                    user.age = 7
                    try context.save()
                    #expect(!user.objectID.isTemporaryID)
                    #expect(user.storage.version == 1)
                    return user.objectID
                }
                #expect(rig.proxy.roundTrips - trips == 1, "a \(name) context's one-object insert")
                let key = try #require(id.primaryKey)
                let row = try rig.admin.query("SELECT user_id, age, version FROM users WHERE id = $1", [key])
                #expect(row.count == 1)
                #expect(try row[0].decode(String.self, at: 0) == "one-\(name)")
                #expect(try row[0].decode(Int.self, at: 1) == 7 && row[0].decode(Int64.self, at: 2) == 1)
                var expected = ContextChanges()
                expected.inserted = [id]
                try rig.expectLastRecord(expected)
                saved.append(id)
            }
            rig.manager.coordinator.notifier.hold(false)
            #expect(rig.hearing(2).map(\.inserted) == saved.map { [$0] })
        }
    }

    /// A one-object insert the database refuses (a unique value taken) throws the
    /// database's error, stores nothing (no row, no change record) and leaves the object
    /// inserted with its temporary ID; corrected, it saves.
    @Test func aRefusedInsertStoresNothingAndCanBeSavedAgain() throws {
        try ExampleSchema.withManager { manager in
            let admin = try Connection(manager.coordinator.pool.configuration)
            defer { admin.close() }
            func counts() throws -> (users: Int, records: Int) {
                let row = try admin.query("SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM pgdatakit_changes)")[0]
                return (try row.decode(Int.self, at: 0), try row.decode(Int.self, at: 1))
            }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let first = User(context: context)
                first.userID = "taken"
                try context.save()
            }
            let before = try counts()
            let other = manager.newPrivateContext()
            try other.performAndWait {
                let second = User(context: other)
                second.userID = "taken"
                #expect {
                    try other.save()
                } throws: { error in
                    (error as? PostgresError)?.sqlState == .uniqueViolation
                }
                #expect(second.objectID.isTemporaryID)
                #expect(other.insertedObjects.contains(second))
                #expect(try counts() == before)
                second.userID = "free"
                try other.save()
                #expect(!second.objectID.isTemporaryID)
            }
            #expect(try counts() == (before.users + 1, before.records + 1))
        }
    }

    /// An object of a sub-entity (its record names the concrete entity by key, the key
    /// twice) and an object with a to-one relationship to a saved one (the foreign key
    /// written) are inserted in one round trip each, and read back as saved.
    @Test func subEntitiesAndForeignKeysAreWritten() throws {
        try InheritanceSchema.withDatabase { configuration in
            let admin = try Connection(configuration)
            defer { admin.close() }
            let proxy = try CuttingProxy(inFrontOf: configuration) { _ in }
            defer { proxy.close() }
            let manager = try ContextManager(configuration: proxy.configuration, entities: InheritanceSchema.entities)
            defer { manager.close() }
            manager.coordinator.notifier.hold(true)  // (its session goes through the proxy: see above)
            let context = manager.newPrivateContext()
            let folder = try context.performAndWait { () throws -> ObjectID in
                let folder = FeedFolder(context: context)
                folder.name = "inbox"
                try context.save()
                return folder.objectID
            }
            let trips = proxy.roundTrips
            let video = try context.performAndWait { () throws -> ObjectID in
                let video = FeedVideo(context: context)
                video.title = "clip"
                video.seconds = 42
                video.folder = try #require(try context.existingObject(with: folder) as? FeedFolder)
                try context.save()
                return video.objectID
            }
            let folderKey = try #require(folder.primaryKey)
            let key = try #require(video.primaryKey)
            let row = try admin.query("SELECT entity, title, seconds, folder_id FROM contents WHERE id = $1", [key])[0]
            #expect(try row.decode(String.self, at: 0) == "Video" && row.decode(String.self, at: 1) == "clip")
            #expect(try row.decode(Int.self, at: 2) == 42 && row.decode(Int64.self, at: 3) == folderKey)
            var expected = ContextChanges()
            expected.inserted = [video]
            expected.entityNames = [video: "Video"]
            try OneRowSaveRig.expectLastRecord(expected, on: admin)
            #expect(proxy.roundTrips - trips == 1, "a video with its folder")
            manager.coordinator.notifier.hold(false)
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let read = try #require(try FeedContent.first(in: reader, where: "title == 'clip'") as? FeedVideo)
                #expect(read.objectID == video && read.seconds == 42 && read.folder?.name == "inbox")
            }
        }
    }

    /// The placeholder the record's key is written as is `Int64.min`'s text, and the
    /// record of a one-object insert holds it exactly where the key goes.
    @Test func thePlaceholderIsTheKeysText() throws {
        #expect(String(ChangeLog.keyPlaceholder) == ChangeLog.keyPlaceholderText)
        var changes = ContextChanges()
        let id = ObjectID(entityName: "User", primaryKey: ChangeLog.keyPlaceholder)
        changes.inserted = [id]
        let record = try ChangeLog.encode(changes)
        var real = ContextChanges()
        real.inserted = [ObjectID(entityName: "User", primaryKey: 4711)]
        #expect(record.replacingOccurrences(of: ChangeLog.keyPlaceholderText, with: "4711") == (try ChangeLog.encode(real)))
        #expect(ChangeLog.placeholderCount(in: record) == 1)
        let text = ChangeLog.keyPlaceholderText
        for (sample, count) in [
            ("", 0), (text, 1), (text + text, 2), ("--" + text + "-", 1), ("-922" + text, 1), (String(text.dropLast()), 0),
            ("[\(text),\(text)]", 2), ("-9223372036854775807", 0), ("é" + text + "é", 1),
        ] {
            #expect(ChangeLog.placeholderCount(in: sample) == count, "\(sample)")
        }
    }
}
