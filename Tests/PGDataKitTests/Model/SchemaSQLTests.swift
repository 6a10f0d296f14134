import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

// The example model (migrations/0001), under names of its own: the test targets define
// `User` and `Post` already.

private final class DDLUser: ManagedObject {
    override class var entityName: String { "User" }
    override class var tableName: String { "users" }
    @Attribute(unique: true) var userID: String = ""
    @Attribute var name: String?
    @Attribute var age: Int?
    @Relationship(inverse: "user", deleteRule: .cascade) var posts: Set<DDLPost>
}

private final class DDLPost: ManagedObject {
    override class var entityName: String { "Post" }
    override class var tableName: String { "posts" }
    @Attribute(unique: true) var postID: String = ""
    @Attribute var title: String?
    @Relationship(inverse: "posts") var user: DDLUser?
}

/// Defaults made per object.
private final class DDLStamped: ManagedObject {
    static let serials = Atomic<Int>(0)
    override class var tableName: String { "stamped" }
    @Attribute var token: UUID = UUID()
    @Attribute var created: Date = Date()
    @Attribute var serial: Int = DDLStamped.serials.add(1, ordering: .relaxed).newValue
}

/// A default of every scalar type, and attributes that get none.
private final class DDLDefaults: ManagedObject {
    override class var tableName: String { "defaults" }
    override class var uniqueKeys: [[String]] { [["region", "number"]] }
    @Attribute var text: String = "a'b"
    @Attribute var empty: String = ""
    @Attribute var int: Int = -3
    @Attribute var int64: Int64 = 9_000_000_000
    @Attribute var int32: Int32 = 0
    @Attribute var int16: Int16 = 7
    @Attribute var double: Double = 1.5
    @Attribute var tiny: Double = 0.00001
    @Attribute var notANumber: Double = .nan
    @Attribute var float: Float = 0.25
    @Attribute var infinite: Float = -.infinity
    @Attribute var decimal: Decimal = Decimal(sign: .minus, exponent: -2, significand: 1234)
    @Attribute var flag: Bool = true
    @Attribute var off: Bool = false
    @Attribute var date: Date = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute var uuid: UUID = UUID(uuid: (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 255))
    @Attribute var data: Data = Data([0x00, 0xff])
    @Attribute var json: JSONValue = .object(["a": .number(1)])
    @Attribute var optionalWithDefault: Int? = 5
    @Attribute var optional: String?
    @Attribute(unique: true) var code: String = "x"
    @Attribute var region: String = "eu"
    @Attribute var number: Int = 1
}

// A cycle: eggs point at their mother, chickens at the egg they came from.

private final class DDLChicken: ManagedObject {
    override class var tableName: String { "chickens" }
    @Attribute var name: String?
    @Relationship(inverse: "chickens") var egg: DDLEgg?
    @Relationship(inverse: "mother", deleteRule: .cascade) var eggs: Set<DDLEgg>
}

private final class DDLEgg: ManagedObject {
    override class var tableName: String { "eggs" }
    @Attribute var laidAt: Date?
    @Relationship(inverse: "egg", deleteRule: .deny) var chickens: Set<DDLChicken>
    @Relationship(inverse: "eggs") var mother: DDLChicken?
}

/// A self-referencing to-one (and its to-many inverse), in a table named by a reserved
/// word.
private final class DDLEmployee: ManagedObject {
    override class var tableName: String { "user" }
    @Attribute(column: "order") var rank: Int = 0
    @Attribute(column: "Nickname") var nickname: String?
    @Relationship(inverse: "reports") var manager: DDLEmployee?
    @Relationship(inverse: "manager", deleteRule: .noAction) var reports: Set<DDLEmployee>
}

// One-to-one (the card holds the key) and many-to-many, within one entity and between two.

private final class DDLCitizen: ManagedObject {
    override class var entityName: String { "Citizen" }
    override class var tableName: String { "citizens" }
    @Attribute var name: String = ""
    @Relationship(inverse: "holder", deleteRule: .cascade) var card: DDLCard?
    @Relationship(inverse: "followers", joinTable: "follows", column: "followed_id") var following: Set<DDLCitizen>
    @Relationship(inverse: "following", column: "follower_id") var followers: Set<DDLCitizen>
    @Relationship(inverse: "citizens") var clubs: Set<DDLClub>
}

