import Foundation
import Logging
import Testing
@testable import PGDataKit
@testable import PGDataKitPostgres

/// A save claims the new keys of a large import batch (`StoreCoordinator.plainClaimMinimum`
/// rows or more) with a plain `INSERT` inside a savepoint, not `ON CONFLICT DO NOTHING`;
/// when a key exists after all, it claims as before. What the server did is read from the
/// rows themselves: rows inserted inside the savepoint carry a subtransaction's id
/// (`xmin`), not the transaction id the save's change record names.
@Suite("Large claims: a plain INSERT first, ON CONFLICT when a key exists after all")
struct PlainClaimTests {
    static let redone = "save redone in a read-committed transaction"

    /// A manager whose coordinator logs through `handler`, on a fresh example database,
    /// and a plain connection to the database.
    func withManager(_ body: (ContextManager, RecordingLogHandler, Connection) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let handler = RecordingLogHandler()
            let manager = try ContextManager(
                configuration: configuration, entities: [User.self, Post.self], logger: Logger(label: "test") { _ in handler })
            defer { manager.close() }
            manager.coordinator.contentionWindow = .seconds(60)
            let other = try Connection(configuration)
            defer { other.close() }
            try body(manager, handler, other)
        }
    }

    /// `n` user records `u<i>`, imported into a new private context, unsaved.
    func importing(_ range: Range<Int>, in manager: ContextManager) throws -> ManagedObjectContext {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            _ = try User.insertOrUpdate(
                ImportSchema.userRecords(range), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context,
                ImportSchema.setUser)
        }
        return context
    }

    /// Of the users rows `condition` picks, how many were inserted by a subtransaction of
    /// the transaction whose change record is the latest (their `xmin` is not its id),
    /// and how many by it.
    func insertedInsideASavepoint(_ other: Connection, where condition: String = "true") throws -> (inside: Int, outside: Int) {
        let rows = try other.query(
            """
            SELECT count(*) FILTER (WHERE u.xmin::text <> c.transaction_id::text),
                   count(*) FILTER (WHERE u.xmin::text = c.transaction_id::text)
            FROM users AS u, (SELECT transaction_id FROM pgdatakit_changes ORDER BY id DESC LIMIT 1) AS c
            WHERE \(condition)
            """)
        return (try rows[0].decode(Int.self, at: 0), try rows[0].decode(Int.self, at: 1))
    }

    @Test func aLargeBatchOfNewKeysIsClaimedByAPlainInsertInsideASavepoint() throws {
        try withManager { manager, _, other in
            let context = try importing(0..<100, in: manager)
            let statements = try context.performAndWait {
                let before = manager.coordinator.statementCount
                try context.save()
                return manager.coordinator.statementCount - before
            }
            // SAVEPOINT, INSERT, RELEASE (one round trip), the change record, COMMIT.
            #expect(statements == 5)
            #expect(try insertedInsideASavepoint(other) == (100, 0))
            #expect(try other.query("SELECT count(*) FROM users WHERE version = 1 AND name LIKE 'User %'")[0].decode(Int.self, at: 0) == 100)
        }
    }

    @Test func aSmallBatchOrAContendedEntityClaimsWithOnConflict() throws {
        try withManager { manager, _, other in
            let small = try importing(0..<(StoreCoordinator.plainClaimMinimum - 1), in: manager)
            try small.performAndWait { try small.save() }
            #expect(try insertedInsideASavepoint(other) == (0, StoreCoordinator.plainClaimMinimum - 1))

            manager.coordinator.saveContention.noteContention(on: ["User"])
            let contended = try importing(1000..<1100, in: manager)
            try contended.performAndWait { try contended.save() }
            #expect(try insertedInsideASavepoint(other, where: "u.user_id LIKE 'u1___'") == (0, 100))
        }
    }

    /// Another transaction commits one of the batch's keys after the import looked: the
    /// plain `INSERT` meets it (`23505`), the savepoint is rolled back, and the save goes on
    /// as an `ON CONFLICT` claim would have: under repeatable read that claim fails on the
    /// row its snapshot cannot see and the save is redone, merging into the row.
    @Test func aKeyCommittedSinceTheImportLookedIsClaimedAsWithOnConflict() throws {
        try withManager { manager, handler, other in
            let context = try importing(0..<100, in: manager)
            try other.execute("INSERT INTO users (user_id, name) VALUES ('u42', 'elsewhere')")
            let stored = try other.query("SELECT id FROM users WHERE user_id = 'u42'")[0].decode(Int64.self, at: 0)
            let claimed = try context.performAndWait {
                try context.save()
                return try User.fetch(in: context, where: "userID == %@", "u42").first?.objectID.primaryKey
            }
            #expect(claimed == stored)
            #expect(handler.messages.filter { $0.hasPrefix(Self.redone) }.count == 1)
            #expect(manager.coordinator.saveContention.isContended(["User"]))
            #expect(try other.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 100)
            #expect(
                try other.query("SELECT count(*) FROM users WHERE user_id = 'u42' AND name = 'User 42' AND version = 2")[0]
                    .decode(Int.self, at: 0) == 1)
        }
    }

    /// A plain claim's other errors are the statement's own, as `ON CONFLICT`'s were:
    /// nothing is stored, the context keeps its changes, and a corrected save succeeds.
    @Test func anotherErrorOfAPlainClaimIsThrownAsItWas() throws {
        try withManager { manager, _, other in
            try other.execute("ALTER TABLE users ADD CONSTRAINT plausible_age CHECK (age IS NULL OR age < 200)")
            var records = ImportSchema.userRecords(0..<100)
            records[7] = ["UserID": "u7", "Name": "User 7", "Age": 500]
            let context = manager.newPrivateContext()
            let state = try context.performAndWait { () -> SQLState? in
                _ = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context, ImportSchema.setUser)
                do {
                    try context.save()
                    return nil
                } catch let error as PostgresError {
                    return error.sqlState
                }
            }
            #expect(state == .checkViolation)
            #expect(try other.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 0)
            try context.performAndWait {
                #expect(context.insertedObjects.count == 100)
                for user in context.insertedObjects.compactMap({ $0 as? User }) where user.age == 500 { user.age = 50 }
                try context.save()
            }
            #expect(try other.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 100)
        }
    }
}
