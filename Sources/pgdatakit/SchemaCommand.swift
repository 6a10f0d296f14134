import ArgumentParser
import PGDataKit

struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Print the SQL that creates the example model's tables.",
        discussion: """
            Writes Model.schemaSQL() for the example model (users and their posts) to \
            standard output: tables with an identity key and a version column, NOT NULL \
            and defaults as the attributes declare them, unique constraints, foreign keys \
            whose ON DELETE follows the delete rules, an index on every foreign key, and \
            join tables. The schema check accepts exactly this SQL. Connects to no database.
            """
    )

    func run() throws {
        print(try Model(entities: ExampleSchema.entities).schemaSQL(), terminator: "")
    }
}