private final class DDLCard: ManagedObject {
    override class var entityName: String { "Card" }
    override class var tableName: String { "cards" }
    @Attribute var number: String = ""
    @Relationship(inverse: "card", column: "citizen_id") var holder: DDLCitizen?
}

private final class DDLClub: ManagedObject {
    override class var entityName: String { "Club" }
    override class var tableName: String { "clubs" }
    @Attribute(unique: true) var name: String = ""
    @Relationship(inverse: "clubs") var citizens: Set<DDLCitizen>
}

/// Names long enough that the derived names are shortened.
private final class DDLLongNames: ManagedObject {
    override class var tableName: String { "an_entity_table_whose_name_is_rather_long_on_purpose" }
    @Attribute(unique: true) var aPropertyWithAVeryLongName: String = ""
    @Relationship(inverse: "others") var partner: DDLLongNames?
    @Relationship(inverse: "partner") var others: Set<DDLLongNames>
}

/// A table name of 60 bytes: its primary key's name is shortened too.
private final class DDLLongTable: ManagedObject {
    override class var tableName: String { String(repeating: "l", count: 60) }
    @Attribute var text: String?
}

/// A table name past PostgreSQL's limit, and a default no column can hold.
private final class DDLTooLong: ManagedObject {
    override class var tableName: String { String(repeating: "t", count: 64) }
    @Attribute var text: String = "a\u{0}b"
}

