import Foundation
import PGDataKit
import Testing

/// A node of a tree: a to-one relationship to its own entity; deleting a parent leaves
/// its children to the library (no action in the database).
final class GenNode: ManagedObject {
    override class var tableName: String { "nodes" }
    @Attribute var name: String = ""
    @Relationship(inverse: "children") var parent: GenNode?
    @Relationship(inverse: "parent", deleteRule: .noAction) var children: Set<GenNode>
}

/// A label that points at a user with no way back (no inverse).
final class GenLabel: ManagedObject {
    override class var tableName: String { "labels" }
    @Attribute var text: String = ""
    @Relationship var owner: User?
}

/// One side of a cycle: a chicken comes from an egg and lays eggs.
final class GenChicken: ManagedObject {
    override class var tableName: String { "chickens" }
    @Attribute var name: String = ""
    @Relationship(inverse: "hatched") var egg: GenEgg?
    @Relationship(inverse: "mother", deleteRule: .cascade) var eggs: Set<GenEgg>
}

/// The other side: an egg has a mother and hatches chickens.
final class GenEgg: ManagedObject {
    override class var tableName: String { "eggs" }
    @Attribute var weight: Double = 0
    @Relationship(inverse: "eggs") var mother: GenChicken?
    @Relationship(inverse: "egg", deleteRule: .deny) var hatched: Set<GenChicken>
}

/// Names long enough that PostgreSQL would cut the derived ones: the script names them
/// itself.
final class GenLongNames: ManagedObject {
    override class var tableName: String { String(repeating: "l", count: 60) }
    @Attribute(unique: true) var aPropertyWithAVeryLongName: String = ""
    @Relationship(inverse: "others") var partner: GenLongNames?
    @Relationship(inverse: "partner") var others: Set<GenLongNames>
}

