import ArgumentParser
import PGDataKitCommands

enum AppModel: CommandModel {
    static let entities: [ManagedObject.Type] = [User.self, Post.self]
}

struct App: ParsableCommand {   // mark it @main in your executable
    static let configuration = CommandConfiguration(
        subcommands: [MigrateCommand<AppModel>.self, SchemaCommand<AppModel>.self, ImportCommand<AppModel>.self])
}

import Foundation
@testable import PGDataKitPostgres
import Testing

/// The commands a program embeds with its own model (here the test target's `User` and
/// `Post`, whose `User.posts` cascades where the CLI's example nullifies).
@Suite("PGDataKitCommands embedded in a program of one's own")
struct EmbeddedCommandsTests {
    @Test func migrateGeneratesAndAppliesTheProgramsModel() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try TestDatabase.withTemporaryDirectory { folder in
                var generate = try App.parseAsRoot(["migrate", "--generate", "first", "--dir", folder.path, "--database-url", url])
                try generate.run()
                let sql = try String(contentsOf: folder.appendingPathComponent("0001_first.sql"), encoding: .utf8)
                #expect(sql.contains("REFERENCES users (id) ON DELETE CASCADE"), "\(sql)")
                var apply = try App.parseAsRoot(["migrate", "--dir", folder.path, "--database-url", url])
                try apply.run()
                let manager = try ContextManager(configuration: configuration, entities: AppModel.entities)
                defer { manager.close() }
                #expect(try manager.coordinator.validateSchema() == [])
            }
        }
    }

    @Test func theSubcommandsAreThereWithTheirHelp() throws {
        #expect(App.helpMessage().contains("migrate"))
        #expect(App.helpMessage(for: MigrateCommand<AppModel>.self).contains("--generate <generate>"))
        #expect(App.helpMessage(for: SchemaCommand<AppModel>.self).contains("Print the SQL that creates the model's tables."))
        #expect(throws: (any Error).self) { try App.parseAsRoot(["migrate", "--no-such-option"]) }
    }

    /// `import` of a program of its own, into an entity the example schema does not have.
    @Test func importReadsTheProgramsOwnEntities() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            try ContextManager(configuration: configuration, entities: StoryModel.entities, createsSchema: true).close()
            try TestDatabase.withTemporaryDirectory { folder in
                let file = folder.appendingPathComponent("stories.jsonl")
                let lines = (0..<250).map { "{\"code\": \"s\($0)\", \"title\": \"Story \($0)\", \"score\": \($0)}" }
                try (lines.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
                for entity in ["Story", "stories"] {
                    var command = try StoryApp.parseAsRoot(
                        ["import", file.path, "--entity", entity, "--batch-size", "100", "--quiet", "--database-url", url])
                    try command.run()
                }
                let connection = try Connection(configuration)
                defer { connection.close() }
                let row = try connection.query("SELECT count(*), sum(score), max(version) FROM stories")[0]
                #expect(try row.decode(Int.self, at: 0) == 250)
                #expect(try row.decode(Int.self, at: 1) == (0..<250).reduce(0, +))
                // The second run found every record equal to its row: nothing written.
                #expect(try row.decode(Int.self, at: 2) == 1)

                var unknown = try StoryApp.parseAsRoot(["import", file.path, "--entity", "users", "--database-url", url])
                let error = try #require(throws: ValidationError.self) { try unknown.run() }
                #expect("\(error)".contains("the model has stories, topics, editors"), "\(error)")
                var unkeyed = try StoryApp.parseAsRoot(["import", file.path, "--entity", "editors", "--database-url", url])
                let keyless = try #require(throws: ValidationError.self) { try unkeyed.run() }
                #expect("\(keyless)".contains("no unique key of one attribute"), "\(keyless)")
            }
        }
    }
}

/// A program whose model is the stories of the many-to-many tests.
enum StoryModel: CommandModel {
    static let entities: [ManagedObject.Type] = [Story.self, Topic.self, Editor.self]
}

/// Its executable's commands.
struct StoryApp: ParsableCommand {
    static let configuration = CommandConfiguration(subcommands: [ImportCommand<StoryModel>.self])
}