@Suite("Schema SQL generated from the model")
struct SchemaSQLTests {
    /// The whole script of the example model: what migrations/0001 creates, with the
    /// delete rule's action, the attribute types' own column types and explicit names.
    @Test func theExampleModelGivesItsScript() throws {
        let script = try Model(entities: [DDLUser.self, DDLPost.self]).schemaSQL()
        #expect(
            script == """
                -- Generated by PGDataKit from the model (entities: User, Post).

                CREATE TABLE users (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    user_id text NOT NULL,
                    name text,
                    age bigint,
                    version bigint NOT NULL DEFAULT 1,
                    CONSTRAINT users_user_id_key UNIQUE (user_id)
                );

                CREATE TABLE posts (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    post_id text NOT NULL,
                    title text,
                    user_id bigint CONSTRAINT posts_user_id_fkey REFERENCES users (id) ON DELETE CASCADE,
                    version bigint NOT NULL DEFAULT 1,
                    CONSTRAINT posts_post_id_key UNIQUE (post_id)
                );

                CREATE INDEX posts_user_id_idx ON posts (user_id);

                """)
    }

    /// Each scalar type's default as SQL; none for `nil` or for a unique key's columns.
    @Test(arguments: [
        "text text NOT NULL DEFAULT 'a''b'",
        "empty text NOT NULL DEFAULT ''",
        "int bigint NOT NULL DEFAULT -3",
        "int64 bigint NOT NULL DEFAULT 9000000000",
        "int32 integer NOT NULL DEFAULT 0",
        "int16 smallint NOT NULL DEFAULT 7",
        "double double precision NOT NULL DEFAULT 1.5",
        "tiny double precision NOT NULL DEFAULT 1e-05",
        "not_a_number double precision NOT NULL DEFAULT 'NaN'::double precision",
        "float real NOT NULL DEFAULT 0.25",
        "infinite real NOT NULL DEFAULT '-Infinity'::real",
        "decimal numeric NOT NULL DEFAULT -12.34",
        "flag boolean NOT NULL DEFAULT true",
        "off boolean NOT NULL DEFAULT false",
        "date timestamptz NOT NULL DEFAULT '2001-01-01 00:00:00.000000+00'::timestamptz",
        "uuid uuid NOT NULL DEFAULT '00010203-0405-0607-0809-0a0b0c0d0eff'::uuid",
        "data bytea NOT NULL DEFAULT '\\x00ff'::bytea",
        "json jsonb NOT NULL DEFAULT '{\"a\":1}'::jsonb",
        "optional_with_default bigint DEFAULT 5",
        "optional text",
        "code text NOT NULL",
        "region text NOT NULL",
        "number bigint NOT NULL",
    ])
    func defaultsAreLiterals(line: String) throws {
        let script = try Model(entities: [DDLDefaults.self]).schemaSQL()
        #expect(script.contains("\n    \(line),\n"), "no line \(line) in\n\(script)")
        #expect(script.contains("CONSTRAINT defaults_code_key UNIQUE (code)"))
        #expect(script.contains("CONSTRAINT defaults_region_number_key UNIQUE (region, number)"))
    }

    /// A default made per object is made per row: a new UUID, the current time; one no
    /// column default can copy (here a counter) gets none.
    @Test func defaultsMadePerObjectAreMadePerRow() throws {
        let script = try Model(entities: [DDLStamped.self]).schemaSQL()
        #expect(script.contains("\n    token uuid NOT NULL DEFAULT gen_random_uuid(),\n"), "\(script)")
        #expect(script.contains("\n    created timestamptz NOT NULL DEFAULT now(),\n"), "\(script)")
        #expect(script.contains("\n    serial bigint NOT NULL,\n"), "\(script)")
        #expect(try Model(entities: [DDLStamped.self]).schemaSQL() == script)
    }

    /// A foreign key that points at a table created later is added after the tables;
    /// the others stay with their columns (their own table included).
    @Test func aCycleIsClosedWithAlterTable() throws {
        let script = try Model(entities: [DDLChicken.self, DDLEgg.self]).schemaSQL()
        let eggs = try #require(script.range(of: "CREATE TABLE eggs"))
        let chickens = try #require(script.range(of: "CREATE TABLE chickens"))
        #expect(eggs.lowerBound < chickens.lowerBound)
        #expect(script.contains("    mother_id bigint,\n"))
        #expect(
            script.contains(
                "    egg_id bigint CONSTRAINT chickens_egg_id_fkey REFERENCES eggs (id) ON DELETE NO ACTION,\n"))
        #expect(
            script.contains(
                "\n\nALTER TABLE eggs ADD CONSTRAINT eggs_mother_id_fkey FOREIGN KEY (mother_id) "
                    + "REFERENCES chickens (id) ON DELETE CASCADE;\n\n"))
        #expect(script.contains("CREATE INDEX eggs_mother_id_idx ON eggs (mother_id);"))
        #expect(script.contains("CREATE INDEX chickens_egg_id_idx ON chickens (egg_id);"))
    }

    /// A to-one pointing at its own entity references its own table inline; reserved
    /// words and capitals are quoted.
    @Test func selfReferenceAndQuoting() throws {
        let script = try Model(entities: [DDLEmployee.self]).schemaSQL()
        #expect(
            script == """
                -- Generated by PGDataKit from the model (entities: DDLEmployee).

                CREATE TABLE "user" (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    "order" bigint NOT NULL DEFAULT 0,
                    "Nickname" text,
                    manager_id bigint CONSTRAINT user_manager_id_fkey REFERENCES "user" (id) ON DELETE NO ACTION,
                    version bigint NOT NULL DEFAULT 1
                );

                CREATE INDEX user_manager_id_idx ON "user" (manager_id);

                """)
    }

    /// The key side of a one-to-one relationship has a unique constraint (which serves
    /// as its index); join tables have both keys, a primary key on the pair and an
    /// index on the second column.
    @Test func oneToOneAndManyToMany() throws {
        let script = try Model(entities: [DDLCitizen.self, DDLCard.self, DDLClub.self]).schemaSQL()
        #expect(
            script.contains(
                """
                CREATE TABLE cards (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    number text NOT NULL DEFAULT '',
                    citizen_id bigint CONSTRAINT cards_citizen_id_fkey REFERENCES citizens (id) ON DELETE CASCADE,
                    version bigint NOT NULL DEFAULT 1,
                    CONSTRAINT cards_citizen_id_key UNIQUE (citizen_id)
                );
                """))
        #expect(!script.contains("cards_citizen_id_idx"))
        #expect(
            script.contains(
                """
                CREATE TABLE follows (
                    follower_id bigint NOT NULL CONSTRAINT follows_follower_id_fkey REFERENCES citizens (id) ON DELETE CASCADE,
                    followed_id bigint NOT NULL CONSTRAINT follows_followed_id_fkey REFERENCES citizens (id) ON DELETE CASCADE,
                    PRIMARY KEY (follower_id, followed_id)
                );
                """))
        #expect(
            script.contains(
                """
                CREATE TABLE citizens_clubs (
                    citizen_id bigint NOT NULL CONSTRAINT citizens_clubs_citizen_id_fkey REFERENCES citizens (id) ON DELETE CASCADE,
                    club_id bigint NOT NULL CONSTRAINT citizens_clubs_club_id_fkey REFERENCES clubs (id) ON DELETE CASCADE,
                    PRIMARY KEY (citizen_id, club_id)
                );
                """))
        #expect(script.contains("CREATE INDEX follows_followed_id_idx ON follows (followed_id);"))
        #expect(script.contains("CREATE INDEX citizens_clubs_club_id_idx ON citizens_clubs (club_id);"))
        #expect(!script.contains("follows_follower_id_idx"))
        #expect(!script.contains("citizens_clubs_citizen_id_idx"))
    }

    /// Long names keep their first 54 bytes (whole characters) and get a hash of the
    /// whole name: 63 bytes, the same every time, distinct for distinct names.
    @Test func longNamesAreShortenedDeterministically() throws {
        #expect(SchemaName.fnv1a("") == 0x811c_9dc5)
        #expect(SchemaName.fnv1a("a") == 0xe40c_292c)
        #expect(SchemaName.fitted("short_name") == "short_name")
        let long = String(repeating: "x", count: 70)
        let fitted = SchemaName.fitted(long)
        #expect(fitted.utf8.count == 63)
        #expect(fitted.hasPrefix(String(repeating: "x", count: 54) + "_"))
        #expect(fitted.hasSuffix(String(format: "%08x", SchemaName.fnv1a(long))))
        #expect(SchemaName.fitted(long + "y") != fitted)
        // A two-byte character across byte 54 stays whole: the prefix stops before it.
        let accented = SchemaName.fitted(String(repeating: "x", count: 53) + "é" + long)
        #expect(accented.hasPrefix(String(repeating: "x", count: 53) + "_"))
        #expect(accented.utf8.count == 62)

        let script = try Model(entities: [DDLLongNames.self]).schemaSQL()
        let table = "an_entity_table_whose_name_is_rather_long_on_purpose"
        let unique = SchemaName.fitted("\(table)_a_property_with_a_very_long_name_key")
        let foreignKey = SchemaName.fitted("\(table)_partner_id_fkey")
        let index = SchemaName.fitted("\(table)_partner_id_idx")
        for name in [unique, foreignKey, index] {
            #expect(name.utf8.count == 63)
            #expect(script.contains(name))
        }
        #expect(script.contains("CONSTRAINT \(unique) UNIQUE (a_property_with_a_very_long_name)"))
        #expect(script.contains("partner_id bigint CONSTRAINT \(foreignKey) REFERENCES \(table) (id) ON DELETE SET NULL"))
        #expect(script.contains("CREATE INDEX \(index) ON \(table) (partner_id);"))
        #expect(script.contains("    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,\n"))

        let longTable = String(repeating: "l", count: 60)
        let primaryKey = SchemaName.fitted(longTable + "_pkey")
        #expect(
            try Model(entities: [DDLLongTable.self]).schemaSQL().contains(
                "    id bigint GENERATED BY DEFAULT AS IDENTITY CONSTRAINT \(primaryKey) PRIMARY KEY,\n"))
    }

    /// A name taken already gets a digit, as PostgreSQL does.
    @Test func takenNamesGetADigit() {
        var names = NameRegistry()
        names.reserve("a_b_c_idx")
        #expect(names.claim("a_b_c_idx") == "a_b_c_idx1")
        #expect(names.claim("a_b_c_idx") == "a_b_c_idx2")
        #expect(names.claim("other") == "other")
    }

    /// Names PostgreSQL would cut, and defaults no column holds, are reported all at once.
    @Test func problemsAreReported() throws {
        let model = try Model(entities: [DDLTooLong.self])
        #expect {
            try model.schemaSQL()
        } throws: { error in
            guard let error = error as? ModelError else { return false }
            let codes = error.problems.map(\.code)
            return codes.contains(.nameTooLong) && codes.contains(.unstorableDefault)
                && error.problems.contains { $0.attribute == "text" && $0.entity == "DDLTooLong" }
                && !error.description.contains("a\u{0}b")
        }
    }

    /// The same model gives the same script, byte for byte, however often it is built.
    @Test func theScriptIsDeterministic() throws {
        let entities: [ManagedObject.Type] = [DDLCitizen.self, DDLCard.self, DDLClub.self, DDLChicken.self, DDLEgg.self]
        let first = try Model(entities: entities)
        let second = try Model(entities: entities)
        #expect(try first.schemaSQL() == first.schemaSQL())
        #expect(try first.schemaSQL() == second.schemaSQL())
        #expect(try SchemaDefinition(model: first) == SchemaDefinition(model: second))
        #expect(try first.schemaSQL().hasSuffix(");\n"))
        #expect(try !first.schemaSQL().contains("\n\n\n"))
    }
}
