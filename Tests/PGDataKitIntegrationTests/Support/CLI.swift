import Foundation
import Testing

@testable import PGDataKit

/// Runs the built `pgdatakit` binary as a separate process.
enum CLI {
    typealias Outcome = ChildProcess.Outcome

    /// The `pgdatakit` executable next to the test bundle.
    static var executable: URL {
        get throws {
            var candidates: [URL] = []
            if let bundle = Bundle.main.executableURL?.deletingLastPathComponent() {
                candidates.append(bundle.appendingPathComponent("pgdatakit"))
            }
            candidates.append(
                URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                    .appendingPathComponent("pgdatakit"))
            candidates.append(TestDatabase.repositoryRoot.appendingPathComponent(".build/debug/pgdatakit"))
            guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
                throw TestFailure("pgdatakit binary not found in \(candidates.map(\.path))")
            }
            return found
        }
    }

    /// Starts the binary in the repository root without `DATABASE_URL` unless given.
    static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess.Running {
        var merged = ProcessInfo.processInfo.environment
        merged.removeValue(forKey: "DATABASE_URL")
        for (key, value) in environment { merged[key] = value }
        return try ChildProcess.start(
            try executable.path, arguments, in: TestDatabase.repositoryRoot, environment: merged)
    }

    /// Runs the binary to completion.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Outcome {
        try start(arguments, environment: environment).wait()
    }
}
