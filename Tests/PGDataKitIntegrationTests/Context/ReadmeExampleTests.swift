import Foundation
@testable import PGDataKit
@testable import PGDataKitPostgres
import Testing

/// The first program of the README and GettingStarted.md, run as written (with the
/// test's own database URL).
@Suite("README examples")
struct ReadmeExampleTests {
    @Test func firstProgramInTheReadmeAndTheArticleIsTheExampleProgram() throws {
        let source = try String(
            contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("Sources/pgdatakit-example/main.swift"),
            encoding: .utf8)
        let readme = try DocSnippets.swiftBlocks(in: "README.md", section: "## A first program")
        let article = try DocSnippets.swiftBlocks(in: "\(DocSnippets.catalog)/GettingStarted.md", section: "### A first program")
        #expect(readme.count == 1 && article.count == 1)
        for block in readme + article {
            #expect(block + "\n" == source)
        }
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
        }
    }
}
