import Foundation
@testable import PGDataKit
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
}
