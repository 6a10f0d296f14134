import Foundation
import Synchronization
import PGDataKit
import Testing

@Suite("insertOrUpdate: one fetch per batch, keys, duplicates, stubs, upserts")
struct InsertOrUpdateTests {
    @Test func oneFetchPerBatchAndABoundedSave() throws {
        try ImportSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                _ = try User.count(in: context)  // opens the transaction, so only the import's statements count
                var before = manager.coordinator.statementCount
                let users = try User.insertOrUpdate(
                    ImportSchema.userRecords(0..<1000), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context,
                    batchSize: 1000, ImportSchema.setUser)
                #expect(manager.coordinator.statementCount - before == 1)  // one = ANY fetch
                #expect(users.count == 1000)
                #expect(context.insertedObjects.count == 1000)
                before = manager.coordinator.statementCount
                try context.save()
                // the claim (the sequence assigns the keys): a savepoint, a plain INSERT and
                // its release in one round trip (`PlainClaimTests`); the change record, commit
                #expect(manager.coordinator.statementCount - before == 5)
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 1000)

            // Again with four batches: four fetches; half the records changed.
            let again = manager.newPrivateContext()
            try again.performAndWait {
                _ = try User.count(in: again)
                var records = ImportSchema.userRecords(0..<1000)
                for index in 0..<500 { records[index] = ["UserID": .string("u\(index)"), "Name": "Renamed", "Age": .number(Double(100 + index))] }
                var before = manager.coordinator.statementCount
                let users = try User.insertOrUpdate(
                    records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: again, batchSize: 250,
                    ImportSchema.setUser)
                #expect(manager.coordinator.statementCount - before == 4)
                #expect(users.count == 1000)
                #expect(again.insertedObjects.isEmpty)
                #expect(again.updatedObjects.count == 500)
                before = manager.coordinator.statementCount
                try again.save()
                // the rows locked in key order (see `lockRows`), one UPDATE, the change
                // record, commit
                #expect(manager.coordinator.statementCount - before == 4)
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'Renamed' AND version = 2", in: manager) == 500)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE version = 1", in: manager) == 500)
        }
    }

    @Test func objectsAlreadyInTheContextCountAsExisting() throws {
        try ImportSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let pending = User(context: context)
                pending.userID = "u1"
                let first = try User.insertOrUpdate(
                    ImportSchema.userRecords(0..<3), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context,
                    ImportSchema.setUser)
                #expect(first[1] === pending)
                #expect(pending.name == "User 1")
                #expect(context.insertedObjects.count == 3)
                // A second call finds the objects the first one inserted, without saving.
                let second = try User.insertOrUpdate(
                    ImportSchema.userRecords(0..<3, name: "Again"), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID",
                    in: context, ImportSchema.setUser)
                #expect(zip(first, second).allSatisfy { $0 === $1 })
                #expect(context.insertedObjects.count == 3)
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name LIKE 'Again%'", in: manager) == 3)
        }
    }

    @Test func duplicateKeysShareOneObjectAppliedInInputOrder() throws {
        try ImportSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let records: [JSONValue] = [
                    ["UserID": "a", "Name": "first"], ["UserID": "b", "Name": "only b"], ["UserID": "a", "Name": "second"],
                    ["UserID": "a", "Age": 7],
                ]
                var seen: [String] = []
                let users = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) {
                    record, user in
                    seen.append(record["Name"]?.stringValue ?? "-")
                    if let name = record["Name"]?.stringValue { user.name = name }
                    if let age = record["Age"]?.intValue { user.age = age }
                }
                #expect(users.map(\.userID) == ["a", "b"])
                #expect(seen == ["first", "second", "-", "only b"])  // per object, in input order
                #expect(users[0].name == "second")
                #expect(users[0].age == 7)
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 2)
        }
    }

    /// Two new objects of one unique key in one save are refused as a unique violation,
    /// whichever of them the import made: the save writes nothing and the context keeps
    /// its changes (before, the second object was inserted and the imported one merged
    /// onto its row, leaving two objects with one object ID).
    @Test func twoNewObjectsWithOneKeyAreRefusedAsAUniqueViolation() throws {
        try ImportSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let users = try User.insertOrUpdate(
                    ImportSchema.userRecords(0..<3), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context,
                    ImportSchema.setUser)
                users[2].userID = "u0"  // two imported objects with one key now
                #expect { try context.save() } throws: { ($0 as? PostgresError)?.sqlState == .uniqueViolation }
                #expect(context.insertedObjects.count == 3)
                users[2].userID = "u2"
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 3)

            // A plain new object given the key of an imported one.
            let again = manager.newPrivateContext()
            try again.performAndWait {
                let users = try User.insertOrUpdate(
                    ImportSchema.userRecords(3..<5), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: again,
                    ImportSchema.setUser)
                let plain = User(context: again)
                plain.userID = "u4"
                #expect { try again.save() } throws: { ($0 as? PostgresError)?.sqlState == .uniqueViolation }
                #expect(again.insertedObjects.count == 3)
                plain.userID = "u5"
                try again.save()
                #expect(users.map(\.objectID).allSatisfy { $0 != plain.objectID })
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 6)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE version <> 1", in: manager) == 0)
        }
    }

    /// Keys are told apart as PostgreSQL tells them apart (byte for byte), not by Swift's
    /// `String` equality, which holds canonically equivalent texts equal: "café" written
    /// with a precomposed é and with e plus a combining accent are two keys, two rows.
    @Test func canonicallyEquivalentKeysAreTwoKeys() throws {
        try ImportSchema.withManager { manager in
            let composed = "caf\u{E9}"
            let decomposed = "cafe\u{301}"
            #expect(composed == decomposed)  // (Swift's view)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let records: [JSONValue] = [
                    ["UserID": .string(composed), "Name": "composed"], ["UserID": .string(decomposed), "Name": "decomposed"],
                ]
                let users = try User.insertOrUpdate(
                    records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, ImportSchema.setUser)
                #expect(users.count == 2)
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 2)

            // Again, now that both rows exist: each record finds its own row.
            let again = manager.newPrivateContext()
            try again.performAndWait {
                let records: [JSONValue] = [
                    ["UserID": .string(decomposed), "Name": "decomposed 2"], ["UserID": .string(composed), "Name": "composed 2"],
                ]
                let users = try User.insertOrUpdate(
                    records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: again, ImportSchema.setUser)
                #expect(users.count == 2)
                #expect(again.insertedObjects.isEmpty)
                #expect(users.map { Array($0.userID.unicodeScalars) } == [Array(decomposed.unicodeScalars), Array(composed.unicodeScalars)])
                try again.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name LIKE '% 2' AND version = 2", in: manager) == 2)
            #expect(
                try ExampleSchema.count("SELECT count(*) FROM users WHERE user_id = $1 AND name = 'composed 2'", [composed], in: manager) == 1)
        }
    }

    /// Fetched rows are matched to the batch's keys in the order the keys were sent, a few
    /// positions at a time, then by hash: stored rows far apart among many new keys, and
    /// a key given twice, each meet their own records.
    @Test func sparseStoredKeysAmongNewOnesMeetTheirOwnRecords() throws {
        try ImportSchema.withManager { manager in
            let stored: Set<Int> = [0, 6, 7, 19, 20, 21, 22, 23, 24, 39]
            let seed = manager.newPrivateContext()
            try seed.performAndWait {
                _ = try User.insertOrUpdate(
                    ImportSchema.userRecords(0..<40).enumerated().filter { stored.contains($0.offset) }.map(\.element),
                    uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: seed, ImportSchema.setUser)
                try seed.save()
            }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                // Reversed halves, so the stored rows come back in neither the records'
                // order nor the table's; u6 twice.
                var records = Array(ImportSchema.userRecords(0..<20, name: "Again").reversed())
                records += ImportSchema.userRecords(20..<40, name: "Again")
                records.append(["UserID": "u6", "Name": "Again 6 twice", "Age": 6])
                let users = try User.insertOrUpdate(
                    records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, batchSize: 100,
                    ImportSchema.setUser)
                #expect(users.count == 40)
                #expect(context.insertedObjects.count == 40 - stored.count)
                #expect(context.updatedObjects.count == stored.count)
                for user in users {
                    let expected = user.userID == "u6" ? "Again 6 twice" : "Again " + user.userID.dropFirst()
                    #expect(user.name == expected, "\(user.userID)")
                    #expect(context.insertedObjects.contains(user) != stored.contains(Int(user.userID.dropFirst()) ?? -1))
                }
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 40)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE version = 2", in: manager) == stored.count)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'Again ' || substr(user_id, 2)", in: manager) == 39)

            // Integer keys, some given as text: compared as numbers.
            for (owner, numbers) in [("first", [JSONValue(3), 40, 9]), ("second", [JSONValue(1), "3", 2, 9, 5, 6, 7, 40])] {
                let accounts = manager.newPrivateContext()
                try accounts.performAndWait {
                    let found = try Account.insertOrUpdate(
                        numbers.map { ["number": $0, "owner": .string(owner)] }, uniqueModelKey: \.number,
                        uniqueRemoteKey: "number", in: accounts
                    ) { record, account in account.owner = record["owner"]?.stringValue }
                    #expect(found.allSatisfy { $0.owner == owner })
                    try accounts.save()
                }
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM accounts", in: manager) == 8)
            #expect(try ImportSchema.integer("SELECT count(*) FROM accounts WHERE owner = 'second' AND version = 2", in: manager) == 3)
        }
    }

    @Test func aMissingOrNullKeyNamesTheRecordAndLeavesTheContextAsItWas() throws {
        try ImportSchema.withManager { manager in
            let seed = manager.newPrivateContext()
            try seed.performAndWait {
                try User.insertOrUpdate(
                    ImportSchema.userRecords(0..<2), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: seed,
                    ImportSchema.setUser)
                try seed.save()
            }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for bad: JSONValue in [["Name": "no key"], ["UserID": nil, "Name": "null key"]] {
                    // The first batch (records 0–2) is fine and changes u0; the bad record is 4.
                    let records = ImportSchema.userRecords(0..<3, name: "Changed") + [["UserID": "u9"], bad]
                    do {
                        try User.insertOrUpdate(
                            records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, batchSize: 3,
                            ImportSchema.setUser)
                        Issue.record("expected an error")
                    } catch let error as ImportError {
                        guard error.code == .missingKey else {
                            Issue.record("unexpected \(error)")
                            continue
                        }
                        #expect(error.recordIndex == 4 && error.key == "UserID" && error.entity == "User")
                        #expect(error.attribute == "userID")
                        #expect(error.description.contains("record 4"))
                    }
                    #expect(!context.hasChanges)
                    let u0 = try #require(try User.first(in: context, where: "userID == 'u0'"))
                    #expect(u0.name == "User 0")
                }
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 2)
        }
    }

    /// Existing posts relinked to a new stub user in a batch that then fails: the revert
    /// must not let the stub's cascade rule delete them.
    @Test func aFailingSetterRevertsLinksAndStubs() throws {
        try ImportSchema.withManager { manager in
            struct Refused: Error {}
            let link = ObjectMap<Post>.relationship("UserID", to: \.user, matching: \User.userID)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let records: [JSONValue] = [["PostID": "p1", "UserID": "u1"], ["PostID": "p2", "UserID": "u1"]]
                try Post.insertOrUpdate(records, uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context, relationships: [link])
                try context.save()
                let moved: [JSONValue] = [["PostID": "p1", "UserID": "new"], ["PostID": "p2", "UserID": "new"], ["PostID": "p3", "Title": "bad"]]
                do {
                    try Post.insertOrUpdate(moved, uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context, relationships: [link]) {
                        record, _ in
                        if record["Title"] != nil { throw Refused() }
                    }
                    Issue.record("expected the setter's error")
                } catch let error as ImportError where error.code == .recordFailed {
                    #expect(error.recordIndex == 2)
                    #expect(error.underlying is Refused)
                }
                #expect(!context.hasChanges)
                #expect(context.deletedObjects.isEmpty)
                let posts = try Post.fetchAll(in: context)
                #expect(posts.count == 2)
                #expect(posts.allSatisfy { $0.user?.userID == "u1" && !$0.isDeleted })
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM posts p JOIN users u ON u.id = p.user_id WHERE u.user_id = 'u1'", in: manager) == 2)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 1)
        }
    }

    @Test func keysConvertBetweenNumbersAndTextOrFailClearly() throws {
        try ImportSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                // A whole number for a text key, and its text for an integer key: the same key.
                let users = try User.insertOrUpdate(
                    [["UserID": 123], ["UserID": "123"]], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context)
                #expect(users.map(\.userID) == ["123"])
                let accounts = try Account.insertOrUpdate(
                    [["number": "42"], ["number": 42], ["number": 7]], uniqueModelKey: \.number, uniqueRemoteKey: "number",
                    in: context)
                #expect(accounts.map(\.number) == [42, 7])
                try context.save()

                let bad: [(JSONValue, String)] = [("abc", "a string that is not a whole number"), (1.5, "not a whole number"), (true, "a boolean")]
                for (value, actual) in bad {
                    do {
                        try Account.insertOrUpdate(
                            [["number": 1], ["number": value]], uniqueModelKey: \.number, uniqueRemoteKey: "number", in: context)
                        Issue.record("expected a type mismatch for \(value)")
                    } catch let error as ImportError where error.code == .typeMismatch {
                        #expect(error.recordIndex == 1 && error.key == "number" && error.entity == "Account")
                        #expect(error.attribute == "number")
                        #expect(error.expected == "Int")
                        #expect(error.actual?.contains(actual) == true)
                    }
                    #expect(!context.hasChanges)
                }
                for value: JSONValue in [1.5, true, ["nested": 1]] {
                    #expect(throws: ImportError.self) {
                        try User.insertOrUpdate([["UserID": value]], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context)
                    }
                }
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 1)
            #expect(try ImportSchema.integer("SELECT count(*) FROM accounts", in: manager) == 2)
        }
    }

    @Test func aKeyThatIsNotUniqueIsRefused() throws {
        try ImportSchema.withManager { manager in
            let context = manager.newPrivateContext()
            context.performAndWait {
                #expect {
                    try User.insertOrUpdate([["Name": "x"]], uniqueModelKey: \.name, uniqueRemoteKey: "Name", in: context)
                } throws: { error in
                    guard let error = error as? ImportError, error.code == .notUniqueKey else { return false }
                    return error.entity == "User" && error.attribute == "name"
                }
            }
        }
    }

    @Test func stubsFromBareKeysNeverOverwriteRows() throws {
        try ImportSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let stubs = try Post.insertOrUpdate(["p1", "p2", "p1"], uniqueModelKey: \.postID, uniqueRemoteKey: "self", in: context)
                #expect(stubs.map(\.postID) == ["p1", "p2"])
                #expect(stubs.allSatisfy { $0.title == nil })
                try context.save()
                // The full records fill the stubs in.
                try Post.insertOrUpdate(
                    [["PostID": "p1", "Title": "One"]], uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context
                ) { record, post in post.title = record["Title"]?.stringValue }
                try context.save()
                // Stubbing an existing post again changes nothing.
                let again = try Post.insertOrUpdate(["p1"], uniqueModelKey: \.postID, uniqueRemoteKey: "self", in: context)
                #expect(again.first?.title == "One")
                #expect(!context.hasChanges)
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM posts", in: manager) == 2)
            #expect(try ImportSchema.integer("SELECT count(*) FROM posts WHERE post_id = 'p1' AND title = 'One' AND version = 2", in: manager) == 1)
        }
    }

    /// Two contexts both find key "k" missing and both insert it: the second save meets the
    /// first one's row and updates it (one row, its id, a version bump, an update record).
    @Test func concurrentKeyedInsertsEndInOneRow() throws {
        try ImportSchema.withManager { manager in
            let first = manager.newPrivateContext()
            let second = manager.newPrivateContext()
            let firstUser = try first.performAndWait {
                try User.insertOrUpdate([["UserID": "k", "Name": "first", "Age": 30]], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: first, ImportSchema.setUser)[0]
            }
            let secondUser = try second.performAndWait {
                try User.insertOrUpdate([["UserID": "k", "Name": "second"]], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: second, ImportSchema.setUser)[0]
            }
            try first.performAndWait { try first.save() }
            let saved = Mutex<ContextChanges?>(nil)
            let token = second.observeDidSave { changes in saved.withLock { $0 = changes } }
            try second.performAndWait { try second.save() }
            token.cancel()
            let firstID = first.performAndWait { firstUser.objectID }
            second.performAndWait {
                #expect(secondUser.objectID == firstID)
                #expect(secondUser.name == "second")
                #expect(secondUser.age == 30)  // not in the second record: the row keeps it
                #expect(!second.hasChanges)
            }
            let changes = try #require(saved.withLock { $0 })
            #expect(changes.inserted.isEmpty)
            #expect(changes.updated == [firstID])
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 1)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'second' AND age = 30 AND version = 2", in: manager) == 1)

            // The same values again, from two more contexts at once: no update at all.
            let third = manager.newPrivateContext()
            _ = try third.performAndWait {
                try User.insertOrUpdate(["x"], uniqueModelKey: \.userID, uniqueRemoteKey: "self", in: third)
            }
            let fourth = manager.newPrivateContext()
            let fourthUser = try fourth.performAndWait {
                try User.insertOrUpdate([["UserID": "x", "Name": "same"]], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: fourth, ImportSchema.setUser)[0]
            }
            try third.performAndWait { try third.save() }
            try fourth.performAndWait { try fourth.save() }
            fourth.performAndWait { #expect(fourthUser.objectID.primaryKey != nil) }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE user_id = 'x' AND name = 'same' AND version = 2", in: manager) == 1)
        }
    }
}
