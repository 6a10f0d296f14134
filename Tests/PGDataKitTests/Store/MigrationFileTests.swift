import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("Migration files and checksums without a server")
struct MigrationFileTests {
    @Test func sha256KnownVectors() {
        #expect(SHA256.hexDigest(of: Array("".utf8)) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hexDigest(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let long = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(SHA256.hexDigest(of: Array(long.utf8)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test(arguments: [
        ("0001_create_users.sql", 1, "create_users"),
        ("20240101_add-index.sql", 20_240_101, "add-index"),
        ("7_x.sql", 7, "x"),
    ] as [(String, Int, String)])
    func validNames(_ file: String, _ version: Int, _ name: String) throws {
        let parsed = try #require(Migrator.parseFileName(file))
        #expect(parsed.0 == version)
        #expect(parsed.1 == name)
    }

    @Test(arguments: ["create.sql", "0001.sql", "0001_.sql", "v1_x.sql", "0001_bad name.sql", "0001_x.SQL"])
    func invalidNames(_ file: String) {
        #expect(Migrator.parseFileName(file) == nil)
    }

    @Test func duplicateVersionsAreRejected() {
        #expect(throws: MigrationError.self) {
            try Migrator(migrations: [
                Migration(version: 1, name: "a", sql: ""), Migration(version: 1, name: "b", sql: ""),
            ])
        }
    }

    @Test func fileNamesArePadded() {
        #expect(Migration(version: 3, name: "x", sql: "").fileName == "0003_x.sql")
    }

    // MARK: - Transaction control in a file

    /// Where `transactionControlStatements()` finds commands, as "COMMAND@line:column".
    private func found(_ sql: String) -> [String] {
        let migration = Migration(version: 1, name: "x", sql: sql)
        return migration.transactionControlStatements().map { statement in
            let location = migration.location(ofCharacterAt: statement.offset)
            return "\(statement.command)@\(location.line ?? 0):\(location.column ?? 0)"
        }
    }

    @Test(arguments: [
        ("BEGIN;\nCREATE TABLE a ();\nCOMMIT;", ["BEGIN@1:1", "COMMIT@3:1"]),
        ("create table a ();\n  commit ;", ["COMMIT@2:3"]),
        ("START TRANSACTION ISOLATION LEVEL SERIALIZABLE; SELECT 1; END;", ["START TRANSACTION@1:1", "END@1:59"]),
        ("Begin Work; rollback; abort;", ["BEGIN@1:1", "ROLLBACK@1:13", "ABORT@1:23"]),
        ("ROLLBACK AND CHAIN;\nROLLBACK PREPARED 'x';", ["ROLLBACK@1:1", "ROLLBACK@2:1"]),
        ("PREPARE TRANSACTION 'x';", ["PREPARE TRANSACTION@1:1"]),
        ("COMMIT PREPARED 'x'", ["COMMIT@1:1"]),
        ("/* comment */ -- another\n  begin", ["BEGIN@2:3"]),
        ("SELECT 'é', 'ü';\ncommit;", ["COMMIT@2:1"]),
        ("SELECT 1;\r\nCOMMIT;", ["COMMIT@2:1"]),
    ] as [(String, [String])])
    func transactionControlIsFound(_ sql: String, _ expected: [String]) {
        #expect(found(sql) == expected)
    }

    @Test(arguments: [
        "CREATE TABLE t (begin_date date, commit_id int, \"end\" int);",
        "INSERT INTO t (note) VALUES ('BEGIN; COMMIT;'), ('it''s; END; ROLLBACK');",
        "INSERT INTO t (note) VALUES (E'quote \\'; COMMIT; \\\\'), (e'x\\';');",
        "-- COMMIT;\nSELECT 1; /* ROLLBACK; /* nested; */ END; */ SELECT 2;",
        "DO $$ BEGIN PERFORM 1; COMMIT; END $$;",
        "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $body$ BEGIN\n  NULL;\nEND; $body$;",
        """
        CREATE OR REPLACE FUNCTION f(x int) RETURNS int LANGUAGE sql
        BEGIN ATOMIC
          SELECT CASE WHEN x > 0 THEN 1 ELSE 0 END;
          SELECT x;
        END;
        CREATE PROCEDURE p() LANGUAGE sql BEGIN ATOMIC INSERT INTO t VALUES (1); END;
        """,
        "CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO u VALUES (1); NOTIFY t);",
        "SAVEPOINT s; RELEASE SAVEPOINT s; ROLLBACK TO SAVEPOINT s; ROLLBACK WORK TO s; ROLLBACK TRANSACTION TO s;",
        "PREPARE transaction_plan AS SELECT 1; PREPARE transaction AS SELECT $1::int;",
        "SELECT \"BEGIN\"; SELECT $1, a$b FROM \"COMMIT\";",
        "SELECT $tag$ it's; COMMIT; $notag$ $tag$;",
        "",
    ])
    func harmlessTextIsNotTransactionControl(_ sql: String) {
        #expect(found(sql) == [], "in \(sql)")
    }

    @Test func errorPositionsBecomeLineAndColumnInCharacters() {
        let migration = Migration(
            version: 2, name: "typo", sql: "-- Größe ✓\r\nSELECT 1;\nSELECT x FROMM;\n", path: "db/0002_typo.sql")
        // PostgreSQL's 1-based position 32 is the "F" of "FROMM" (\r\n is two characters): offset 31.
        let location = migration.location(ofCharacterAt: 31)
        #expect(location.description == "db/0002_typo.sql:3:10")
        #expect(location.lineText == "SELECT x FROMM;")
        let first = migration.location(ofCharacterAt: 0)
        #expect(first.description == "db/0002_typo.sql:1:1")
        #expect(first.lineText == "-- Größe ✓")
        #expect(migration.fileName == "0002_typo.sql")
    }
}