@Suite("The schema generated from the model passes the schema check and holds objects")
struct GeneratedSchemaTests {
    /// Runs the model's script in a fresh database, opens a manager on it (which checks
    /// the schema; no warnings either) and hands both to `body`; checks that the foreign keys have the
    /// expected names and `ON DELETE` actions (`table.column` → name and
    /// `pg_constraint.confdeltype`: `c` cascade, `n` set null, `a` no action).
    private func withGeneratedSchema(
        _ entities: [ManagedObject.Type], foreignKeys: [String: (name: String, action: String)],
        _ body: (ContextManager, Connection) throws -> Void
    ) throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript(try Model(entities: entities).schemaSQL())
            let manager = try ContextManager(configuration: connection.configuration, entities: entities)
            defer { manager.close() }
            // Not a mismatch, and not a warning either.
            #expect(try manager.coordinator.validateSchema() == [])
            let rows = try connection.query(
                """
                SELECT t.relname::text || '.' || a.attname::text, c.conname::text, c.confdeltype::text
                FROM pg_constraint c
                JOIN pg_class t ON t.oid = c.conrelid
                JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                WHERE c.contype = 'f' AND t.relnamespace = current_schema()::regnamespace
                """)
            var actual: [String: String] = [:]
            for row in rows {
                actual[try row.decode(String.self, at: 0)] = "\(try row.decode(String.self, at: 1)) \(try row.decode(String.self, at: 2))"
            }
            #expect(actual == foreignKeys.mapValues { "\($0.name) \($0.action)" })
            try body(manager, connection)
        }
    }

    /// The number of rows of a table.
    private func count(_ table: String, on connection: Connection) throws -> Int {
        try connection.query("SELECT count(*) FROM \(table)")[0].decode(Int.self, at: 0)
    }

    @Test func theExampleModel() throws {
        try withGeneratedSchema(
            [User.self, Post.self], foreignKeys: ["posts.user_id": ("posts_user_id_fkey", "c")]
        ) { manager, connection in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "u1"
                user.age = 40
                let post = Post(context: context)
                post.postID = "p1"
                post.user = user
                try context.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let users = try reader.fetchAll(User.self)
                #expect(users.map(\.userID) == ["u1"])
                #expect(users.first?.posts.map(\.postID) == ["p1"])
            }
            // The database cascades as the delete rule does.
            try connection.execute("DELETE FROM users")
            #expect(try count("posts", on: connection) == 0)
        }
    }

    @Test func manyToManyAndOneToOne() throws {
        try withGeneratedSchema(
            ManyToManySchema.entities,
            foreignKeys: [
                "stories_topics.story_id": ("stories_topics_story_id_fkey", "c"),
                "stories_topics.topic_id": ("stories_topics_topic_id_fkey", "c"),
                "curation.story": ("curation_story_fkey", "c"),
                "curation.curator": ("curation_curator_fkey", "c"),
                "follows.follower_id": ("follows_follower_id_fkey", "c"),
                "follows.followed_id": ("follows_followed_id_fkey", "c"),
                "passports.person_id": ("passports_person_id_fkey", "c"),
            ]
        ) { manager, connection in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let story = Story(context: context)
                story.code = "s1"
                let topic = Topic(context: context)
                topic.name = "swift"
                let editor = Editor(context: context)
                editor.name = "ed"
                story.topics = [topic]
                story.curators = [editor]
                let ada = Person(context: context)
                ada.name = "ada"
                let bob = Person(context: context)
                bob.name = "bob"
                ada.following = [bob]
                let passport = Passport(context: context)
                passport.number = "P1"
                passport.holder = ada
                try context.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                #expect(try reader.fetchAll(Story.self).first?.topics.names == ["swift"])
                #expect(try reader.fetchAll(Editor.self).first?.curated.codes == ["s1"])
                let people = try reader.fetchAll(Person.self)
                #expect(people.first { $0.name == "ada" }?.following.names == ["bob"])
                #expect(people.first { $0.name == "ada" }?.passport?.number == "P1")
                #expect(try reader.fetchAll(Topic.self).count == 1)
            }
            #expect(try count("stories_topics", on: connection) == 1)
            #expect(try count("curation", on: connection) == 1)
            #expect(try count("follows", on: connection) == 1)
            // The one-to-one key is unique.
            #expect(throws: PostgresError.self) {
                try connection.execute("INSERT INTO passports (number, person_id) SELECT 'P2', person_id FROM passports")
            }
        }
    }

    /// Every attribute type, optional and not; the defaults are valid for their columns
    /// and read back as the Swift defaults.
    @Test func everyAttributeType() throws {
        try withGeneratedSchema([Sample.self], foreignKeys: [:]) { manager, connection in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let sample = Sample(context: context)
                sample.text = "saved"
                sample.optionalText = "o"
                sample.optionalInt = 1
                sample.optionalDouble = 2.5
                sample.optionalDecimal = 3
                sample.optionalFlag = true
                sample.optionalDate = Date(timeIntervalSince1970: 60)
                sample.optionalUUID = UUID()
                sample.optionalData = Data([1])
                sample.optionalJSON = .string("j")
                try context.save()
            }
            // A row of nothing but defaults.
            try connection.execute("INSERT INTO samples DEFAULT VALUES")
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let samples = try reader.fetchAll(Sample.self)
                #expect(samples.count == 2)
                let saved = samples.first { $0.text == "saved" }
                #expect(saved?.optionalDecimal == 3 && saved?.optionalJSON == .string("j"))
                let defaulted = try #require(samples.first { $0.text == "" })
                #expect(defaulted.int == 0 && defaulted.int64 == 0 && defaulted.int32 == 0 && defaulted.int16 == 0)
                #expect(defaulted.double == 0 && defaulted.float == 0 && defaulted.decimal == 0 && !defaulted.flag)
                #expect(defaulted.date == Date(timeIntervalSince1970: 0))
                #expect(defaulted.data == Data() && defaulted.json == .null)
                #expect(defaulted.optionalText == nil && defaulted.optionalJSON == nil)
            }
        }
    }

    /// Each delete rule gives its action: cascade, nullify (and no inverse) set null,
    /// deny and no action leave it to the library (the database refuses).
    @Test func everyDeleteRule() throws {
        try withGeneratedSchema(
            [User.self, Post.self, Team.self, Member.self, Vault.self, Item.self, GenNode.self, GenLabel.self],
            foreignKeys: [
                "posts.user_id": ("posts_user_id_fkey", "c"),
                "members.team_id": ("members_team_id_fkey", "n"),
                "items.vault_id": ("items_vault_id_fkey", "a"),
                "nodes.parent_id": ("nodes_parent_id_fkey", "a"),
                "labels.owner_id": ("labels_owner_id_fkey", "n"),
            ]
        ) { manager, connection in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let member = Member(context: context)
                member.name = "m"
                member.team = Team(context: context)
                let item = Item(context: context)
                item.vault = Vault(context: context)
                let root = GenNode(context: context)
                root.name = "root"
                let leaf = GenNode(context: context)
                leaf.name = "leaf"
                leaf.parent = root
                let label = GenLabel(context: context)
                label.owner = User(context: context)
                label.owner?.userID = "owner"
                try context.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let (members, items) = (try reader.fetchAll(Member.self), try reader.fetchAll(Item.self))
                let (nodes, labels) = (try reader.fetchAll(GenNode.self), try reader.fetchAll(GenLabel.self))
                #expect(members.first?.team != nil && items.first?.vault != nil)
                #expect(nodes.first { $0.name == "leaf" }?.parent?.name == "root")
                #expect(labels.first?.owner?.userID == "owner")
            }
            try connection.execute("DELETE FROM teams")
            #expect(try connection.query("SELECT team_id FROM members")[0].decode(Int?.self, at: 0) == nil)
            try connection.execute("DELETE FROM users")
            #expect(try connection.query("SELECT owner_id FROM labels")[0].decode(Int?.self, at: 0) == nil)
            #expect(throws: PostgresError.self) { try connection.execute("DELETE FROM vaults") }
            #expect(throws: PostgresError.self) { try connection.execute("DELETE FROM nodes WHERE name = 'root'") }
        }
    }

    /// Shortened names are the names the database holds: every constraint and index of
    /// the table is named in the script.
    @Test func longNames() throws {
        let table = String(repeating: "l", count: 60)
        let script = try Model(entities: [GenLongNames.self]).schemaSQL()
        try withGeneratedSchema(
            [GenLongNames.self],
            foreignKeys: ["\(table).partner_id": (Self.shortened("\(table)_partner_id_fkey"), "n")]
        ) { manager, connection in
            let names = try connection.query(
                """
                SELECT conname::text FROM pg_constraint WHERE conrelid = $1::regclass
                UNION SELECT indexname::text FROM pg_indexes WHERE tablename = $2
                """, [table, table]
            ).map { try $0.decode(String.self, at: 0) }
            // The primary key, the unique key (constraints and their indexes alike) and the
            // foreign key's constraint and index.
            #expect(names.count == 4)
            for name in names {
                #expect(script.contains(name), "\(name) is not in the script")
            }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let first = GenLongNames(context: context)
                first.aPropertyWithAVeryLongName = "a"
                let second = GenLongNames(context: context)
                second.aPropertyWithAVeryLongName = "b"
                second.partner = first
                try context.save()
            }
            #expect(try connection.query("SELECT count(partner_id) FROM \(table)")[0].decode(Int.self, at: 0) == 1)
        }
    }

    /// A name of more than 63 bytes as the script shortens it: its first 54 bytes, `_`,
    /// and the 32-bit FNV-1a hash of the whole name in hex (written out here again).
    private static func shortened(_ name: String) -> String {
        var hash: UInt32 = 0x811c_9dc5
        for byte in name.utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
        let digits = String(hash, radix: 16)
        return String(decoding: name.utf8.prefix(54), as: UTF8.self) + "_" + String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// A cycle of foreign keys: one is added after both tables; both tables hold objects
    /// that point at each other.
    @Test func aCycle() throws {
        try withGeneratedSchema(
            [GenChicken.self, GenEgg.self],
            foreignKeys: [
                "chickens.egg_id": ("chickens_egg_id_fkey", "a"),
                "eggs.mother_id": ("eggs_mother_id_fkey", "c"),
            ]
        ) { manager, connection in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let hen = GenChicken(context: context)
                hen.name = "hen"
                try context.save()
                let egg = GenEgg(context: context)
                egg.weight = 55.5
                egg.mother = hen
                let chick = GenChicken(context: context)
                chick.name = "chick"
                chick.egg = egg
                try context.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let chickens = try reader.fetchAll(GenChicken.self)
                #expect(chickens.first { $0.name == "chick" }?.egg?.mother?.name == "hen")
                #expect(try reader.fetchAll(GenEgg.self).first?.hatched.map(\.name) == ["chick"])
            }
        }
    }
}
