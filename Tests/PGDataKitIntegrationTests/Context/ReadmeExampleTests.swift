import Foundation
@testable import PGDataKit
@testable import PGDataKitPostgres
import Testing

/// The README's first program, run as written (with the test's own database URL).
@Suite("README examples")
struct ReadmeExampleTests {
    @Test func firstProgramInTheReadmeIsTheExampleProgram() throws {
        let readme = try String(contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(
            contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("Sources/pgdatakit-example/main.swift"),
            encoding: .utf8)
        let section = try #require(readme.range(of: "## A first program"))
        let start = try #require(readme.range(of: "```swift\n", range: section.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "```\n", range: start.upperBound..<readme.endIndex))
        #expect(String(readme[start.upperBound..<end.lowerBound]) == source)
    }

    /// The first program, built as `pgdatakit-example`, run from a folder that is not the
    /// repository: on a throwaway server of its own (which it stops at exit: a program
    /// that did not close its manager would log the listener's reconnect warnings then),
    /// and twice on one database (a second run finds what the first saved). Each prints
    /// the names and logs nothing.
    @Test func firstProgramRunsFromAnyFolderAndClosesCleanly() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let url = try #require(configuration.renderedConnectionString())
            var environment = ProcessInfo.processInfo.environment
            for databaseURL in [nil, url, url] {
                environment["DATABASE_URL"] = databaseURL
                let outcome = try ChildProcess.start(
                    try CLI.builtProduct("pgdatakit-example").path, [], in: FileManager.default.temporaryDirectory,
                    environment: environment
                ).wait()
                #expect(outcome.status == 0, "\(outcome.error)")
                #expect(outcome.output == "[\"Ada\"]\n")
                #expect(outcome.error.isEmpty)
            }
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { manager.close() }
            let count = try runThreadSnippet(manager)
            #expect(count == 1)
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

    @Test(.onItsOwnThread) func asyncPerform() async throws {
        try await ExampleSchema.withManagerAsync { manager in
            let count = try await manager.mainContext.perform {
                try manager.mainContext.fetchAll(User.self).count
            }
            #expect(count == 0)
        }
    }
}
