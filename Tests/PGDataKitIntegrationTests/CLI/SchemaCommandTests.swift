import Foundation
@testable import PGDataKit
@testable import PGDataKitPostgres
import Testing

@Suite("pgdatakit schema (the built binary)")
struct SchemaCommandTests {
    @Test func printsSQLTheExampleCommandsRunOn() throws {
        let outcome = try CLI.run(["schema"])
        #expect(outcome.status == 0, "\(outcome.error)")
        #expect(outcome.output.contains("CREATE TABLE users ("))
        #expect(outcome.output.contains("CREATE TABLE posts ("))
        // The example's User.posts nullifies: its key sets NULL, and has an index.
        #expect(outcome.output.contains("REFERENCES users (id) ON DELETE SET NULL"))
        #expect(outcome.output.contains("CREATE INDEX posts_user_id_idx ON posts (user_id);"))
        try TestDatabase.withConnection { connection in
            try connection.executeScript(outcome.output)
            let url = try #require(connection.configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("users.json")
                try ImportCommandTests.writeUsers(10, to: file)
                // `import` builds a coordinator for the example model, which checks the schema.
                let imported = try CLI.run(
                    ["import", file.path, "--entity", "users", "--json"], environment: ["DATABASE_URL": url])
                #expect(imported.status == 0, "\(imported.output)\n\(imported.error)")
                #expect(!imported.error.contains("schema:"), "a schema warning: \(imported.error)")
            }
            #expect(try connection.query("SELECT count(*) FROM users")[0].decode(Int.self, at: 0) == 10)
        }
    }
}
