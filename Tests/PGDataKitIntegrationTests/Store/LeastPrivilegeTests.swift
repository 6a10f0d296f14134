import Foundation
import Logging
import PGDataKit
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

    /// The grants the README's deployment section lists.
    func grantDocumentedPrivileges(to role: String, on owner: Connection) throws {
        try owner.executeScript(
            """
            GRANT USAGE ON SCHEMA public TO \(role);
            GRANT SELECT, INSERT, UPDATE, DELETE ON users, posts TO \(role);
            GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO \(role);
            GRANT SELECT, INSERT ON pgdatakit_changes TO \(role);
            """)
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
            while inserted.value == nil, start.duration(to: .now) < .seconds(10) {
                try owner.execute("SELECT pg_sleep(0.01)")
            }
            #expect(inserted.value == 2)
            // No DDL ran as the role: it cannot create anything in the schema.
            #expect(throws: PostgresError.self) {
                try Connection(configuration).execute("CREATE TABLE nope (id int)")
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
