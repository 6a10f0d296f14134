import Dispatch
import Foundation
import Logging
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Saves of contended entities start in the redo's mode instead of failing into it: once
/// a save of an entity had to be redone (another transaction changed its rows since the
/// context's snapshot), the coordinator's next saves of that entity lock their rows in
/// order in a read-committed transaction from the start, settle conflicts there and
/// commit — no transaction thrown away (`StoreCoordinator.contentionWindow`).
///
/// What each save did is read from the coordinator's debug log: "save redone …" for a
/// redo, "save started in a read-committed transaction …" for a save that started in the
/// redo's mode.
@Suite("Saves of contended entities start in the redo's mode")
struct ContendedSaveTests {
    static let redone = "save redone in a read-committed transaction"
    static let startedLocked = "save started in a read-committed transaction that locks its rows"

    /// A manager whose coordinator logs through `handler`, on a fresh example database,
    /// with users "a" and "b"; and a plain connection to the database.
    func withManager(
        window: Duration = .seconds(60), _ body: (ContextManager, RecordingLogHandler, Connection) throws -> Void
    ) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let handler = RecordingLogHandler()
            let manager = try ContextManager(
                configuration: configuration, entities: [User.self, Post.self], logger: Logger(label: "test") { _ in handler })
            defer { manager.close() }
            // (A generous window: a slow machine must not let it pass between two saves.)
            manager.coordinator.contentionWindow = window
            let other = try Connection(configuration)
            defer { other.close() }
            try other.execute("INSERT INTO users (user_id, name) VALUES ('a', 'stored'), ('b', 'stored')")
            try body(manager, handler, other)
        }
    }

    /// A private context that read users "a" and "b" (its snapshot taken) and renamed
    /// them, unsaved.
    func renaming(_ name: String, in manager: ContextManager, policy: MergePolicy) throws -> ManagedObjectContext {
        let context = manager.newPrivateContext()
        context.mergePolicy = policy
        try context.performAndWait {
            for user in try User.fetch(in: context, where: "userID IN %@", ["a", "b"]) { user.name = name }
        }
        return context
    }

    /// Another transaction changes a user after the context's snapshot.
    func changeElsewhere(_ key: String, on other: Connection) throws {
        try other.execute("UPDATE users SET age = coalesce(age, 0) + 1, version = version + 1 WHERE user_id = $1", [key])
    }

    func count(_ message: String, in handler: RecordingLogHandler) -> Int {
        handler.messages.filter { $0.hasPrefix(message) }.count
    }

    @Test func afterARedoTheNextSaveOfTheEntityStartsInTheRedosModeAndSettlesItsConflictThere() throws {
        try withManager { manager, handler, other in
            // The first save meets a row changed since its snapshot: it fails into the redo.
            let first = try renaming("first", in: manager, policy: .mergeByPropertyObjectTrump)
            try changeElsewhere("a", on: other)
            try first.performAndWait { try first.save() }
            #expect(count(Self.redone, in: handler) == 1)
            #expect(count(Self.startedLocked, in: handler) == 0)
            #expect(manager.coordinator.saveContention.isContended(["User"]))

            // The second meets the same: it starts in the redo's mode, and settles the
            // conflict by its policy there.
            let second = try renaming("second", in: manager, policy: .mergeByPropertyObjectTrump)
            try changeElsewhere("b", on: other)
            let settled = try second.performAndWait {
                try second.save()
                return second.resolvedConflicts.count
            }
            #expect(settled == 1, "b's conflict, settled by the policy")
            #expect(count(Self.redone, in: handler) == 1, "no second redo")
            #expect(count(Self.startedLocked, in: handler) == 1)
            let stored = try other.query("SELECT user_id, name, age FROM users ORDER BY user_id").map {
                "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1)) \(try $0.decode(Int?.self, at: 2) ?? 0)"
            }
            #expect(stored == ["a second 1", "b second 1"], "the other transaction's ages kept, the names the save's")
        }
    }

    /// Under `.error` a save started in the redo's mode throws the conflict it read, with
    /// the store's values, writing nothing: no redo to find it out.
    @Test func aConflictUnderErrorIsThrownFromTheFirstAttempt() throws {
        try withManager { manager, handler, other in
            manager.coordinator.saveContention.noteContention(on: ["User"])
            let context = try renaming("mine", in: manager, policy: .error)
            try changeElsewhere("a", on: other)
            let conflict = context.performAndWait { () -> MergeConflictError? in
                do {
                    try context.save()
                    return nil
                } catch {
                    return error as? MergeConflictError
                }
            }
            let reported = try #require(conflict?.conflicts.first)
            #expect(conflict?.conflicts.count == 1)
            #expect(reported.storeVersion == 2 && reported.snapshotVersion == 1)
            #expect(reported.storeValues?["age"] as? Int == 1)
            #expect(count(Self.startedLocked, in: handler) == 1)
            #expect(count(Self.redone, in: handler) == 0)
            #expect(try other.query("SELECT count(*) FROM users WHERE name = 'mine'")[0].decode(Int.self, at: 0) == 0)
        }
    }

    /// The demo's common case: an import whose new key another process committed since
    /// the import looked, and still holds. Its own repeatable-read transaction would fail
    /// on that key (a serialization failure) and be redone; started in the redo's mode, it
    /// looks the key's row up, waits for it in order, and merges into it.
    @Test func anImportMeetingAKeyCommittedAndHeldElsewhereWaitsInsteadOfFailing() throws {
        try withManager { manager, handler, other in
            manager.coordinator.saveContention.noteContention(on: ["User"])
            let importer = manager.newPrivateContext()
            importer.mergePolicy = .mergeByPropertyObjectTrump
            try importer.performAndWait {
                let records: [JSONValue] = ["a", "n"].map { .object(["UserID": .string($0), "Name": "imported"]) }
                _ = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: importer) {
                    record, user in user.name = record["Name"]?.stringValue
                }
            }
            // "n" committed after the import looked, then held by another transaction.
            try other.execute("INSERT INTO users (user_id, name) VALUES ('n', 'elsewhere')")
            try other.execute("BEGIN")
            try other.execute("SELECT 1 FROM users WHERE user_id = 'n' FOR NO KEY UPDATE")
            let failure = Mutex<String?>(nil)
            let saving = DispatchGroup()
            saving.enter()
            Thread.detachNewThread {
                defer { saving.leave() }
                do { try importer.performAndWait { try importer.save() } } catch {
                    failure.withLock { $0 = "\(error)" }
                }
            }
            // (Watched from a session of its own: one in a transaction keeps seeing the
            // activity it first read.)
            let watcher = try Connection(manager.coordinator.pool.configuration)
            defer { watcher.close() }
            let deadline = ContinuousClock.now + patience
            var waited = false
            while !waited, ContinuousClock.now < deadline {
                waited = try watcher.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )[0].decode(Int.self, at: 0) > 0
                if !waited { Thread.sleep(forTimeInterval: 0.005) }
            }
            #expect(waited, "the import waits for the held row")
            try other.execute("COMMIT")
            saving.wait()
            #expect(failure.withLock { $0 } == nil)
            #expect(count(Self.startedLocked, in: handler) == 1)
            #expect(count(Self.redone, in: handler) == 0, "no transaction thrown away")
            let names = try other.query("SELECT user_id, name FROM users ORDER BY user_id").map {
                "\(try $0.decode(String.self, at: 0))=\(try $0.decode(String.self, at: 1))"
            }
            #expect(names == ["a=imported", "b=stored", "n=imported"])
        }
    }

    /// With `contentionWindow = .zero` every save tries its own transaction first, as
    /// before: two saves meeting changed rows are two redos.
    @Test func aWindowOfZeroKeepsEverySaveOptimistic() throws {
        try withManager(window: .zero) { manager, handler, other in
            for name in ["first", "second"] {
                let context = try renaming(name, in: manager, policy: .mergeByPropertyObjectTrump)
                try changeElsewhere("a", on: other)
                try context.performAndWait { try context.save() }
            }
            #expect(count(Self.redone, in: handler) == 2)
            #expect(count(Self.startedLocked, in: handler) == 0)
            #expect(manager.coordinator.contentionWindow == .zero)
        }
    }
}
