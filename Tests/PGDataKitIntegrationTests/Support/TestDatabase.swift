import Foundation
import PGDataKit
import Testing

/// Gives each test a database of its own on the test server (`DATABASE_URL`, or a
/// throwaway server shared by the test process), and drops it afterwards even when the
/// test fails.
enum TestDatabase {
    /// The server every test database lives on.
    static func serverConfiguration() throws -> ConnectionConfiguration {
        ConnectionConfiguration(try EmbeddedPostgres.environmentOrSharedURL())
    }

    /// Runs `body` with the configuration of a new, empty database.
    @discardableResult
    static func withFreshDatabase<T>(
        migrations: Bool = false, _ body: (ConnectionConfiguration) throws -> T
    ) throws -> T {
        let (configuration, cleanup) = try makeFreshDatabase(migrations: migrations)
        defer { cleanup() }
        return try body(configuration)
    }

    /// Creates a new database and returns its configuration and the closure that drops
    /// it (for async tests, which cannot use the closure form).
    static func makeFreshDatabase(migrations: Bool = false) throws -> (ConnectionConfiguration, @Sendable () -> Void) {
        let server = try serverConfiguration()
        let name = "pgdatakit_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try Connection(server)
        try admin.execute("CREATE DATABASE " + Connection.quoteIdentifier(name))
        let cleanup: @Sendable () -> Void = {
            do {
                try admin.execute("DROP DATABASE IF EXISTS " + Connection.quoteIdentifier(name) + " WITH (FORCE)")
            } catch {
                Issue.record("could not drop test database \(name): \(error)")
            }
            admin.close()
        }
        let configuration = server.database(name)
        do {
            // `migrate` installs the library's schema (the change log) first; without
            // migrations, install just that: coordinators only check for it.
            let connection = try Connection(configuration)
            defer { connection.close() }
            if migrations {
                try Migrator(directory: repositoryRoot.appendingPathComponent("migrations")).migrate(on: connection)
            } else {
                try Migrator.installLibrarySchema(on: connection)
            }
        } catch {
            cleanup()
            throw error
        }
        return (configuration, cleanup)
    }

    /// Runs `body` with an open connection to a new, empty database.
    @discardableResult
    static func withConnection<T>(migrations: Bool = false, _ body: (Connection) throws -> T) throws -> T {
        try withFreshDatabase(migrations: migrations) { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            return try body(connection)
        }
    }

    /// The package's root folder (where `migrations/` and `Package.swift` are).
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }

    /// A folder of its own for a test, removed afterwards.
    static func withTemporaryDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("pgdatakit-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }
}

/// Runs `body` on `count` threads at once and rethrows the first error.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let group = DispatchGroup()
    let errors = ErrorBox()
    for index in 0..<count {
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            do { try body(index) } catch { errors.append(error) }
        }
    }
    group.wait()
    if let first = errors.first { throw first }
}

/// Collects errors from several threads.
final class ErrorBox: @unchecked Sendable {
    // Safe: `errors` is only touched under `lock`.
    private let lock = NSLock()
    private var errors: [any Error] = []

    func append(_ error: any Error) {
        lock.lock()
        errors.append(error)
        lock.unlock()
    }

    var first: (any Error)? {
        lock.lock()
        defer { lock.unlock() }
        return errors.first
    }
}
