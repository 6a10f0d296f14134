import Foundation
@testable import PGDataKit
import Testing

// One model in eight versions: the same entities (`EvoUser`, `EvoNote`) under class names
// of their own, each version one change further.

final class EvoUser0: ManagedObject {
    override class var entityName: String { "EvoUser" }
    override class var tableName: String { "evo_users" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
    @Attribute var email: String?
}

// 1: a new entity.
final class EvoUser1: ManagedObject {
    override class var entityName: String { "EvoUser" }
    override class var tableName: String { "evo_users" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
    @Attribute var email: String?
}

final class EvoNote1: ManagedObject {
    override class var entityName: String { "EvoNote" }
    override class var tableName: String { "evo_notes" }
    @Attribute var text: String?
}

// 2: an optional attribute.
final class EvoUser2: ManagedObject {
    override class var entityName: String { "EvoUser" }
    override class var tableName: String { "evo_users" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
    @Attribute var email: String?
    @Attribute var nickname: String?
}

// 3: a non-optional attribute with a default.
final class EvoUser3: ManagedObject {
    override class var entityName: String { "EvoUser" }
    override class var tableName: String { "evo_users" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
    @Attribute var email: String?
    @Attribute var nickname: String?
    @Attribute var level: Int = 1
}

// 4: a to-many relationship (and its to-one inverse: a key on evo_notes).
final class EvoUser4: ManagedObject {
    override class var entityName: String { "EvoUser" }
    override class var tableName: String { "evo_users" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
    @Attribute var email: String?
    @Attribute var nickname: String?
    @Attribute var level: Int = 1
    @Relationship(inverse: "author", deleteRule: .cascade) var notes: Set<EvoNote4>
}

final class EvoNote4: ManagedObject {
    override class var entityName: String { "EvoNote" }
    override class var tableName: String { "evo_notes" }
    @Attribute var text: String?
    @Relationship(inverse: "notes") var author: EvoUser4?
}

// 5: a many-to-many relationship.
final class EvoUser5: ManagedObject {
    override class var entityName: String { "EvoUser" }
    override class var tableName: String { "evo_users" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
    @Attribute var email: String?
    @Attribute var nickname: String?
    @Attribute var level: Int = 1
    @Relationship(inverse: "author", deleteRule: .cascade) var notes: Set<EvoNote5>
    @Relationship(inverse: "readers") var readNotes: Set<EvoNote5>
}

final class EvoNote5: ManagedObject {
    override class var entityName: String { "EvoNote" }
    override class var tableName: String { "evo_notes" }
    @Attribute var text: String?
    @Relationship(inverse: "notes") var author: EvoUser5?
    @Relationship(inverse: "readNotes") var readers: Set<EvoUser5>
}

// 6: a unique key over existing data.
final class EvoUser6: ManagedObject {
    override class var entityName: String { "EvoUser" }
    override class var tableName: String { "evo_users" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
    @Attribute(unique: true) var email: String?
    @Attribute var nickname: String?
    @Attribute var level: Int = 1
    @Relationship(inverse: "author", deleteRule: .cascade) var notes: Set<EvoNote6>
    @Relationship(inverse: "readers") var readNotes: Set<EvoNote6>
}

final class EvoNote6: ManagedObject {
    override class var entityName: String { "EvoNote" }
    override class var tableName: String { "evo_notes" }
    @Attribute var text: String?
    @Relationship(inverse: "notes") var author: EvoUser6?
    @Relationship(inverse: "readNotes") var readers: Set<EvoUser6>
}

// Flagged, not applied: `nickname` renamed to `alias`, `level` made a string.
final class EvoUserRenamed: ManagedObject {
    override class var entityName: String { "EvoUser" }
    override class var tableName: String { "evo_users" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var name: String?
    @Attribute(unique: true) var email: String?
    @Attribute var alias: String?
    @Attribute var level: String = "1"
    @Relationship(inverse: "author", deleteRule: .cascade) var notes: Set<EvoNoteRenamed>
    @Relationship(inverse: "readers") var readNotes: Set<EvoNoteRenamed>
}

final class EvoNoteRenamed: ManagedObject {
    override class var entityName: String { "EvoNote" }
    override class var tableName: String { "evo_notes" }
    @Attribute var text: String?
    @Relationship(inverse: "notes") var author: EvoUserRenamed?
    @Relationship(inverse: "readNotes") var readers: Set<EvoUserRenamed>
}

@Suite("Migrations generated from model changes (SchemaDiff)", .heavy)
struct SchemaDiffTests {
    /// The rows and a checksum of the columns no step touches.
    private func footprint(_ connection: Connection) throws -> String {
        try connection.query(
            """
            SELECT count(*)::text || ':' || md5(string_agg(id::text || code || coalesce(name, '') || coalesce(email, ''),
                                                          ',' ORDER BY id))
            FROM evo_users
            """)[0].decode(String.self, at: 0)
    }

