import Foundation
import PGDataKit
import Testing

@Suite("Schema check against the live database")
struct SchemaCheckTests {
    @Test func everyMismatchIsReportedAtOnce() throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript(
                """
                CREATE TABLE users (id bigint PRIMARY KEY, version bigint NOT NULL, user_id text, age text);
                """)
            do {
                _ = try ContextManager(configuration: connection.configuration, entities: [User.self, Post.self])
                Issue.record("expected a schema mismatch")
            } catch let error as SchemaMismatchError {
                let problems = Set(error.mismatches)
                #expect(problems.contains(.missingTable(entity: "Post", table: "posts")))
                #expect(problems.contains(.missingColumn(entity: "User", table: "users", column: "name")))
                #expect(problems.contains(.wrongType(entity: "User", column: "users.age", expected: "bigint", actual: "text")))
                #expect(problems.contains(.missingUniqueConstraint(entity: "User", table: "users", columns: ["user_id"])))
                #expect(problems.contains(.primaryKeyWithoutSequence(entity: "User", table: "users", column: "id")))
                #expect(error.mismatches.count == 5)
                #expect(error.description.contains("users.age"))
            }
        }
    }

    @Test func theExampleSchemaMatches() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            manager.close()
        }
    }
}
