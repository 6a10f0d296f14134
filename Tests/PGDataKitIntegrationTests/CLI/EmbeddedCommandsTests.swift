import ArgumentParser
import PGDataKitCommands

enum AppModel: CommandModel {
    static let entities: [ManagedObject.Type] = [User.self, Post.self]
}

struct App: ParsableCommand {   // mark it @main in your executable
    static let configuration = CommandConfiguration(
        subcommands: [MigrateCommand<AppModel>.self, SchemaCommand<AppModel>.self])
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
}
