import Foundation
import Logging
@testable import PGDataKit
@testable import PGDataKitPostgres
import Testing

@Suite("pgdatakit watch (the built binary)")
struct WatchCommandTests {
    /// Three saves of this process reach the watching process, one line each with the
    /// saving process and the counts per entity; `--count` ends it with status 0.
    @Test func showsEverySaveOfAnotherProcessAndStopsAfterCount() throws {
        try ExampleSchema.withManager { manager in
            let url = try #require(manager.coordinator.pool.configuration.renderedConnectionString())
            let watch = try CLI.start(["watch", "--count", "3", "--duration", "60", "--database-url", url])
            let started = ContinuousClock.now
            func printed() -> String { (try? String(contentsOfFile: watch.outputPath, encoding: .utf8)) ?? "" }
            while !printed().contains("Watching"), started.duration(to: .now) < .seconds(30) {
                Thread.sleep(forTimeInterval: 0.02)
            }
            #expect(!printed().contains("secret"))
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "watched"
                let post = Post(context: context)
                post.postID = "p"
                post.user = user
                try context.save()
                user.name = "renamed"
                try context.save()
                context.delete(post)
                try context.save()
            }
            let outcome = try watch.wait()
            #expect(outcome.status == 0, "\(outcome.output) \(outcome.error)")
            let lines = outcome.output.split(separator: "\n").map(String.init).filter { $0.hasPrefix("#") }
            #expect(lines.count == 3, "\(outcome.output)")
            let pid = "pid \(getpid())"
            #expect(lines.allSatisfy { $0.contains(pid) })
            #expect(lines.first?.contains("Post +1 ~0 -0, User +1 ~0 -0") == true, "\(lines)")
            #expect(lines.dropFirst().first?.contains("User +0 ~1 -0") == true, "\(lines)")
            #expect(lines.last?.contains("Post +0 ~0 -1") == true, "\(lines)")
            #expect(outcome.output.contains("Watched 3 saves from 1 processes."))
        }
    }

    @Test func aDatabaseWithoutTheChangeLogIsAClearError() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.execute("DROP TABLE pgdatakit_changes")
            let url = try #require(configuration.renderedConnectionString())
            let outcome = try CLI.run(["watch", "--duration", "1", "--database-url", url])
            #expect(outcome.status == 1)
            #expect(outcome.error.contains("pgdatakit_changes"), "\(outcome.error)")
        }
    }

    /// The lines of saves (`#<id> …`) a run printed, and the token each ends with.
    func saves(_ output: String) throws -> [(id: Int64, token: HistoryToken)] {
        try output.split(separator: "\n").filter { $0.hasPrefix("#") }.map { line in
            let words = line.split(separator: " ")
            let id = try #require(Int64(words[0].dropFirst()))
            return (id, try HistoryToken(parsing: String(try #require(words.last))))
        }
    }

    func lastToken(_ output: String) throws -> HistoryToken {
        let line = try #require(output.split(separator: "\n").last { $0.hasPrefix("Last token: ") })
        return try HistoryToken(parsing: String(line.dropFirst("Last token: ".count)))
    }

    /// `--since TOKEN`: the saves after the token (this process's too), each with the
    /// token after it, and on exit the token to go on from.
    @Test func sinceATokenReplaysTheHistoryAndPrintsWhereToGoOn() throws {
        try ExampleSchema.withManager { manager in
            let url = try #require(manager.coordinator.pool.configuration.renderedConnectionString())
            let start = try manager.coordinator.currentHistoryToken()
            let context = manager.newPrivateContext()
            func saveUser(_ id: String) throws {
                try context.performAndWait {
                    User(context: context).userID = id
                    try context.save()
                }
            }
            for id in ["a", "b", "c"] { try saveUser(id) }
            let first = try CLI.run(["watch", "--since", start.description, "--count", "3", "--duration", "60", "--database-url", url])
            #expect(first.status == 0, "\(first.output) \(first.error)")
            let printed = try saves(first.output)
            #expect(printed.count == 3)
            #expect(printed.allSatisfy { $0.token.description.hasPrefix("h1:") })
            #expect(printed.map(\.token) == printed.map(\.token).sorted())
            let resume = try lastToken(first.output)
            #expect(resume == printed.last?.token)
            try saveUser("d")
            let second = try CLI.run(["watch", "--since", resume.description, "--count", "1", "--duration", "60", "--database-url", url])
            #expect(second.status == 0, "\(second.error)")
            let next = try saves(second.output)
            #expect(next.count == 1 && next[0].id > (printed.last?.id ?? .max))
            // From a record's token: the records after it.
            let middle = try CLI.run(["watch", "--since", printed[1].token.description, "--duration", "1", "--plain", "--database-url", url])
            #expect(try saves(middle.output).map(\.id) == [printed[2].id, next[0].id])
            #expect(try lastToken(middle.output) >= next[0].token)
        }
    }

    /// `--reader NAME --acknowledge` registers and moves the reader; `--reader NAME`
    /// alone reads after where it stands without moving it.
    @Test func aReaderResumesWhereItAcknowledged() throws {
        try ExampleSchema.withManager { manager in
            let url = try #require(manager.coordinator.pool.configuration.renderedConnectionString())
            let missing = try CLI.run(["watch", "--reader", "audit", "--duration", "1", "--database-url", url])
            #expect(missing.status == 1)
            #expect(missing.error.contains("no history reader named audit"), "\(missing.error)")
            // A transaction of another database runs meanwhile (as the suite's other tests'
            // do): the records' tokens list it as running.
            let (otherDatabase, dropOtherDatabase) = try TestDatabase.makeFreshDatabase()
            let other = try Connection(otherDatabase)
            defer {
                other.close()
                dropOtherDatabase()
            }
            try other.begin()
            let otherTransaction = try other.query("SELECT pg_current_xact_id()::text")[0].decode(String.self, at: 0)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for id in ["a", "b", "c"] {
                    User(context: context).userID = id
                    try context.save()
                }
            }
            let first = try CLI.run(["watch", "--reader", "audit", "--acknowledge", "--count", "2", "--duration", "60", "--database-url", url])
            #expect(first.status == 0, "\(first.error)")
            let acknowledged = try saves(first.output)
            #expect(acknowledged.count == 2)
            let last = try #require(acknowledged.last?.token)
            #expect(last.running.map(String.init).contains(otherTransaction))
            // It ends without a record; a prune's cleaning drops it from the reader's position.
            try other.commit()
            try manager.coordinator.pool.withConnection { try ChangeLog.refreshReaderPositions(on: $0, logger: Logger(label: "test")) }
            let stored = try manager.coordinator.existingHistoryReader(named: "audit").acknowledgedToken()
            #expect(!stored.running.map(String.init).contains(otherTransaction))
            // The last record's token, or the same position cleaned by a pruner of
            // transactions that ended without a record (`refreshReaderPositions`: fewer
            // transactions listed as running). The running ones may be any database's
            // (transaction IDs are the server's), so under a busy suite they often are.
            #expect(
                stored.xmax == last.xmax && stored.floor == last.floor && stored.lookupFrom == last.lookupFrom
                    && Set(stored.running).isSubset(of: last.running) && Set(stored.lookup).isSubset(of: last.lookup),
                "stored \(stored); the watch printed:\n\(first.output)\n\(first.error)")
            for _ in 0..<2 {
                let peek = try CLI.run(["watch", "--reader", "audit", "--count", "1", "--duration", "60", "--database-url", url])
                #expect(peek.status == 0, "\(peek.error)")
                #expect(try saves(peek.output).map(\.id) == [try #require(acknowledged.last).id + 1])
            }
        }
    }

    @Test func anExpiredTokenNamesTheOldestOneHeldAndExitsWithOne() throws {
        try ExampleSchema.withManager { manager in
            let url = try #require(manager.coordinator.pool.configuration.renderedConnectionString())
            let start = try manager.coordinator.currentHistoryToken()
            let context = manager.newPrivateContext()
            try context.performAndWait {
                User(context: context).userID = "gone"
                try context.save()
            }
            try manager.coordinator.pool.withConnection { _ = try $0.execute("DELETE FROM pgdatakit_changes") }
            let outcome = try CLI.run(["watch", "--since", start.description, "--duration", "10", "--database-url", url])
            #expect(outcome.status == 1)
            #expect(outcome.error.contains("has expired"), "\(outcome.error)")
            // The token it names reads on without an error.
            let named = try #require(outcome.error.components(separatedBy: "--since ").last?.split(whereSeparator: \.isWhitespace).first)
            let oldest = try HistoryToken(parsing: String(named))
            #expect(try manager.coordinator.history(after: oldest, limit: 10).records.isEmpty)
        }
    }

    @Test(arguments: [
        ["--since", "h1:5:0:", "--reader", "r"], ["--acknowledge"], ["--since", "h1:0:0:"], ["--since", "nonsense"],
    ])
    func historyOptionsAreChecked(_ options: [String]) throws {
        let outcome = try CLI.run(["watch"] + options + ["--database-url", "postgresql://nobody@127.0.0.1:1/none"])
        #expect(outcome.status == 64, "\(outcome.error)")
        #expect(outcome.error.contains("Error:"))
    }
}
