import ArgumentParser
import PGDataKitCommands

@main
struct PGDataKitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pgdatakit",
        abstract: "Core Data's object graph over PostgreSQL, shared by many worker processes.",
        discussion: """
            Without DATABASE_URL (or --database-url), commands run against a throwaway \
            PostgreSQL server started from the installed binaries and removed afterwards.
            """,
        subcommands: [
            DemoCommand.self, ImportCommand<ExampleSchema>.self, MigrateCommand<ExampleSchema>.self, SchemaCommand<ExampleSchema>.self,
            DatabaseCommand.self,
            WatchCommand.self, DemoWorker.self,
        ]
    )
}
