import Foundation
import Testing

/// Every Swift block of README.md and of the DocC articles appears, line for line, in a
/// file that compiles and runs it (a test under `Tests/`, or the first program), so the
/// documentation cannot drift from code that builds.
@Suite("Docs: every Swift block is tested")
struct DocCoverageTests {
    /// Blocks no test can compile, by their first line, and why.
    static let untestable: [String: String] = [
        "// Package.swift of your program":
            "a manifest fragment: tests cannot import PackageDescription; the package's own Package.swift builds",
        "// Vapor: entrypoint.swift":
            "a Vapor program: the test targets do not depend on Vapor (its first build alone takes minutes); its PGDataKit calls are those of the Hummingbird example's blocks",
    ]

    /// Every Swift block, with the file it is in.
    func blocks() throws -> [(file: String, lines: [String])] {
        try DocSnippets.documentationFiles().flatMap { file in
            try DocSnippets.swiftBlocks(in: file).map { (file, DocSnippets.significantLines($0)) }
        }
    }

    @Test func everySwiftBlockIsInATest() throws {
        let sources = try DocSnippets.testedSources().filter { !#filePath.hasSuffix($0.path) }
        let blocks = try blocks()
        #expect(blocks.count >= 40)
        for block in blocks where Self.untestable[block.lines.first ?? ""] == nil {
            #expect(
                sources.contains { DocSnippets.contains($0.lines, block.lines) },
                "\(block.file): no test holds this block line for line:\n\(block.lines.joined(separator: "\n"))")
        }
    }

    @Test func everyUntestableBlockIsStillThere() throws {
        let firstLines = Set(try blocks().compactMap(\.lines.first))
        for line in Self.untestable.keys {
            #expect(firstLines.contains(line), "no block starts with \(line) any more: drop it from the list")
        }
    }

    /// The helper reads sections, indented fences and the blocks after them.
    @Test func snippetsAreReadAsWritten() throws {
        let blocks = try DocSnippets.swiftBlocks(in: "\(DocSnippets.catalog)/Deployment.md", section: "### Failover to a standby")
        #expect(blocks.count == 1)
        #expect(blocks.first?.hasPrefix("let manager = try ContextManager(\n    configuration: ConnectionConfiguration(") == true)
    }
}
