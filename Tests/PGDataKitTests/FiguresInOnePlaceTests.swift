import Foundation
import Testing

/// The latency and throughput figures live in the Benchmarks article; README.md, the
/// Several processes article and the Deployment article quote them word for word. Each
/// range those three quote, with what it measures, must appear in the Benchmarks article,
/// so a range changed in one file only fails here.
@Suite("Docs: benchmark figures live in one place")
struct FiguresInOnePlaceTests {
    /// The article the figures live in, relative to the repository root.
    static let benchmarks = "Sources/PGDataKit/PGDataKit.docc/Benchmarks.md"
    /// The files that quote the Benchmarks article's figures.
    static let quotingFiles = [
        "README.md",
        "Sources/PGDataKit/PGDataKit.docc/SeveralProcesses.md",
        "Sources/PGDataKit/PGDataKit.docc/Deployment.md",
    ]

    /// The package's root folder: this file is `Tests/PGDataKitTests/<name>.swift`. (The
    /// integration tests' `TestDatabase.repositoryRoot` is in a target this one cannot
    /// import.)
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The text of a file of the repository, every run of white space (line breaks
    /// included) made one space, so a figure reads the same however a file wraps it.
    static func text(of file: String) throws -> String {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
        return text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// Every latency or throughput figure in `text`: a range with what it measures —
    /// `p50 0.60–0.65 ms`, `p99 …–… ms`, `3,304–3,744 saves/s`, or a ratio up to the
    /// floor it is a ratio of (`0.73–0.96 of PostgreSQL's raw`, `… of the floor`).
    static func figures(in text: String) -> [String] {
        let latency = /p(?:50|99) \d[\d.,]*(?:–|-)\d[\d.,]* ms/
        let rate = /\d[\d.,]*(?:–|-)\d[\d.,]* (?:saves\/s|of [^.;|()]*?(?:raw|floor))/
        return (text.matches(of: latency) + text.matches(of: rate)).map { String($0.output) }
    }

    /// The figures `quoting` gives that `source` does not.
    static func figuresMissing(from source: String, quotedIn quoting: String) -> [String] {
        figures(in: quoting).filter { !source.contains($0) }
    }

    /// Each file quotes at least one figure, and every figure it quotes is the Benchmarks
    /// article's.
    @Test(arguments: FiguresInOnePlaceTests.quotingFiles)
    func quotedFiguresAreTheBenchmarksArticles(file: String) throws {
        let quoting = try Self.text(of: file)
        let benchmarks = try Self.text(of: Self.benchmarks)
        #expect(!Self.figures(in: quoting).isEmpty, "\(file) quotes no figure: has the pattern stopped matching?")
        let missing = Self.figuresMissing(from: benchmarks, quotedIn: quoting)
        #expect(missing.isEmpty, "\(file) gives figures the Benchmarks article does not: \(missing)")
    }

    /// A range changed in one file only, the quoting file or the Benchmarks article, is
    /// caught.
    @Test func aRangeChangedInOneFileOnlyIsCaught() throws {
        let benchmarks = try Self.text(of: Self.benchmarks)
        let readme = try Self.text(of: "README.md")
        let quoted = try #require(Self.figures(in: readme).first { $0.hasSuffix("saves/s") })
        let changed = quoted.replacingOccurrences(of: "–", with: "–1")    // 3,304–13,744 saves/s
        let editedReadme = readme.replacingOccurrences(of: quoted, with: changed)
        #expect(Self.figuresMissing(from: benchmarks, quotedIn: editedReadme).contains(changed))
        let editedBenchmarks = benchmarks.replacingOccurrences(of: quoted, with: changed)
        #expect(Self.figuresMissing(from: editedBenchmarks, quotedIn: readme).contains(quoted))
    }
}
