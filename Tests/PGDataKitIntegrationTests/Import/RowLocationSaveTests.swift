import Dispatch
import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// An import in a private context reads its rows' locations (`ctid`) with the rows; the
/// save in the same repeatable-read transaction locks and updates those rows by location
/// (no probe of the primary-key index), sorted by key. Locations the transaction no
/// longer sees, or read by another transaction, are not trusted.
@Suite("Imports' saves find their rows by location")
struct RowLocationSaveTests {
    /// `count` committed users `u0`… with their rows' order in the table shuffled (every
    /// third one updated, so it moves to the end).
    static func seedUsers(_ count: Int, in manager: ContextManager) throws {
        try manager.coordinator.pool.withConnection { connection in
            try connection.execute(
                "INSERT INTO users (user_id, name) SELECT 'u' || i, 'seeded' FROM generate_series(0, $1) AS i", [count - 1])
            try connection.execute("UPDATE users SET age = 1 WHERE id % 3 = 0")
        }
    }

    /// Runs `body` on the queue of a private context named `importer`, over `count`
    /// seeded users (`seedUsers`); then counts the users named `name` at `version`.
    static func withImporter(
        seeding count: Int, isolation: IsolationLevel = .repeatableRead, expecting name: String, version: Int,
        _ body: (ContextManager, ManagedObjectContext) throws -> Void
    ) throws -> Int {
        try ExampleSchema.withManager { manager in
            try seedUsers(count, in: manager)
            let importer = manager.newPrivateContext(name: "importer")
            importer.isolationLevel = isolation
            try importer.performAndWait { try body(manager, importer) }
            return try ExampleSchema.count(
                "SELECT count(*) FROM users WHERE name = $1 AND version = $2", [name, version], in: manager)
        }
    }

