import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Runs the built `pgdatakit` binary as a separate process.
enum CLI {
    typealias Outcome = ChildProcess.Outcome

    /// The `pgdatakit` executable next to the test bundle.
    static var executable: URL {
        get throws { try builtProduct("pgdatakit") }
    }

    /// A product built next to the test bundle.
    static func builtProduct(_ name: String) throws -> URL {
        var candidates: [URL] = []
        if let bundle = Bundle.main.executableURL?.deletingLastPathComponent() {
            candidates.append(bundle.appendingPathComponent(name))
        }
        candidates.append(
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent(name))
        candidates.append(TestDatabase.repositoryRoot.appendingPathComponent(".build/debug/\(name)"))
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw TestFailure("\(name) binary not found in \(candidates.map(\.path))")
        }
        return found
    }

    /// Runs the test helper program to completion.
    static func runHelper(_ arguments: [String]) throws -> Outcome {
        try ChildProcess.start(
            try builtProduct("pgdatakit-test-helper").path, arguments, in: TestDatabase.repositoryRoot,
            environment: ProcessInfo.processInfo.environment
        ).wait()
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
