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
            save. Prints the saves per second, all and of each kind; its use is under \
            callgrind, where the instruction count per save is repeatable. With --floors, the \
            same inserts and updates as raw transactions follow, and the ratios of the saves' \
            rates to theirs. With --deletes, the inserted users are then deleted, one save \
            each (and as many raw deletes with --floors).
            """)

    @Option(help: "Saves of each kind (inserts, then as many updates).")
    var saves = 1000

    @Flag(
        help: """
            Also time the floors: the same inserts and updates as raw transactions (BEGIN, \
            the statement, COMMIT, one round trip each) on a plain connection.
            """)
    var floors = false

    @Flag(help: "Then delete the inserted users, one save each (and, with --floors, as many raw deletes).")
    var deletes = false

    func run() throws {
        let database = try BenchDatabase()
        defer { database.drop() }
        let manager = try ContextManager(configuration: database.configuration, entities: [BenchUser.self])
        defer { manager.close() }
        let context = manager.newPrivateContext()
        let count = max(1, saves)
        let started = Date()
        var users: [BenchUser] = []
        for index in 0..<count {
            users.append(
                try context.performAndWait {
                    let user = BenchUser(context: context)
                    user.userID = "save-\(index)"
                    user.age = index % 90
                    try context.save()
                    return user
                })
        }
        let inserted = Date()
        guard let user = users.last else { throw ValidationError("no user was saved") }
        for index in 0..<count {
            try context.performAndWait {
                user.age = index % 90
                try context.save()
            }
        }
        let finished = Date()
        let seconds = finished.timeIntervalSince(started)
        let inserts = Double(count) / inserted.timeIntervalSince(started)
        let updates = Double(count) / finished.timeIntervalSince(inserted)
        var line = "RESULT saves saves=\(2 * count) saves_per_s=\(format(Double(2 * count) / seconds))"
            + " inserts_per_s=\(format(inserts)) updates_per_s=\(format(updates))"
        var removals = 0.0
        if deletes {
            let started = Date()
            for user in users {
                try context.performAndWait {
                    context.delete(user)
                    try context.save()
                }
            }
            removals = Double(count) / Date().timeIntervalSince(started)
            line += " deletes_per_s=\(format(removals))"
        }
        if floors {
            let (rawInserts, rawUpdates, rawDeletes) = try floorRates(database.configuration, count: count)
            line += " raw_inserts_per_s=\(format(rawInserts)) raw_updates_per_s=\(format(rawUpdates))"
                + " insert_ratio=\(String(format: "%.2f", inserts / rawInserts))"
                + " update_ratio=\(String(format: "%.2f", updates / rawUpdates))"
            if deletes {
                line += " raw_deletes_per_s=\(format(rawDeletes)) delete_ratio=\(String(format: "%.2f", removals / rawDeletes))"
            }
        }
        print(line)
    }

    /// The floors' rates (per second): `count` raw inserts of a user, then `count` raw
    /// updates of one, then (with --deletes) `count` raw deletes of the users inserted,
    /// each `BEGIN`, the statement and `COMMIT` sent in one go.
    func floorRates(_ configuration: ConnectionConfiguration, count: Int) throws -> (
        inserts: Double, updates: Double, deletes: Double
    ) {
        let raw = try Connection(configuration)
        defer { raw.close() }
        let started = Date()
        for index in 0..<count {
            try raw.executeScript("BEGIN; INSERT INTO users (user_id, age) VALUES ('raw-\(index)', \(index % 90)); COMMIT")
        }
        let inserted = Date()
        for index in 0..<count {
            try raw.executeScript(
                "BEGIN; UPDATE users SET age = \(index % 90), version = version + 1 WHERE user_id = 'raw-0'; COMMIT")
        }
        let updated = Date()
        if deletes {
            for index in 0..<count {
                try raw.executeScript("BEGIN; DELETE FROM users WHERE user_id = 'raw-\(index)'; COMMIT")
            }
        }
        let deleted = Date()
        return (
            Double(count) / inserted.timeIntervalSince(started), Double(count) / updated.timeIntervalSince(inserted),
            deletes ? Double(count) / deleted.timeIntervalSince(updated) : 0
        )
    }

    func format(_ value: Double) -> String { String(format: "%.0f", value) }
}