    static func importNames(_ count: Int, name: String, in context: ManagedObjectContext) throws -> [User] {
        let records: [JSONValue] = (0..<count).map { .object(["UserID": .string("u\($0)"), "Name": .string(name)]) }
        return try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) {
            record, user in user.name = record["Name"]?.stringValue
        }
    }

    @Test func anImportsSaveLocksAndUpdatesItsRowsByLocation() throws {
        let saved = try Self.withImporter(seeding: 40, expecting: "imported", version: 2) { manager, importer in
            let users = try Self.importNames(40, name: "imported", in: importer)
            let transaction = try #require(importer.transaction.connection)
            // Each object's location is where its row is, as the server says.
            var stored: [Int64: String] = [:]
            for row in try transaction.query("SELECT id, ctid::text FROM users") {
                stored[try row.decode(Int64.self, at: 0)] = try row.decode(String.self, at: 1)
            }
            for user in users {
                let key = try #require(user.objectID.primaryKey)
                #expect(importer.rowLocation(of: user)?.text == stored[key], "\(user.userID)")
            }
            let locked = try SavePipeline(context: importer).lockRowsInOrder(on: transaction, keyedRows: false)
            #expect(locked.locations["User"]?.byLocation == true)
            try importer.save()
            let updatesByLocation = manager.coordinator.writeStatements.withLock { $0.keys.filter(\.byLocation).count }
            #expect(updatesByLocation == 1, "the save's UPDATE found its rows by location")
        }
        #expect(saved == 40)
    }

    /// After a save the transaction is gone: the next save of the same objects (a new
    /// transaction) locks and updates by key.
    @Test func locationsReadByAnEarlierTransactionAreNotUsed() throws {
        let saved = try Self.withImporter(seeding: 10, expecting: "second", version: 3) { _, importer in
            let users = try Self.importNames(10, name: "first", in: importer)
            try importer.save()
            for user in users { user.name = "second" }
            _ = try User.count(in: importer)  // a new transaction
            #expect(users.allSatisfy { importer.rowLocation(of: $0) == nil })
            let transaction = try #require(importer.transaction.connection)
            // Locked by key; the lock statement says where the rows are.
            let locked = try SavePipeline(context: importer).lockRowsInOrder(on: transaction, keyedRows: false).locations["User"]
            #expect(locked?.byLocation == false && locked?.rows == 10)
            try importer.save()
        }
        #expect(saved == 10)
    }

    /// Transaction serials are 16 bits: when they start over, the objects forget the
    /// locations they hold, so none read 65,535 transactions ago passes for a new one.
    @Test func locationsAreForgottenWhenTheSerialsStartOver() throws {
        let saved = try Self.withImporter(seeding: 5, expecting: "imported", version: 2) { _, importer in
            let users = try Self.importNames(5, name: "imported", in: importer)
            #expect(users.allSatisfy { $0.storage.rowLocation != 0 })
            try importer.save()
            #expect(users.allSatisfy { $0.storage.rowLocation != 0 }, "kept, though no longer trusted")
            importer.transaction.setLastSerial(.max)
            _ = try User.count(in: importer)  // a new transaction, serial 1
            #expect(importer.transaction.locationSerial == 1)
            #expect(users.allSatisfy { $0.storage.rowLocation == 0 })
        }
        #expect(saved == 5)
    }

    /// A row the transaction itself rewrote after its import read it: its version at the
    /// location is no longer visible to the transaction. The save locks by key instead
    /// and reports no conflict (the row's version did not change).
    @Test func aLocationTheTransactionNoLongerSeesMakesTheSaveLockByKey() throws {
        let saved = try Self.withImporter(seeding: 10, expecting: "imported", version: 2) { manager, importer in
            #expect(importer.mergePolicy == .error)
            _ = try Self.importNames(10, name: "imported", in: importer)
            let transaction = try #require(importer.transaction.connection)
            try transaction.execute("UPDATE users SET age = age WHERE user_id = 'u3'")
            let entity = try #require(manager.coordinator.model.entity(for: User.self))
            var locks = RowLockSet()
            for case let user as User in importer.changedSet {
                locks.add(try #require(user.objectID.primaryKey), .noKeyUpdate, location: importer.rowLocation(of: user))
            }
            #expect(locks.located?.rows == 10)
            #expect(try manager.coordinator.lockRows(of: entity, locks, on: transaction)?.byLocation == false)
            try importer.save()
        }
        #expect(saved == 10)
    }

    /// At read committed each statement sees a new snapshot, under which a location may
    /// name another row's version: none are read.
    @Test func aReadCommittedImportReadsNoLocations() throws {
        let saved = try Self.withImporter(seeding: 10, isolation: .readCommitted, expecting: "imported", version: 2) {
            _, importer in
            let users = try Self.importNames(10, name: "imported", in: importer)
            #expect(users.allSatisfy { $0.storage.rowLocation == 0 })
            try importer.save()
        }
        #expect(saved == 10)
    }

    /// Rows of a partitioned table's partitions share locations: an import reads none,
    /// and its save writes only its own rows.
    @Test func aPartitionedTableGivesNoLocations() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let setup = try Connection(configuration)
            defer { setup.close() }
            try setup.executeScript(
                """
                CREATE TABLE coded_parts (
                    id bigint GENERATED BY DEFAULT AS IDENTITY, code text NOT NULL UNIQUE, name text,
                    version bigint NOT NULL DEFAULT 1, PRIMARY KEY (code, id)
                ) PARTITION BY RANGE (code);
                CREATE TABLE coded_parts_low PARTITION OF coded_parts FOR VALUES FROM (MINVALUE) TO ('c150');
                CREATE TABLE coded_parts_high PARTITION OF coded_parts FOR VALUES FROM ('c150') TO (MAXVALUE);
                INSERT INTO coded_parts (id, code, name) SELECT i, 'c' || i, 'n' FROM generate_series(1, 200) AS i;
                """)
            // The rows are in both partitions, many at the same locations.
            let spread = try setup.query("SELECT count(DISTINCT tableoid), count(DISTINCT ctid) FROM coded_parts")[0]
            #expect(try spread.decode(Int.self, at: 0) == 2 && spread.decode(Int.self, at: 1) < 200)
            let manager = try ContextManager(configuration: configuration, entities: [CodedPart.self])
            defer { manager.close() }
            let importer = manager.newPrivateContext(name: "importer")
            try importer.performAndWait {
                let records: [JSONValue] = (1...200).map { .object(["code": .string("c\($0)"), "name": "imported"]) }
                let parts = try CodedPart.insertOrUpdate(records, uniqueModelKey: \.code, uniqueRemoteKey: "code", in: importer) {
                    record, part in part.name = record["name"]?.stringValue
                }
                #expect(parts.count == 200)
                #expect(parts.allSatisfy { $0.storage.rowLocation == 0 })
                try importer.save()
            }
            #expect(try setup.query("SELECT count(*) FROM coded_parts WHERE name = 'imported'")[0].decode(Int.self, at: 0) == 200)
            #expect(try setup.query("SELECT count(*) FROM coded_parts WHERE version = 2")[0].decode(Int.self, at: 0) == 200)
        }
    }
}

