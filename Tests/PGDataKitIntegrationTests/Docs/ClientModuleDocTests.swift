import Foundation
import PGDataKitPostgres
import Testing

/// The Swift block of the PGDataKitPostgres catalog, compiled against the client module
/// alone and run.
@Suite("Docs: the PostgreSQL client module")
struct ClientModuleDocTests {
    @Test func aClientAlone() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let databaseURL = try #require(configuration.renderedConnectionString())
            let setup = try Connection(configuration)
            try setup.execute("INSERT INTO users (user_id, name, age) VALUES ('a', 'Ann', 41), ('b', NULL, 35), ('c', 'Cy', 20)")
            setup.close()

            let connection = try Connection(ConnectionConfiguration(databaseURL))   // postgres://app@db/shop
            defer { connection.close() }
            for row in try connection.query("SELECT id, name FROM users WHERE age > $1", [30]) {
                print(try row.decode(Int64.self, at: 0), try row.decode(String?.self, at: 1) ?? "-")
            }

            let names = try connection.query("SELECT name FROM users WHERE age > $1 ORDER BY id", [30])
                .map { try $0.decode(String?.self, at: 0) }
            #expect(names == ["Ann", nil])
        }
    }
}
