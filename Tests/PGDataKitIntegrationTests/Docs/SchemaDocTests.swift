import Foundation
import PGDataKit
import Testing

/// The Swift blocks of SchemaAndMigrations.md, run as written, and its printed script
/// compared with what the generator writes.
@Suite("Docs: Schema and migrations")
struct SchemaDocTests {
    static let article = "\(DocSnippets.catalog)/SchemaAndMigrations.md"

    /// The article's `sql` block.
    static func sqlBlock() throws -> String {
        let text = try String(contentsOfFile: TestDatabase.repositoryRoot.appendingPathComponent(article).path, encoding: .utf8)
        let start = try #require(text.range(of: "```sql\n"))
        let end = try #require(text.range(of: "\n```", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    @Test func theArticlePrintsWhatTheGeneratorWrites() throws {
        let model = try Model(entities: [User.self, Post.self])
        let sql = try model.schemaSQL()   // CREATE TABLE … for every entity and join table
        print(sql)
        #expect(sql == (try Self.sqlBlock()) + "\n")
    }

    @Test func createThenCheck() throws {
        let server = try TestDatabase.serverConfiguration()
        let name = "pgdatakit_doc_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try Connection(server)
        defer { admin.close() }
        try admin.execute("CREATE DATABASE " + Connection.quoteIdentifier(name))
        defer { _ = try? admin.execute("DROP DATABASE IF EXISTS " + Connection.quoteIdentifier(name) + " WITH (FORCE)") }
        let url = try #require(server.database(name).renderedConnectionString())

        let manager = try ContextManager(
            configuration: ConnectionConfiguration(url), entities: [User.self, Post.self], createsSchema: true)
        defer { manager.close() }
        #expect(try manager.coordinator.validateSchema().isEmpty)

        let connection = try Connection(url: url)
        defer { connection.close() }
        try connection.execute("DROP INDEX posts_user_id_idx")
        for warning in try manager.coordinator.validateSchema() {
            print(warning.code, warning.table, warning.column)   // missingForeignKeyIndex posts user_id
        }
        #expect(
            try manager.coordinator.validateSchema() == [
                .missingForeignKeyIndex(entity: "Post", table: "posts", column: "user_id")
            ])
    }
}