extension RowLocationSaveTests {
    /// A save that moves one-to-one keys first clears them on the rows it then updates
    /// (so no row meets the unique key half-way): those rows are no longer where the
    /// import saw them, and the save updates them by key.
    @Test func rowsWhoseOneToOneKeysAreReleasedFirstAreUpdatedByKey() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let setup = try Connection(configuration)
            defer { setup.close() }
            try setup.executeScript(
                """
                CREATE TABLE owners (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    version bigint NOT NULL DEFAULT 1, name text NOT NULL);
                CREATE TABLE badges (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    version bigint NOT NULL DEFAULT 1, code text NOT NULL UNIQUE,
                    owner_id bigint UNIQUE REFERENCES owners (id));
                INSERT INTO owners (name) VALUES ('ann'), ('bob');
                INSERT INTO badges (code, owner_id) SELECT 'b-' || name, id FROM owners;
                """)
            let manager = try ContextManager(configuration: configuration, entities: [Owner.self, Badge.self])
            defer { manager.close() }
            let importer = manager.newPrivateContext(name: "importer")
            try importer.performAndWait {
                let owners = Dictionary(uniqueKeysWithValues: try importer.fetchAll(Owner.self).map { ($0.name, $0) })
                // The badges change hands.
                let records: [JSONValue] = [["code": "b-ann", "owner": "bob"], ["code": "b-bob", "owner": "ann"]]
                let badges = try Badge.insertOrUpdate(records, uniqueModelKey: \.code, uniqueRemoteKey: "code", in: importer) {
                    record, badge in badge.owner = record["owner"]?.stringValue.flatMap { owners[$0] }
                }
                #expect(badges.allSatisfy { importer.rowLocation(of: $0) != nil })
                let before = manager.coordinator.statementCount
                try importer.save()
                // One attempt (the locks, the cleared keys, the update, the change record and
                // the commit): an update by location that missed the moved rows took them
                // for conflicts, and the save was redone (13 statements).
                #expect(manager.coordinator.statementCount - before <= 6)
            }
            let pairs = try setup.query("SELECT b.code || '-' || o.name FROM badges b JOIN owners o ON o.id = b.owner_id ORDER BY 1")
                .map { try $0.decode(String.self, at: 0) }
            #expect(pairs == ["b-ann-bob", "b-bob-ann"])
            #expect(try setup.query("SELECT count(*) FROM badges WHERE version = 2")[0].decode(Int.self, at: 0) == 2)
        }
    }
}

