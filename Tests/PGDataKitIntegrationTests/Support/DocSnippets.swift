import Foundation

/// The Swift code blocks of the README and the DocC articles, and where the tests hold
/// them: every block must appear, line for line, in a test that compiles and runs it.
enum DocSnippets {
    /// The object graph's DocC catalog, relative to the repository root.
    static let catalog = "Sources/PGDataKit/PGDataKit.docc"
    /// The PostgreSQL client module's DocC catalog.
    static let clientCatalog = "Sources/PGDataKitPostgres/PGDataKitPostgres.docc"

    /// README.md and every article of both catalogs, relative to the repository root.
    static func documentationFiles() throws -> [String] {
        try ["README.md"] + [catalog, clientCatalog].flatMap { catalog in
            let folder = TestDatabase.repositoryRoot.appendingPathComponent(catalog)
            return try FileManager.default.contentsOfDirectory(atPath: folder.path)
                .filter { $0.hasSuffix(".md") }.sorted().map { "\(catalog)/\($0)" }
        }
    }

    /// The text of a file of the repository (`"README.md"`, `"\(catalog)/Fetching.md"`).
    static func text(of file: String) throws -> String {
        try String(contentsOf: TestDatabase.repositoryRoot.appendingPathComponent(file), encoding: .utf8)
    }

    /// The ```swift blocks of `file`, or of its section headed `section` (a heading line
    /// such as `"## Importing"`, up to the next heading of the same or a higher level).
    /// Fences may be indented (blocks inside list items).
    static func swiftBlocks(in file: String, section: String? = nil) throws -> [String] {
        var lines = try text(of: file).components(separatedBy: "\n")
        if let section {
            guard let start = lines.firstIndex(of: section) else {
                throw TestFailure("\(file) has no section \(section)")
            }
            let level = section.prefix { $0 == "#" }.count
            var end = start + 1
            var inFence = false
            while end < lines.count {
                let line = lines[end]
                if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") { inFence.toggle() }
                let hashes = line.prefix { $0 == "#" }.count
                if !inFence, hashes > 0, hashes <= level, line.dropFirst(hashes).hasPrefix(" ") { break }
                end += 1
            }
            lines = Array(lines[(start + 1)..<end])
        }
        var blocks: [String] = []
        var current: [String]?
        var indent = 0
        for line in lines {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if var block = current {
                if trimmed == "```" {
                    blocks.append(block.joined(separator: "\n"))
                    current = nil
                } else {
                    block.append(String(line.dropFirst(min(indent, line.prefix { $0 == " " }.count))))
                    current = block
                }
            } else if trimmed == "```swift" {
                current = []
                indent = line.prefix { $0 == " " }.count
            }
        }
        return blocks
    }

    /// The non-empty lines of `text`, trimmed.
    static func significantLines(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Whether the lines of `block` appear, one after the other, in `source` (blank lines
    /// and indentation aside).
    static func source(_ source: String, contains block: String) -> Bool {
        contains(significantLines(source), significantLines(block))
    }

    static func contains(_ sourceLines: [String], _ lines: [String]) -> Bool {
        guard !lines.isEmpty else { return true }
        return sourceLines.indices.contains { index in
            index + lines.count <= sourceLines.count && Array(sourceLines[index..<(index + lines.count)]) == lines
        }
    }

    /// The blocks of `file` (or its `section`) that `testFile` (a `#filePath`) does not hold.
    static func blocksMissing(from testFile: String, in file: String, section: String? = nil) throws -> [String] {
        let source = try String(contentsOfFile: testFile, encoding: .utf8)
        return try swiftBlocks(in: file, section: section).filter { !Self.source(source, contains: $0) }
    }

    /// Every Swift file that compiles and runs documentation code: the test sources, the
    /// first program (`Sources/pgdatakit-example/main.swift`, which `ReadmeExampleTests`
    /// checks is the README's and runs), and the sources of the example servers under
    /// `Examples/*/Sources` (packages of their own, which `.ci/run` builds and runs
    /// through their smoke tests after `swift test`).
    static func testedSources() throws -> [(path: String, lines: [String])] {
        let root = TestDatabase.repositoryRoot
        var files = [root.appendingPathComponent("Sources/pgdatakit-example/main.swift")]
        var folders = [root.appendingPathComponent("Tests")]
        let examples = root.appendingPathComponent("Examples")
        for example in (try? FileManager.default.contentsOfDirectory(atPath: examples.path)) ?? [] {
            folders.append(examples.appendingPathComponent(example).appendingPathComponent("Sources"))
        }
        for folder in folders where FileManager.default.fileExists(atPath: folder.path) {
            guard let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else {
                throw TestFailure("cannot list \(folder.path)")
            }
            for case let url as URL in enumerator where url.pathExtension == "swift" { files.append(url) }
        }
        return try files.map { url in
            (url.path.replacingOccurrences(of: root.path + "/", with: ""),
             significantLines(try String(contentsOf: url, encoding: .utf8)))
        }
    }
}
