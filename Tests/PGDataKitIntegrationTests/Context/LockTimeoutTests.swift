import Dispatch
import Foundation
import PGDataKit
import Testing

/// Waits for locks other programs hold are bounded by `ConnectionConfiguration.lockTimeout`.
@Suite("Lock timeouts")
struct LockTimeoutTests {
    /// A save of your own that waits past the timeout throws a transient `55P03`, writes
    /// nothing, keeps its changes, and saves once the lock is gone.
    @Test func aSaveThatWaitsTooLongThrowsAndCanBeSavedAgain() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { base in
            var configuration = base
            configuration.lockTimeout = .milliseconds(150)
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let holder = try Connection(base)
            defer { holder.close() }
            try holder.execute("INSERT INTO users (user_id, name) VALUES ('held', 'before')")
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for user in try User.fetch(in: context, where: "userID == %@", "held") { user.name = "after" }
            }
            try holder.execute("BEGIN")
            try holder.execute("SELECT 1 FROM users WHERE user_id = 'held' FOR UPDATE")
            let started = ContinuousClock.now
            context.performAndWait {
                let error = #expect(throws: PostgresError.self) { try context.save() }
                #expect(error?.sqlState == .lockNotAvailable)
                #expect(error?.isTransient == true)
                #expect(context.hasChanges)
            }
            // Waited about the timeout, not more than a few times it (no redo of its own).
            #expect(started.duration(to: .now) < .seconds(2))
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'after'", in: manager) == 0)
            try holder.execute("ROLLBACK")
            try context.performAndWait { try context.save() }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'after'", in: manager) == 1)
        }
    }

    /// An import operation retries a batch that timed out waiting (with a jittered
    /// pause), and finishes once the lock is gone.
    @Test func anImportRetriesABatchThatTimedOut() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { base in
            var configuration = base
            configuration.lockTimeout = .milliseconds(100)
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let holder = try Connection(base)
            defer { holder.close() }
            try holder.execute("INSERT INTO users (user_id, name) VALUES ('u1', 'before')")
            try holder.execute("BEGIN")
            try holder.execute("SELECT 1 FROM users WHERE user_id = 'u1' FOR UPDATE")
            let release = DispatchSemaphore(value: 0)
            // On a thread of its own: Dispatch's global queue gets a new thread only about
            // once a second while its threads are busy, which on a loaded machine can be
            // later than the import's retries last.
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: 0.4)
                _ = try? holder.execute("ROLLBACK")
                release.signal()
            }
            let records: [JSONValue] = (0..<3).map { ["UserID": .string("u\($0)"), "Name": "imported"] }
            let mapper = ObjectMapper<User>(uniqueKey: \.userID, remoteKey: "UserID") { record, user in
                user.name = record["Name"]?.stringValue
            }
            let operation = manager.importOperation(records, mapper: mapper, options: ImportOptions(maximumAttempts: 20))
            operation.start()
            release.wait()
            #expect(operation.error == nil, "\(String(describing: operation.error))")
            #expect((operation.summary?.retries ?? 0) >= 1)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'imported'", in: manager) == 3)
        }
    }
}