/// Saves of fetched objects: the lock statement (by key) says where the rows it locked
/// are, and the writes find them there.
extension RowLocationSaveTests {
    /// Updates in two shapes (most rows, and a few) and deletes: the big update goes by
    /// location, the small one by key (reading every locked row for two would cost
    /// more), the deletes by location; every write lands.
    @Test func aFetchedBatchIsUpdatedAndDeletedWhereTheLocksFoundIt() throws {
        try ExampleSchema.withManager { manager in
            try Self.seedUsers(20, in: manager)
            let editor = manager.newPrivateContext(name: "editor")
            try editor.performAndWait {
                let users = try editor.fetch(FetchRequest<User>(format: "userID BEGINSWITH 'u'"))
                #expect(users.count == 20 && users.allSatisfy { $0.storage.rowLocation == 0 })
                for user in users.prefix(14) { user.name = "edited" }
                for user in users.dropFirst(14).prefix(2) { user.age = 99 }
                for user in users.suffix(4) { editor.delete(user) }
                try editor.save()
            }
            let shapes = manager.coordinator.writeStatements.withLock { $0.keys.map(\.byLocation) }
            #expect(shapes.sorted { !$0 && $1 } == [false, true], "one update by key, one by location")
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'edited' AND version = 2", in: manager) == 14)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE age = 99 AND version = 2", in: manager) == 2)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 16)
        }
    }

    /// A trigger of the user's that rewrites rows after each statement moves rows the
    /// save's next statement writes: those are found by key (not taken for conflicts).
    @Test func rowsMovedBetweenTheSavesStatementsAreFoundByKey() throws {
        try ExampleSchema.withManager { manager in
            try Self.seedUsers(20, in: manager)
            try manager.coordinator.pool.withConnection { connection in
                try connection.executeScript(
                    """
                    CREATE FUNCTION touch_ends() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF pg_trigger_depth() = 1 THEN
                            UPDATE users SET age = age WHERE user_id IN ('u0', 'u19');
                        END IF;
                        RETURN NULL;
                    END $$;
                    CREATE TRIGGER touch_ends AFTER UPDATE ON users FOR EACH STATEMENT EXECUTE FUNCTION touch_ends();
                    """)
            }
            let editor = manager.newPrivateContext(name: "editor")
            func edit(_ change: ([User]) -> Void) throws {
                try editor.performAndWait {
                    let users = try editor.fetch(FetchRequest<User>(format: "userID BEGINSWITH 'u'"))
                        .sorted { Int($0.userID.dropFirst()) ?? 0 < Int($1.userID.dropFirst()) ?? 0 }
                    change(users)
                    let before = manager.coordinator.statementCount
                    try editor.save()
                    #expect(manager.coordinator.statementCount - before <= 7, "one attempt")
                }
            }
            // Two statements (two shapes of change), each moving a row of the other.
            try edit { users in
                for user in users.prefix(10) { user.name = "renamed" }
                for user in users.suffix(10) { user.age = 5 }
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'renamed' AND version = 2", in: manager) == 10)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE age = 5 AND version = 2", in: manager) == 10)
            // An update moving a row the deletes that follow find by location.
            try edit { users in
                for user in users.prefix(5) { user.name = "kept" }
                for user in users.dropFirst(5) { editor.delete(user) }
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 5)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'kept' AND version = 3", in: manager) == 5)
        }
    }

    /// A row another transaction rewrote while the save waited for its lock (read
    /// committed: the main context's saves): the lock statement gives where the row is
    /// now, and the save writes it there in its one attempt.
    @Test func aRowRewrittenWhileTheSaveWaitedIsFoundWhereItMoved() throws {
        try ExampleSchema.withManager { manager in
            try Self.seedUsers(10, in: manager)
            let main = manager.mainContext
            try main.performAndWait {
                for user in try main.fetch(FetchRequest<User>()) { user.name = "edited" }
            }
            let holder = try Connection(manager.coordinator.pool.configuration)
            defer { holder.close() }
            try holder.execute("BEGIN")
            // (No version bump: not a conflict, only a new place for the row.)
            try holder.execute("UPDATE users SET age = 7 WHERE user_id = 'u3'")
            let before = manager.coordinator.statementCount
            let failure = Mutex<String?>(nil)
            let saving = DispatchGroup()
            DispatchQueue.global().async(group: saving) {
                do { try main.performAndWait { try main.save() } } catch { failure.withLock { $0 = "\(error)" } }
            }
            try eventually("the save waits for the held row") {
                try holder.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )[0].decode(Int.self, at: 0) == 1
            }
            try holder.execute("COMMIT")
            saving.wait()
            #expect(failure.withLock { $0 } == nil)
            // One attempt: the lock, the update, the change record with the commit.
            #expect(manager.coordinator.statementCount - before <= 5)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'edited' AND version = 2", in: manager) == 10)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE age = 7", in: manager) == 1)
        }
    }
}

/// Someone who may hold a badge (one-to-one; the badge holds the key).
final class Owner: ManagedObject {
    override class var tableName: String { "owners" }
    @Attribute var name: String = ""
    @Relationship(inverse: "owner") var badge: Badge?
}

/// A badge, imported by its code, held by at most one owner.
final class Badge: ManagedObject {
    override class var tableName: String { "badges" }
    @Attribute(unique: true) var code: String = ""
    @Relationship(inverse: "badge", column: "owner_id") var owner: Owner?
}

/// A row of a partitioned table, imported by its code.
final class CodedPart: ManagedObject {
    override class var tableName: String { "coded_parts" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
}
