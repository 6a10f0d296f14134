import Foundation
import PGDataKit
import Testing

@Suite("Save: transactions, failures, statement counts")
struct SaveTests {
    @Test func uniqueViolationMidSaveLeavesTheDatabaseUntouchedAndTheContextDirty() throws {
        try ExampleSchema.withManager { manager in
            let seed = manager.newPrivateContext()
            try seed.performAndWait {
                let user = User(context: seed)
                user.userID = "taken"
                try seed.save()
            }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let fresh = User(context: context)
                fresh.userID = "fresh"
                let post = Post(context: context)
                post.postID = "p-fresh"
                post.user = fresh
                let team = Team(context: context)
                team.name = "t"
                let clash = User(context: context)
                clash.userID = "taken"
                do {
                    try context.save()
                    Issue.record("expected a unique violation")
                } catch let error as PostgresError {
                    #expect(error.sqlState == .uniqueViolation)
                    #expect(error.constraint == "users_user_id_key")
                }
                #expect(context.hasChanges)
                #expect(context.insertedObjects.count == 4)
                #expect(fresh.objectID.isTemporaryID)
                #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 1)
                #expect(try ExampleSchema.count("SELECT count(*) FROM posts", in: manager) == 0)
                #expect(try ExampleSchema.count("SELECT count(*) FROM teams", in: manager) == 0)
                // Fix and retry: everything lands.
                clash.userID = "not-taken"
                try context.save()
                #expect(!context.hasChanges)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 3)
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts WHERE user_id IS NOT NULL", in: manager) == 1)
        }
    }

    /// Objects remember which attributes were set since their snapshot and tell the
    /// context once: changes set back, saved beside other changes, or set again after a
    /// save must all still be seen.
    @Test func attributesSetBackAndSetAgainAreTrackedAcrossSaves() throws {
        try ExampleSchema.withManager { manager in
            let seed = manager.newPrivateContext()
            try seed.performAndWait {
                for id in ["a", "b"] {
                    let user = User(context: seed)
                    user.userID = id
                    user.name = "original"
                }
                try seed.save()
            }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let users = try context.fetchAll(User.self).sorted { $0.userID < $1.userID }
                let (a, b) = (users[0], users[1])
                a.name = "changed"
                a.name = "original"  // back to the committed value: nothing to save
                #expect(!context.hasChanges)
                a.name = "again"  // set once more: a change again
                #expect(context.hasChanges)
                b.name = "changed"
                b.name = "original"
                b.age = 5
                b.age = nil  // b is back at its committed values; a is not
                try context.save()
                #expect(!context.hasChanges)
                b.name = "after the save"  // b left the changed objects with the save: it must come back
                a.name = "after the save"
                #expect(context.updatedObjects.count == 2)
                try context.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'after the save'", in: manager) == 2)
            #expect(try ExampleSchema.count("SELECT version FROM users WHERE user_id = 'a'", in: manager) == 3)
            #expect(try ExampleSchema.count("SELECT version FROM users WHERE user_id = 'b'", in: manager) == 2)
        }
    }

    @Test func savingAThousandObjectsTakesAHandfulOfStatements() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for index in 0..<1000 {
                    let user = User(context: context)
                    user.userID = "bulk-\(index)"
                    user.age = index
                }
                let before = manager.coordinator.statementCount
                try context.save()
                let inserts = manager.coordinator.statementCount - before
                // BEGIN, reserve keys, one INSERT, the change record, COMMIT.
                #expect(inserts <= 5, "saving 1,000 new users took \(inserts) statements")

                let users = try context.fetchAll(User.self)
                #expect(users.count == 1000)
                for user in users { user.age = (user.age ?? 0) + 1 }
                for user in users.prefix(500) { user.name = "renamed" }
                let beforeUpdate = manager.coordinator.statementCount
                try context.save()
                let updates = manager.coordinator.statementCount - beforeUpdate
                // BEGIN was spent on the fetch; the rows locked in key order (one statement),
                // two UPDATEs (two changed-column sets), the change record, COMMIT.
                #expect(updates <= 5, "updating 1,000 users took \(updates) statements")

                let again = try context.fetchAll(User.self)
                for user in again { user.delete() }
                let beforeDelete = manager.coordinator.statementCount
                try context.save()
                // The rows locked in key order, DELETE, change record, COMMIT.
                #expect(manager.coordinator.statementCount - beforeDelete <= 4)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 0)
        }
    }

    @Test func droppedConnectionFailsTheSaveAndKeepsTheChanges() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                _ = try context.fetchAll(User.self)  // opens the transaction
                let user = User(context: context)
                user.userID = "survives"
            }
            // Terminate every other backend of this database but the change listener's
            // and its relay's (their reconnects are tested elsewhere): the context's among
            // them.
            let admin = try Connection(manager.coordinator.pool.configuration)
            defer { admin.close() }
            try admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                    + "AND pid <> pg_backend_pid() AND application_name <> ALL($1::text[])",
                [["pgdatakit listener", "pgdatakit relay"]])
            try context.performAndWait {
                do {
                    try context.save()
                    Issue.record("expected a lost connection")
                } catch let error as PostgresError {
                    #expect(error.isConnectionError)
                }
                #expect(context.hasChanges)
                #expect(!context.hasOpenTransaction)
                try context.save()  // a new connection, the same changes
                #expect(!context.hasChanges)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE user_id = 'survives'", in: manager) == 1)
        }
    }

    @Test func mainContextCanSaveToo() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            try main.performAndWait {
                let user = User(context: main)
                user.userID = "from-main"
                try main.save()
                #expect(!user.objectID.isTemporaryID)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 1)
        }
    }
}