    @Test func sixChangesApplyOneAfterAnotherOverTenThousandRows() throws {
        try TestDatabase.withConnection { connection in
            try TestDatabase.withTemporaryDirectory { folder in
                // The first migration is the diff against an empty database: the tables.
                let first = try SchemaDiff(model: try Model(entities: [EvoUser0.self]), on: connection)
                let firstIsAdditive = first.changes.allSatisfy { $0.isAdditive }
                #expect(firstIsAdditive)
                let file = try #require(try first.writeMigration(named: "create users", into: folder))
                #expect(file.lastPathComponent == "0001_create_users.sql")
                try Migrator(directory: folder).migrate(on: connection)
                try connection.execute(
                    """
                    INSERT INTO evo_users (code, name, email)
                    SELECT 'c' || n, 'User ' || n, 'u' || n || '@example.com' FROM generate_series(1, 10000) AS n
                    """)
                let before = try footprint(connection)
                #expect(before.hasPrefix("10000:"))
                let steps: [(name: String, entities: [ManagedObject.Type])] = [
                    ("add notes", [EvoUser1.self, EvoNote1.self]),
                    ("add nickname", [EvoUser2.self, EvoNote1.self]),
                    ("add level", [EvoUser3.self, EvoNote1.self]),
                    ("notes have an author", [EvoUser4.self, EvoNote4.self]),
                    ("readers of notes", [EvoUser5.self, EvoNote5.self]),
                    ("unique email", [EvoUser6.self, EvoNote6.self]),
                ]
                for (offset, step) in steps.enumerated() {
                    let model = try Model(entities: step.entities)
                    let diff = try SchemaDiff(model: model, on: connection)
                    #expect(!diff.isEmpty, "\(step.name): nothing to do")
                    let additive = diff.changes.allSatisfy { $0.isAdditive }
                    #expect(additive, "\(step.name): \(diff.changes.filter { !$0.isAdditive })")
                    let written = try #require(try diff.writeMigration(named: step.name, into: folder))
                    #expect(written.lastPathComponent.hasPrefix(String(format: "%04d_", offset + 2)))
                    let applied = try Migrator(directory: folder).migrate(on: connection)
                    #expect(applied.count == 1, "\(step.name)")
                    #expect(try footprint(connection) == before, "\(step.name) changed the rows")
                    let manager = try ContextManager(configuration: connection.configuration, entities: step.entities)
                    #expect(try manager.coordinator.validateSchema() == [], "\(step.name)")
                    manager.close()
                    #expect(try SchemaDiff(model: model, on: connection).isEmpty, "\(step.name): still a difference")
                }
                // The new column took its default on every existing row.
                #expect(try connection.query("SELECT count(*) FROM evo_users WHERE level = 1")[0].decode(Int.self, at: 0) == 10000)

                // A rename and a type change are flagged, not applied.
                let flagged = try SchemaDiff(model: try Model(entities: [EvoUserRenamed.self, EvoNoteRenamed.self]), on: connection)
                #expect(flagged.changes.count == 2)
                #expect(flagged.changes.allSatisfy { !$0.isAdditive })
                #expect(flagged.changes.contains { $0.sql.hasPrefix("ALTER TABLE evo_users RENAME COLUMN nickname TO alias;") })
                #expect(flagged.changes.contains { $0.description.contains("evo_users.level is int8, the model needs text") })
                let script = flagged.migrationSQL()
                #expect(script.contains("-- ALTER TABLE evo_users RENAME COLUMN nickname TO alias;"))
                #expect(!script.split(separator: "\n").contains { $0.hasPrefix("ALTER") })
                try flagged.writeMigration(named: "rename", into: folder)
                try Migrator(directory: folder).migrate(on: connection)
                let columns = try connection.query(
                    "SELECT column_name::text FROM information_schema.columns WHERE table_name = 'evo_users' ORDER BY 1"
                ).map { try $0.decode(String.self, at: 0) }
                #expect(columns.contains("nickname") && !columns.contains("alias"))
                #expect(try footprint(connection) == before)
            }
        }
    }

