import ArgumentParser
import Foundation
import PGDataKit

/// One-object saves, one after another: what a request handler's save costs the client.
/// `scripts/instructions save` runs it under callgrind and divides the saves' inclusive
/// instructions by their number (the figure instrumentation such as tracing must not move).
struct SaveBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "saves",
        abstract: "Saves of one object each: inserts of a new user, then updates of one user.",
        discussion: """
            In one private context, each save inserts one new user (the first half), then each \
            save changes one user's age (the second half): one object and one round trip a \
            save. Prints the saves per second; its use is under callgrind, where the \
            instruction count per save is repeatable.
            """)

    @Option(help: "Saves of each kind (inserts, then as many updates).")
    var saves = 1000

    func run() throws {
        let database = try BenchDatabase()
        defer { database.drop() }
        let manager = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { manager.close() }
        let context = manager.newPrivateContext()
        let count = max(1, saves)
        let started = Date()
        var last: BenchUser?
        for index in 0..<count {
            last = try context.performAndWait {
                let user = BenchUser(context: context)
                user.userID = "save-\(index)"
                user.age = index % 90
                try context.save()
                return user
            }
        }
        guard let user = last else { throw ValidationError("no user was saved") }
        for index in 0..<count {
            try context.performAndWait {
                user.age = index % 90
                try context.save()
            }
        }
        let seconds = Date().timeIntervalSince(started)
        print(
            "RESULT saves saves=\(2 * count) saves_per_s=\(String(format: "%.0f", Double(2 * count) / seconds))")
    }
}
