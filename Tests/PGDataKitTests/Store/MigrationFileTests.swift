import Testing

@testable import PGDataKit

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
}
