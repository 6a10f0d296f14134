import Foundation

/// `schema`: prints the SQL that creates the model's tables (`Model.schemaSQL()`).
///
/// Embed it with your model (see `CommandModel`): `myapp schema > migrations/0001_create.sql`.
public struct SchemaCommand<Entities: CommandModel>: ParsableCommand {
    /// The command's name, help and discussion.
    public static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "schema",
            abstract: "Print the SQL that creates the model's tables.",
            discussion: """
                Writes Model.schemaSQL() to standard output: tables with an identity key and a \
                version column, NOT NULL and defaults as the attributes declare them, unique \
                constraints, foreign keys whose ON DELETE follows the delete rules, an index on \
                every foreign key, and join tables. The schema check accepts exactly this SQL. \
                Connects to no database.
                """)
    }

    /// A command with no options.
    public init() {}

    /// Prints the script.
    public func run() throws {
        print(try Model(entities: Entities.entities).schemaSQL(), terminator: "")
    }
}
