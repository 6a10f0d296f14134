import Foundation
import Logging
@testable import PGDataKit
@testable import PGDataKitPostgres
import Synchronization
import Testing

/// A production set-up: the schema and the change log are installed by an owner role
/// (`migrate`), the application runs as a role with DML rights only.
@Suite("Least-privilege application role")
struct LeastPrivilegeTests {
    /// Runs `body` with an owner connection to a migrated database and the configuration
    /// of a fresh role that may only log in; drops the role afterwards.
    func withApplicationRole(_ body: (_ owner: Connection, _ role: String, _ configuration: ConnectionConfiguration) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let owner = try Connection(configuration)
            defer { owner.close() }
            let role = "pgdatakit_app_" + UUID().uuidString.prefix(8).lowercased()
            try owner.execute("CREATE ROLE \(role) LOGIN")
            defer {
                do {
                    try owner.execute("DROP OWNED BY \(role)")
                    try owner.execute("DROP ROLE \(role)")
                } catch {
                    Issue.record("could not drop role \(role): \(error)")
                }
            }
            var application = configuration
            application.overrides["user"] = role
            try body(owner, role, application)
        }
    }

    /// The grants Security.md ("Least-privilege deployment") lists.
    func grantDocumentedPrivileges(to role: String, on owner: Connection) throws {
        try owner.executeScript(
            """
            GRANT USAGE ON SCHEMA public TO \(role);
            GRANT SELECT, INSERT, UPDATE, DELETE ON users, posts TO \(role);
            GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO \(role);
            GRANT SELECT, INSERT ON pgdatakit_changes TO \(role);
            GRANT SELECT ON pgdatakit_migrations TO \(role);
            """)
    }

    /// Security.md's grants for history readers, and for pruning with history installed.
    func grantDocumentedHistoryPrivileges(to role: String, pruning: Bool, on owner: Connection) throws {
        try owner.executeScript(
            """
            GRANT SELECT, INSERT, UPDATE, DELETE ON pgdatakit_history_readers TO \(role);
            GRANT SELECT ON pgdatakit_history_horizon TO \(role);
            """)
        if pruning {
            try owner.executeScript(
                """
                GRANT DELETE ON pgdatakit_changes TO \(role);
                GRANT UPDATE ON pgdatakit_history_horizon TO \(role);
                """)
        }
    }

    /// History as the application role: readers register, read, acknowledge; with the
    /// pruning grants the role prunes and the trigger raises the horizon; with DELETE
    /// alone it says what pruning lacks and does not prune.
    @Test func aRoleWithTheDocumentedHistoryGrantsReadsAcknowledgesAndPrunes() throws {
        try withApplicationRole { owner, role, configuration in
            try grantDocumentedPrivileges(to: role, on: owner)
            try grantDocumentedHistoryPrivileges(to: role, pruning: false, on: owner)
            try owner.execute("GRANT DELETE ON pgdatakit_changes TO \(role)")
            let log = RecordingLogHandler()
            let manager = try ContextManager(
                configuration: configuration, entities: [User.self, Post.self], logger: Logger(label: "app") { _ in log })
            defer { manager.close() }
            #expect(log.messages.contains {
                $0.contains("pruning needs UPDATE on pgdatakit_history_horizon besides DELETE on pgdatakit_changes")
            }, "\(log.messages)")
            let reader = try manager.coordinator.historyReader(named: "least", startingAt: .now)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                User(context: context).userID = "h"
                try context.save()
            }
            let page = try manager.coordinator.history(after: try reader.acknowledgedToken(), limit: 10)
            #expect(page.records.count == 1)
            try reader.acknowledge(try #require(page.records.last))
            let application = try Connection(configuration)
            defer { application.close() }
            // DELETE alone: the trigger may not raise the horizon, so nothing is deleted.
            #expect(throws: PostgresError.self) {
                _ = try ChangeLog.prune(olderThan: .zero, maximumReaderAge: .seconds(60), on: application, logger: Logger(label: "t"))
            }
            #expect(try owner.query("SELECT count(*) FROM pgdatakit_changes")[0].decode(Int.self, at: 0) == 1)
            try grantDocumentedHistoryPrivileges(to: role, pruning: true, on: owner)
            #expect(try ChangeLog.check(on: application).isEmpty)
            #expect(try ChangeLog.prune(olderThan: .zero, maximumReaderAge: .seconds(60), on: application, logger: Logger(label: "t")) == 1)
            let horizon = try owner.query("SELECT pruned_through FROM pgdatakit_history_horizon")[0]
            #expect(try horizon.decode(Int64?.self, at: 0) != nil)
            // Expiry checks (pg_xact_status included) run as the role.
            #expect(try manager.coordinator.history(after: page.token, limit: 10).records.isEmpty)
            #expect(try manager.coordinator.dropHistoryReader(named: "least"))
        }
    }

    /// The repository's migrations folder (what `withApplicationRole` applied as owner).
    var migrationsFolder: URL { TestDatabase.repositoryRoot.appendingPathComponent("migrations") }

    /// Workers that migrate at start-up run as the application role: with every
    /// migration and the library's schema installed by the owner, migrating is a no-op
    /// that succeeds (it used to fail with 42501: `CREATE TABLE IF NOT EXISTS` needs the
    /// `CREATE` right even when the table exists).
    @Test func migratingAsTheApplicationRoleWhenEverythingIsInstalledIsANoOp() throws {
        try withApplicationRole { owner, role, configuration in
            try grantDocumentedPrivileges(to: role, on: owner)
            let application = try Connection(configuration)
            defer { application.close() }
            let migrator = try Migrator(directory: migrationsFolder)
            #expect(try migrator.migrate(on: application).isEmpty)
            try Migrator.installLibrarySchema(on: application)
            #expect(try migrator.pending(on: application).isEmpty)
            // The CLI, as the same role.
            let url = try #require(configuration.renderedConnectionString())
            let outcome = try CLI.run(["migrate", "--dir", migrationsFolder.path, "--database-url", url])
            #expect(outcome.status == 0, "\(outcome.error)")
            #expect(outcome.output.contains("Nothing to apply"), "\(outcome.output)")
            // Nothing was created or locked for good by the role.
            let owned = try owner.query(
                "SELECT count(*) FROM pg_class WHERE pg_get_userbyid(relowner) = $1", [role])[0]
            #expect(try owned.decode(Int.self, at: 0) == 0)
        }
    }

    /// An earlier version's trigger function (installed before the truncation's horizon
    /// changed) is left to the owner: the application role finds nothing to do and
    /// migrates as a no-op; the owner's install replaces it.
    @Test func anEarlierTriggerFunctionIsLeftToTheOwner() throws {
        try withApplicationRole { owner, role, configuration in
            try grantDocumentedPrivileges(to: role, on: owner)
            let definition = try owner.query("SELECT pg_get_functiondef('pgdatakit_changes_pruned()'::regprocedure)")[0]
                .decode(String.self, at: 0)
            try owner.execute(definition.replacingOccurrences(of: ChangeLog.prunedFunctionVersion, with: "pgdatakit horizon 1"))
            let application = try Connection(configuration)
            defer { application.close() }
            #expect(try ChangeLog.missingParts(on: application).parts.isEmpty)
            #expect(try Migrator(directory: migrationsFolder).migrate(on: application).isEmpty)
            #expect(try ChangeLog.missingParts(on: owner).parts == ["function pgdatakit_changes_pruned() (an earlier version)"])
            try Migrator.installLibrarySchema(on: owner)
            #expect(try ChangeLog.missingParts(on: owner).parts.isEmpty)
        }
    }

    @Test func aRoleWithTheDocumentedGrantsSavesAndSeesOtherProcessesSaves() throws {
        try withApplicationRole { owner, role, configuration in
            try grantDocumentedPrivileges(to: role, on: owner)
            // Without DELETE on the change log each process says once that it will not prune.
            let writerLog = RecordingLogHandler(), readerLog = RecordingLogHandler()
            let writer = try ContextManager(
                configuration: configuration, entities: [User.self, Post.self],
                logger: Logger(label: "writer") { _ in writerLog })
            defer { writer.close() }
            let reader = try ContextManager(
                configuration: configuration, entities: [User.self, Post.self],
                logger: Logger(label: "reader") { _ in readerLog })
            defer { reader.close() }
            defer {
                for log in [writerLog, readerLog] {
                    #expect(log.messages.filter { $0.contains("no DELETE privilege on pgdatakit_changes") }.count == 1,
                            "\(log.messages)")
                }
            }
            let inserted = RecordBox()
            let token = reader.coordinator.observeRemoteChanges { record in
                if !record.changes.inserted.isEmpty { inserted.set(record.changes.inserted.count) }
            }
            defer { token.cancel() }
            let context = writer.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "least"
                let post = Post(context: context)
                post.postID = "p"
                post.user = user
                try context.save()
                user.name = "changed"
                try context.save()
                _ = try Post.deleteAll(in: context)
            }
            let stored = try owner.query("SELECT name FROM users WHERE user_id = 'least'")[0].decode(String?.self, at: 0)
            #expect(stored == "changed")
            // The other coordinator's listener (SELECT on the change log) gets the first save.
            let start = ContinuousClock.now
            while inserted.value == nil, start.duration(to: .now) < patience {
                try owner.execute("SELECT pg_sleep(0.01)")
            }
            #expect(inserted.value == 2)
            // No DDL ran as the role: it cannot create anything in the schema.
            #expect(throws: PostgresError.self) {
                try Connection(configuration).execute("CREATE TABLE nope (id int)")
            }
        }
    }

    /// A migration the owner has not applied yet, met by a worker migrating as the
    /// application role: a clear error naming the rights the role lacks and the object,
    /// and nothing applied.
    @Test func aPendingMigrationUnderTheApplicationRoleNamesTheRightsItLacks() throws {
        try withApplicationRole { owner, role, configuration in
            try grantDocumentedPrivileges(to: role, on: owner)
            let application = try Connection(configuration)
            defer { application.close() }
            let migrator = try Migrator(
                migrations: try Migrator(directory: migrationsFolder).migrations + [
                    Migration(version: 2, name: "add_tags", sql: "CREATE TABLE tags (id int PRIMARY KEY);")
                ])
            do {
                try migrator.migrate(on: application)
                Issue.record("expected a missing privilege")
            } catch let error as MigrationError {
                guard error.code == .missingPrivilege else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(error.role == role)
                #expect(error.privileges == ["CREATE on schema public", "INSERT on pgdatakit_migrations"])
                #expect(error.neededFor == "apply migration 2 (add_tags)")
                #expect(error.underlying?.sqlState == .insufficientPrivilege)
                #expect(
                    error.description.hasPrefix(
                        "0002_add_tags.sql: role \(role) may not apply migration 2 (add_tags): it lacks "
                            + "CREATE on schema public, INSERT on pgdatakit_migrations"), "\(error)")
            }
            #expect(try owner.query("SELECT to_regclass('tags') IS NULL")[0].decode(Bool.self, at: 0))
            #expect(try migrator.pending(on: owner).map(\.version) == [2])

            // The CLI says the same and exits with status 1.
            try TestDatabase.withTemporaryDirectory { folder in
                for migration in migrator.migrations {
                    try migration.sql.write(
                        to: folder.appendingPathComponent(migration.fileName), atomically: true, encoding: .utf8)
                }
                let url = try #require(configuration.renderedConnectionString())
                let outcome = try CLI.run(["migrate", "--dir", folder.path, "--database-url", url])
                #expect(outcome.status == 1)
                #expect(outcome.error.contains("may not apply migration 2 (add_tags): it lacks CREATE on schema public"),
                        "\(outcome.error)")
                #expect(outcome.output.contains("1 applied, 1 pending"), "\(outcome.output)")
            }
            // Applied by the owner, it is a no-op for the role again.
            #expect(try migrator.migrate(on: owner).map(\.version) == [2])
            #expect(try migrator.migrate(on: application).isEmpty)
        }
    }

    /// Without `SELECT` on the bookkeeping table the role cannot tell what is applied:
    /// the error names that grant.
    @Test func anUnreadableLedgerNamesTheGrant() throws {
        try withApplicationRole { owner, role, configuration in
            try grantDocumentedPrivileges(to: role, on: owner)
            try owner.execute("REVOKE SELECT ON pgdatakit_migrations FROM \(role)")
            let application = try Connection(configuration)
            defer { application.close() }
            let migrator = try Migrator(directory: migrationsFolder)
            for attempt in [{ _ = try migrator.migrate(on: application) }, { _ = try migrator.pending(on: application) }] {
                do {
                    try attempt()
                    Issue.record("expected a missing privilege")
                } catch let error as MigrationError {
                    guard error.code == .missingPrivilege else {
                        Issue.record("unexpected \(error)")
                        continue
                    }
                    #expect(error.privileges == ["SELECT on pgdatakit_migrations"])
                    #expect(error.description.contains("may not read which migrations are applied"), "\(error)")
                }
            }
        }
    }

    /// The library's schema is looked up in the catalog, part by part: what is missing is
    /// named with the right it needs (the table: `CREATE` on the schema; an index:
    /// ownership of the table); the owner's run puts it back.
    @Test func anIncompleteLibrarySchemaNamesWhatIsMissingAndTheRightItNeeds() throws {
        try withApplicationRole { owner, role, configuration in
            try grantDocumentedPrivileges(to: role, on: owner)
            let application = try Connection(configuration)
            defer { application.close() }
            let migrator = try Migrator(directory: migrationsFolder)
            try owner.execute("DROP INDEX pgdatakit_changes_created_at")
            do {
                try migrator.migrate(on: application)
                Issue.record("expected a missing privilege")
            } catch let error as MigrationError {
                guard error.code == .missingPrivilege else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(error.privileges == ["ownership of table pgdatakit_changes"])
                #expect(error.neededFor == "install the library's schema (missing: index pgdatakit_changes_created_at)")
            }
            #expect(try migrator.migrate(on: owner).isEmpty)
            #expect(try owner.query("SELECT to_regclass('pgdatakit_changes_created_at') IS NOT NULL")[0].decode(Bool.self, at: 0))
            #expect(try migrator.migrate(on: application).isEmpty)

            try owner.execute("DROP TABLE pgdatakit_changes")
            #expect(throws: MigrationError.self) { try Migrator.installLibrarySchema(on: application) }
            do {
                try Migrator.installLibrarySchema(on: application)
            } catch let error as MigrationError {
                guard error.code == .missingPrivilege else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(error.privileges == ["CREATE on schema public"])
                #expect(error.neededFor == "install the library's schema (missing: table pgdatakit_changes)")
            }
        }
    }

    /// The catalog lookup knows every part the schema SQL creates: its indexes are read
    /// from the SQL (an index added there is looked for), its tables, trigger function
    /// and triggers are the ones the lookup names, and no other kind of DDL is in it that
    /// the lookup would not see.
    @Test func theInstalledCheckCoversEverythingTheSchemaCreates() throws {
        try TestDatabase.withConnection { connection in
            let indexes = try connection.query(
                """
                SELECT i.relname::text FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid
                WHERE x.indrelid = 'pgdatakit_changes'::regclass AND NOT x.indisprimary ORDER BY 1
                """).map { try $0.decode(String.self, at: 0) }
            #expect(indexes == ChangeLog.schemaIndexNames)
            #expect(!indexes.isEmpty)
            #expect(try ChangeLog.missingParts(on: connection).parts.isEmpty)
            /// The names after each `marker` in the schema SQL.
            func created(_ marker: String) -> [String] {
                ChangeLog.schemaSQL.components(separatedBy: marker).dropFirst()
                    .map { String($0.prefix { $0.isLetter || $0 == "_" }) }
            }
            #expect(created("CREATE TABLE IF NOT EXISTS ") == [ChangeLog.table, ChangeLog.readersTable, ChangeLog.horizonTable])
            #expect(created("CREATE OR REPLACE FUNCTION ") == [ChangeLog.prunedFunction])
            #expect(created("CREATE TRIGGER ") == [ChangeLog.deleteTrigger, ChangeLog.truncateTrigger])
            let sql = ChangeLog.schemaSQL.uppercased()
            #expect(sql.components(separatedBy: "CREATE TABLE").count == 4)
            #expect(sql.components(separatedBy: "FUNCTION ").count == 4)  // created once, called by two triggers
            for unknown in ["ADD COLUMN", "CREATE SEQUENCE", "CREATE FUNCTION", "CREATE TYPE",
                            "CREATE VIEW", "GRANT ", "COMMENT ON", "ADD CONSTRAINT"] {
                #expect(!sql.contains(unknown), "teach ChangeLog.missingParts(on:) about \(unknown)")
            }
        }
    }

    @Test func aMissingGrantIsNamedAtStart() throws {
        try withApplicationRole { owner, role, configuration in
            try grantDocumentedPrivileges(to: role, on: owner)
            try owner.execute("REVOKE USAGE ON ALL SEQUENCES IN SCHEMA public FROM \(role)")
            try owner.execute("REVOKE DELETE ON posts FROM \(role)")
            do {
                _ = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
                Issue.record("expected the missing grants to be reported")
            } catch let error as ChangeLogError {
                #expect(error == .missingPrivilege(["USAGE on public.pgdatakit_changes_id_seq"]))
            }
            try owner.execute("GRANT USAGE ON SEQUENCE pgdatakit_changes_id_seq TO \(role)")
            do {
                // (Its notice about pruning, before the entities are checked, is not the point.)
                _ = try ContextManager(
                    configuration: configuration, entities: [User.self, Post.self],
                    logger: Logger(label: "quiet") { _ in SwiftLogNoOpLogHandler() })
                Issue.record("expected the missing grants to be reported")
            } catch let error as SchemaMismatchError {
                let problems = Set(error.mismatches)
                #expect(problems.contains(.missingPrivilege(entity: "User", object: "public.users_id_seq", privilege: "USAGE")))
                #expect(problems.contains(.missingPrivilege(entity: "Post", object: "public.posts_id_seq", privilege: "USAGE")))
                #expect(problems.contains(.missingPrivilege(entity: "Post", object: "posts", privilege: "DELETE")))
                #expect(error.description.contains("GRANT DELETE ON posts"))
            }
        }
    }

    @Test func aMissingChangeLogIsReportedNotCreated() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let owner = try Connection(configuration)
            defer { owner.close() }
            try owner.execute("DROP TABLE pgdatakit_changes")
            #expect(throws: ChangeLogError.notInstalled(table: "pgdatakit_changes")) {
                _ = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            }
            #expect(try owner.query("SELECT to_regclass('pgdatakit_changes') IS NULL")[0].decode(Bool.self, at: 0))
            // Migrating installs it again (the library's schema comes first).
            try Migrator(directory: TestDatabase.repositoryRoot.appendingPathComponent("migrations")).migrate(on: owner)
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            manager.close()
        }
    }
}

/// A value set on one thread and read on another.
final class RecordBox: Sendable {
    private let box = Mutex<Int?>(nil)
    var value: Int? { box.withLock { $0 } }
    func set(_ value: Int) { box.withLock { $0 = value } }
}
