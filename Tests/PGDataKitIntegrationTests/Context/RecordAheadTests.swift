import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A save's change record is made while its last `UPDATE` runs (`SavePipeline.RecordAhead`)
/// and committed when that statement found every row; any other outcome makes the
/// record again from what was written. Either way the stored record is the one of the
/// save's real outcome.
@Suite("Change records made while the last UPDATE runs")
struct RecordAheadTests {
    /// Saves `count` new users (`userID` `u0`, `u1`, …) and returns their IDs.
    private func seed(_ count: Int, in manager: ContextManager) throws -> [ObjectID] {
        let context = manager.newPrivateContext()
        return try context.performAndWait {
            let users = ExampleSchema.insertUsers(count, in: context)
            try context.save()
            return users.map(\.objectID)
        }
    }

    /// The record a save of these updates writes.
    private func updates(_ ids: [ObjectID], keys: (ObjectID) -> Set<String>) -> ContextChanges {
        var changes = ContextChanges()
        changes.updated = Set(ids)
        for id in ids { changes.changedKeys[id] = keys(id) }
        return changes
    }

    private func madeAhead(_ manager: ContextManager) -> Int {
        manager.coordinator.recordsMadeAhead.load(ordering: .relaxed)
    }

    /// A batch's `UPDATE` (past `StoreCoordinator.shortListLength` rows: not prepared)
    /// finds every row: the record made while it ran is the one committed.
    @Test func aBatchWhoseUpdateFindsEveryRowCommitsTheRecordMadeAhead() throws {
        try ExampleSchema.withManager { manager in
            let ids = try seed(200, in: manager)
            let before = madeAhead(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for user in try User.fetchAll(in: context) { user.name = "renamed " + user.userID }
                try context.save()
            }
            #expect(madeAhead(manager) == before + 1)
            try manager.coordinator.pool.withConnection { admin in
                try OneRowSaveRig.expectLastRecord(updates(ids) { _ in ["name"] }, on: admin)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'renamed ' || user_id", in: manager) == 200)
        }
    }

    /// Two shapes (name changed in one half, age in the other): two `UPDATE`s, the
    /// record made while the second ran lists both halves with their own keys.
    @Test func theRecordMadeAheadHoldsTheEarlierStatementsToo() throws {
        try ExampleSchema.withManager { manager in
            let ids = try seed(300, in: manager)
            let before = madeAhead(manager)
            let context = manager.newPrivateContext()
            var named: Set<ObjectID> = []
            try context.performAndWait {
                for (offset, user) in try User.fetchAll(in: context).enumerated() {
                    if offset.isMultiple(of: 2) {
                        user.name = "even"
                        named.insert(user.objectID)
                    } else {
                        user.age = offset
                    }
                }
                try context.save()
            }
            #expect(madeAhead(manager) == before + 1)
            try manager.coordinator.pool.withConnection { admin in
                try OneRowSaveRig.expectLastRecord(updates(ids) { named.contains($0) ? ["name"] : ["age"] }, on: admin)
            }
        }
    }

    /// Another transaction changed one of the rows: the last `UPDATE` misses it, the
    /// record made ahead is not the outcome's. Under `.error` nothing is written; under
    /// a policy that merges, the redo (read committed, its rows locked and read first)
    /// writes them again, its `UPDATE` finds every row, and the record made while it
    /// ran is committed.
    @Test(arguments: [MergePolicy.error, .mergeByPropertyObjectTrump])
    func aRowTheUpdateMissesMakesTheRecordAgain(policy: MergePolicy) throws {
        try ExampleSchema.withManager { manager in
            let ids = try seed(200, in: manager)
            let context = manager.newPrivateContext()
            let users = try context.performAndWait {
                let users = try User.fetchAll(in: context)
                try context.save()  // (nothing to write: the transaction ends, the objects stay)
                return users
            }
            // Changed after the read, before the save's transaction: its lock takes the
            // row as it is now, its `UPDATE` misses the version read.
            _ = try manager.coordinator.pool.withConnection { other in
                try other.execute("UPDATE users SET age = 7, version = version + 1 WHERE user_id = 'u17'")
            }
            let records = try ExampleSchema.count("SELECT count(*) FROM pgdatakit_changes", in: manager)
            let before = madeAhead(manager)
            let result = context.performAndWait { () -> Result<Void, any Error> in
                for user in users { user.name = "mine" }
                context.mergePolicy = policy
                return Result { try context.save() }
            }
            #expect(madeAhead(manager) == before + (policy == .error ? 0 : 1), "the first attempt's is not used")
            let stored = try ExampleSchema.count("SELECT count(*) FROM pgdatakit_changes", in: manager)
            switch policy {
            case .error:
                guard case .failure(let error) = result, let conflict = error as? MergeConflictError else {
                    Issue.record("expected a MergeConflictError, got \(result)")
                    return
                }
                #expect(conflict.conflicts.count == 1)
                #expect(stored == records, "no record")
                #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'mine'", in: manager) == 0)
            default:
                try result.get()
                #expect(stored == records + 1)
                try manager.coordinator.pool.withConnection { admin in
                    try OneRowSaveRig.expectLastRecord(updates(ids) { _ in ["name"] }, on: admin)
                }
                #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'mine' AND age IS NOT DISTINCT FROM (CASE WHEN user_id = 'u17' THEN 7 END)", in: manager) == 200)
            }
        }
    }

    /// A short batch's `UPDATE` is prepared by name: the first time in a pipeline with its
    /// run (the record made ahead), later with `PQexecPrepared`, which runs no work while
    /// it waits (the record made after it, as before). The records are the same.
    @Test func aPreparedUpdateMakesItsRecordAfterIt() throws {
        try ExampleSchema.withManager { manager in
            let ids = try seed(20, in: manager)
            let context = manager.newPrivateContext()
            for round in 0..<3 {
                let before = madeAhead(manager)
                try context.performAndWait {
                    for user in try User.fetchAll(in: context) { user.age = round }
                    try context.save()
                }
                #expect(madeAhead(manager) == before + (round == 0 ? 1 : 0), "round \(round)")
                try manager.coordinator.pool.withConnection { admin in
                    try OneRowSaveRig.expectLastRecord(updates(ids) { _ in ["age"] }, on: admin)
                }
            }
        }
    }

    /// A save that also changes many-to-many sets: their join rows are written after the
    /// updates and add the sets' names to the objects' keys. Every story is rescored and
    /// one of them, and the topic (renamed), gain each other: the record lists the sets'
    /// names with the two objects' own keys.
    @Test func changedManyToManySetsAreInTheRecord() throws {
        try ManyToManySchema.withManager { manager in
            let seeding = manager.newPrivateContext()
            try seeding.performAndWait {
                for index in 0..<200 { Story(context: seeding).code = "c\(index)" }
                Topic(context: seeding).name = "t"
                try seeding.save()
            }
            let context = manager.newPrivateContext()
            let (storyID, topicID) = try context.performAndWait {
                let topic = try #require(try Topic.fetchAll(in: context).first)
                var chosen: Story?
                for story in try Story.fetchAll(in: context) {
                    story.score = 1
                    if story.code == "c5" { chosen = story }
                }
                let story = try #require(chosen)
                topic.name = "renamed"
                story.topics = [topic]
                try context.save()
                return (story.objectID, topic.objectID)
            }
            let text = try manager.coordinator.pool.withConnection { admin in
                try admin.query("SELECT changes::text FROM pgdatakit_changes ORDER BY id DESC LIMIT 1")[0].decode(String.self, at: 0)
            }
            let record = try ChangeLog.decode(text)
            #expect(record.updated.count == 201)
            #expect(record.changedKeys[storyID] == ["score", "topics"], "\(text)")
            #expect(record.changedKeys[topicID] == ["name", "stories"], "\(text)")
        }
    }
}