    @Test func nothingToWriteWhenTheSchemaMatches() throws {
        try TestDatabase.withConnection { connection in
            let model = try Model(entities: [EvoUser6.self, EvoNote6.self])
            try connection.executeScript(try model.schemaSQL())
            let diff = try SchemaDiff(model: model, on: connection)
            #expect(diff.isEmpty)
            try TestDatabase.withTemporaryDirectory { folder in
                let written = try diff.writeMigration(named: "nothing", into: folder)
                #expect(written == nil)
            }
        }
    }

    @Test func aRequiredColumnWithoutDefaultAndADroppedColumnWaitForADecision() throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript(
                """
                CREATE TABLE evo_users (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    code text NOT NULL UNIQUE, name text, email text, legacy integer, nickname text NOT NULL,
                    version bigint NOT NULL DEFAULT 1);
                """)
            // `legacy` is not in the model; `nickname` (NOT NULL) became optional.
            let diff = try SchemaDiff(model: try Model(entities: [EvoUser2.self]), on: connection)
            #expect(diff.changes.map(\.isAdditive) == [true, false])
            #expect(diff.changes.first?.sql == "ALTER TABLE evo_users ALTER COLUMN nickname DROP NOT NULL;")
            #expect(diff.changes.last?.sql == "ALTER TABLE evo_users DROP COLUMN legacy;")
            // `level` (bigint) is missing beside `legacy` (integer), which it could be:
            // a rename to decide on, not a column added.
            let third = try SchemaDiff(model: try Model(entities: [EvoUser3.self]), on: connection)
            #expect(third.changes.contains { !$0.isAdditive && $0.sql.hasPrefix("ALTER TABLE evo_users RENAME COLUMN legacy TO level;") })
            #expect(!third.changes.contains { $0.isAdditive && $0.sql.contains("ADD COLUMN level") })
            // Without it, `level` is added as is (NOT NULL with its default); a key
            // column with no default is not.
            try connection.execute("ALTER TABLE evo_users DROP COLUMN legacy")
            let fourth = try SchemaDiff(model: try Model(entities: [EvoUser3.self]), on: connection)
            #expect(fourth.changes.contains { $0.isAdditive && $0.sql == "ALTER TABLE evo_users ADD COLUMN level bigint NOT NULL DEFAULT 1;" })
            try connection.execute("ALTER TABLE evo_users DROP COLUMN code")
            let fifth = try SchemaDiff(model: try Model(entities: [EvoUser3.self]), on: connection)
            let code = try #require(fifth.changes.first { $0.sql.contains("ADD COLUMN code") })
            #expect(!code.isAdditive)
            #expect(code.sql.hasPrefix("ALTER TABLE evo_users ADD COLUMN code text;\nUPDATE evo_users SET code = … WHERE code IS NULL;"))
        }
    }
}
