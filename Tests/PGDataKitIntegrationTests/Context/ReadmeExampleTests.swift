import Foundation
import PGDataKit
import Testing

/// The README's first program, run as written (with the test's own database URL).
@Suite("README examples")
struct ReadmeExampleTests {
    @Test func firstProgram() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            // --- as in README.md, "A first program" ---
            let connection = try Connection(url: url)
            try Migrator(directory: TestDatabase.repositoryRoot.appendingPathComponent("migrations")).migrate(on: connection)

            let manager = try ContextManager(
                configuration: ConnectionConfiguration(url), entities: [User.self, Post.self])

            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "u1"
                user.name = "Ada"
                let post = Post(context: context)
                post.postID = "p1"
                post.title = "Hello"
                post.user = user
                try context.save()
            }

            let names = try manager.mainContext.performAndWait {
                try manager.mainContext.fetchAll(User.self).map { $0.name ?? "" }
            }
            // --- end ---
            #expect(names == ["Ada"])
            let count = try runThreadSnippet(manager)
            #expect(count == 1)
            connection.close()
            manager.close()
        }
    }

    /// The README's async and thread snippets.
    private func runThreadSnippet(_ manager: ContextManager) throws -> Int {
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let context = manager.newPrivateContext()
            try? context.performAndWait {
                User(context: context).userID = "from-a-thread"
                try context.save()
            }
            done.signal()
        }
        done.wait()
        return try manager.mainContext.performAndWait {
            try manager.mainContext.fetchAll(User.self).filter { $0.userID == "from-a-thread" }.count
        }
    }

    @Test func asyncPerform() async throws {
        try await ExampleSchema.withManagerAsync { manager in
            let count = try await manager.mainContext.perform {
                try manager.mainContext.fetchAll(User.self).count
            }
            #expect(count == 0)
        }
    }
}
