import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Two managers on one database, as two processes: `reader`, whose main context pins
/// its snapshot, and `writer`, which saves meanwhile.
private struct PinnedPair {
    let reader: ContextManager
    let writer: ContextManager

    /// Runs `body` with both managers over a fresh database holding the example schema
    /// and the seed (`seed(with:)`), saved before the reader starts: no merge of it can
    /// reach the reader during the test.
    static func with(_ body: (PinnedPair) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let writer = try ExampleSchema.makeManager(configuration)
            defer { writer.close() }
            try seed(with: writer)
            let reader = try ContextManager(configuration: configuration, entities: ExampleSchema.entities)
            defer { reader.close() }
            try body(PinnedPair(reader: reader, writer: writer))
        }
    }

    /// Saves in a new private context of `manager`.
    static func save(_ manager: ContextManager, _ body: (ManagedObjectContext) throws -> Void) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            try body(context)
            try context.save()
        }
    }

    /// Users u0, u1, u2 (ages 10, 11, 12, names "n0"…), a post "p0" by u1.
    private static func seed(with writer: ContextManager) throws {
        try save(writer) { context in
            var users: [User] = []
            for index in 0..<3 {
                let user = User(context: context)
                user.userID = "u\(index)"
                user.name = "n\(index)"
                user.age = 10 + index
                users.append(user)
            }
            let post = Post(context: context)
            post.postID = "p0"
            post.user = users[1]
        }
    }

    /// Waits until the reader's main context holds back, unmerged, the updates and
    /// deletions of these objects (the merges came and were deferred).
    func waitUntilDeferred(updated: [ObjectID] = [], deleted: [ObjectID] = []) throws {
        let main = reader.mainContext
        try ControllerTesting.wait("the merges reached the pinned context", on: main) {
            let deferred = main.deferredChanges ?? ContextChanges()
            return updated.allSatisfy(deferred.updated.contains) && deleted.allSatisfy(deferred.deleted.contains)
        }
    }
}

/// Counts calls from any thread.
private final class MergeCount: Sendable {
    private let value = Mutex(0)
    func add() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// Objects-did-change observations of a context.
private func countMerges(of context: ManagedObjectContext) -> (MergeCount, ObserverToken) {
    let counter = MergeCount()
    let token = context.observeObjectsDidChange { _ in counter.add() }
    return (counter, token)
}

/// The code of the PGDataKit error `body` throws (`nil` when it throws none, or another).
private func code<Code: ErrorCode>(of body: () throws -> Void) -> Code? {
    do {
        try body()
        return nil
    } catch {
        return (error as? any DescribedError)?.code as? Code
    }
}

@Suite("Pinned snapshots: consistent reads while others save, one merge at unpin")
struct PinnedSnapshotTests {
    @Test func aPinnedMainContextReadsThePinnedStateWhileOthersSaveAndCatchesUpWithOneMerge() throws {
        try PinnedPair.with { pair in
            let main = pair.reader.mainContext
            let (merges, token) = countMerges(of: main)
            defer { token.cancel() }
            // u0 registered and loaded; p0 registered, its user (u1) not loaded yet.
            let (u0, p0) = try main.performAndWait { () throws -> (User, Post) in
                let u0 = try #require(try User.first(in: main, where: "userID == 'u0'"))
                let p0 = try #require(try Post.first(in: main, where: "postID == 'p0'"))
                #expect(try main.pinSnapshot())
                return (u0, p0)
            }
            let (u0ID, u2ID) = try main.performAndWait {
                (u0.objectID, try #require(try User.first(in: main, where: "userID == 'u2'")).objectID)
            }
            #expect(merges.count == 0)

            // Another process updates u0 and u1, deletes u2, inserts u3 and a post of u0;
            // a private context of the reader's own manager updates u0 too.
            var ids: [ObjectID] = []
            try PinnedPair.save(pair.writer) { context in
                let users = Dictionary(uniqueKeysWithValues: try context.fetchAll(User.self).map { ($0.userID, $0) })
                try #require(users["u0"]).age = 20
                try #require(users["u1"]).name = "renamed"
                try #require(users["u2"]).delete()
                let u3 = User(context: context)
                u3.userID = "u3"
                let post = Post(context: context)
                post.postID = "p1"
                post.user = users["u0"]
                ids = [try #require(users["u1"]).objectID]
            }
            try PinnedPair.save(pair.reader) { context in
                try #require(try User.first(in: context, where: "userID == 'u0'")).name = "local"
            }
            // (The reader's own merge was queued on the main context before this wait.)
            try pair.waitUntilDeferred(updated: [u0ID] + ids, deleted: [u2ID])

            try main.performAndWait {
                // Registered objects keep the pinned snapshot's values; nothing merged.
                #expect(u0.age == 10 && u0.name == "n0")
                #expect(!u0.isDeleted)
                // Fetches, counts, batches, faults and relationships read the snapshot.
                #expect(try User.count(in: main) == 3)
                #expect(try main.fetch(FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")])).map(\.userID)
                    == ["u0", "u1", "u2"])
                #expect(p0.user?.name == "n1")  // loaded now, from the snapshot
                #expect(u0.posts.isEmpty)
                #expect(try User.first(in: main, where: "userID == 'u3'") == nil)
                // A batched fetch's cursor runs in the pinned transaction (it lets go of
                // the objects of each page: posts, which are not used again here).
                var batched: [String] = []
                try main.fetch(FetchRequest<Post>(sortDescriptors: [FetchSortDescriptor("postID")]), inBatches: { page in
                    batched += page.map(\.postID)
                })
                #expect(batched == ["p0"])
            }
            #expect(merges.count == 0)

            try main.performAndWait { () throws in #expect(try main.unpinSnapshot()) }
            #expect(merges.count == 1)
            try main.performAndWait { () throws in
                #expect(!main.isSnapshotPinned)
                #expect(u0.age == 20 && u0.name == "local")
                #expect(u0.posts.map(\.postID) == ["p1"])
                #expect(try User.count(in: main) == 3)
                #expect(try main.fetchAll(User.self).map(\.userID).sorted() == ["u0", "u1", "u3"])
                #expect(try User.first(in: main, where: "userID == 'u1'")?.name == "renamed")
            }
        }
    }

    @Test func aControllerStaysWhilePinnedAndHearsOneChangeSetAtTheUnpin() throws {
        try PinnedPair.with { pair in
            let main = pair.reader.mainContext
            let request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")])
            let controller = ManagedObjectController(fetchRequest: request, context: main)
            let recorder = ControllerRecorder<User>()
            recorder.attach(to: controller)
            try main.performAndWait { try controller.performFetch() }
            try main.performAndWait { try main.pinSnapshot() }

            var ids: [ObjectID] = []
            try PinnedPair.save(pair.writer) { context in
                let users = Dictionary(uniqueKeysWithValues: try context.fetchAll(User.self).map { ($0.userID, $0) })
                try #require(users["u0"]).delete()
                try #require(users["u2"]).name = "changed"
                ids = [try #require(users["u0"]).objectID, try #require(users["u2"]).objectID]
                User(context: context).userID = "u9"
            }
            try pair.waitUntilDeferred(updated: [ids[1]], deleted: [ids[0]])
            // A controller fetched while pinned shows the snapshot too.
            let late = ManagedObjectController(fetchRequest: request, context: main)
            try main.performAndWait {
                try late.performFetch()
                #expect(late.objects.map(\.userID) == ["u0", "u1", "u2"])
                #expect(controller.objects.map(\.userID) == ["u0", "u1", "u2"])
                #expect(recorder.changeSets.count == 1)  // its fetch only
            }

            try main.performAndWait { try main.unpinSnapshot() }
            try main.performAndWait {
                #expect(recorder.changeSets.count == 2)
                #expect(controller.objects.map(\.userID) == ["u1", "u2", "u9"])
                #expect(late.objects.map(\.userID) == ["u1", "u2", "u9"])
                let changes = try #require(recorder.changeSets.last)
                #expect(changes.deleted == [0])
                #expect(changes.inserted == [2])
            }
        }
    }

    @Test func aSaveEndsThePinAndMergesWhatCameAfterIt() throws {
        try PinnedPair.with { pair in
            let main = pair.reader.mainContext
            main.mergePolicy = .error
            let (merges, token) = countMerges(of: main)
            defer { token.cancel() }
            let (u0, u1) = try main.performAndWait { () throws -> (User, User) in
                let users = Dictionary(uniqueKeysWithValues: try main.fetchAll(User.self).map { ($0.userID, $0) })
                try main.pinSnapshot()
                return (try #require(users["u0"]), try #require(users["u1"]))
            }
            var u0ID: ObjectID?
            try PinnedPair.save(pair.writer) { context in
                let user = try #require(try User.first(in: context, where: "userID == 'u0'"))
                user.age = 30
                u0ID = user.objectID
            }
            try pair.waitUntilDeferred(updated: [try #require(u0ID)])

            // u0 changed since the snapshot: its version read there is a conflict.
            try main.performAndWait { () throws in
                u0.name = "mine"
                #expect(throws: MergeConflictError.self) { try main.save() }
                #expect(!main.isSnapshotPinned)  // ended whatever the outcome
                main.rollback()
                #expect(u0.age == 30)  // merged after the save
            }
            #expect(merges.count == 1)

            // A save of a row nobody changed succeeds and ends the pin too.
            try main.performAndWait {
                try main.pinSnapshot()
                u1.age = 41
                try main.save()
                #expect(!main.isSnapshotPinned)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE age = 41", in: pair.reader) == 1)
            #expect(merges.count == 1)  // nothing came while pinned this time
        }
    }

    @Test func aKilledSessionLosesThePinWithATypedErrorAndTheUnpinRecovers() throws {
        try PinnedPair.with { pair in
            let main = pair.reader.mainContext
            let snapshot = try main.performAndWait { () throws -> String in
                try main.pinSnapshot()
                return try #require(main.pinnedSnapshot)
            }
            // The server holds the pin's snapshot: one session idle in a transaction whose
            // xmin is the snapshot's, its last statement the pin's. (By the statement: a
            // listener's first prune, `WITH pruned AS (DELETE FROM pgdatakit_changes …`,
            // runs in a transaction of its own when it starts and shows idle in transaction
            // with an xmin between its statements — it made this count 2 once in CI.)
            let session = try pair.writer.coordinator.pool.withConnection { connection in
                try connection.query(
                    "SELECT pid, backend_xmin::text FROM pg_stat_activity WHERE datname = current_database() "
                        + "AND state = 'idle in transaction' AND backend_xmin IS NOT NULL "
                        + "AND query = 'SELECT pg_current_snapshot()::text'")
                    .map { (try $0.decode(Int32.self, at: 0), try $0.decode(String.self, at: 1)) }
            }
            // Every session of the database idle in a transaction, for the failure message.
            let idle = try pair.writer.coordinator.pool.withConnection { connection in
                try connection.query(
                    "SELECT application_name || ' ' || pid || ': ' || left(query, 60) FROM pg_stat_activity "
                        + "WHERE datname = current_database() AND state LIKE 'idle in transaction%'")
                    .map { try $0.decode(String.self, at: 0) }
            }
            #expect(session.count == 1, "\(idle)")
            let (pid, xmin) = try #require(session.first)
            #expect(snapshot.hasPrefix(xmin + ":"))
            #expect(pair.reader.coordinator.connectionsInUse == 1)

            try PinnedPair.save(pair.writer) { context in
                try #require(try User.first(in: context, where: "userID == 'u0'")).age = 99
            }
            let terminated = try pair.writer.coordinator.pool.withConnection {
                try $0.query("SELECT pg_terminate_backend($1, 5000)", [pid])[0].decode(Bool.self, at: 0)
            }
            #expect(terminated)

            try main.performAndWait {
                do {
                    _ = try User.count(in: main)
                    Issue.record("a read of a lost snapshot succeeded")
                } catch let error as SnapshotError {
                    #expect(error.code == .lost)
                    #expect(error.underlying?.isConnectionError == true)
                }
                // Later reads fail at once, without a new snapshot.
                #expect(code(of: { _ = try main.fetchAll(User.self) }) == SnapshotError.Code.lost)
                #expect(main.isSnapshotPinned)
                #expect(try main.unpinSnapshot())
                #expect(try User.first(in: main, where: "userID == 'u0'")?.age == 99)
            }
            #expect(pair.reader.coordinator.connectionsInUse == 0)
        }
    }

    @Test func pinningTwiceKeepsTheFirstSnapshotAndUnpinningTwiceDoesNothing() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            try main.performAndWait {
                #expect(!main.isSnapshotPinned && main.pinnedSnapshot == nil)
                #expect(try !main.unpinSnapshot())
                #expect(try main.pinSnapshot())
                let first = main.pinnedSnapshot
                #expect(try !main.pinSnapshot())
                #expect(main.pinnedSnapshot == first)
                // Scoped pins inside a pin leave it as it is.
                let count = try main.withPinnedSnapshot { try User.count(in: main) }
                #expect(count == 0 && main.isSnapshotPinned)
                #expect(try main.unpinSnapshot())
                #expect(try !main.unpinSnapshot())
                #expect(!main.isSnapshotPinned)
                // A scoped pin ends also when its body throws.
                #expect(throws: TestFailure.self) { try main.withPinnedSnapshot { throw TestFailure("inside") } }
                #expect(!main.isSnapshotPinned)
            }
            #expect(manager.coordinator.connectionsInUse == 0)

            let child = main.newChildContext()
            child.performAndWait {
                #expect(code(of: { try child.pinSnapshot() }) == ChildContextError.Code.unsupported)
            }
            let readCommitted = manager.newPrivateContext()
            readCommitted.isolationLevel = .readCommitted
            readCommitted.performAndWait {
                #expect(code(of: { try readCommitted.pinSnapshot() }) == SnapshotError.Code.readCommitted)
                #expect(!readCommitted.isSnapshotPinned)
            }
        }
    }

    /// A manager closed while its main context is pinned: the close does not wait on the
    /// pin, and the unpin afterwards ends it without a crash (a typed error at most);
    /// the pinned session is gone from the server.
    @Test func closingTheManagerWhilePinnedThenUnpinningDoesNotCrash() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            let context = manager.mainContext
            // (The pin's own statement is the session's last: a listener's first prune is
            // idle in a transaction too, for a moment.)
            _ = try context.performAndWait { try context.pinSnapshot() }
            let admin = try Connection(configuration)
            defer { admin.close() }
            let held = try admin.query(
                """
                SELECT pid FROM pg_stat_activity
                WHERE datname = current_database() AND backend_type = 'client backend' AND state = 'idle in transaction'
                  AND query = 'SELECT pg_current_snapshot()::text'
                """
            ).map { try $0.decode(Int32.self, at: 0) }
            #expect(held.count == 1, "\(held)")
            let pid = try #require(held.first)
            manager.close()
            let outcome = context.performAndWait { () -> String in
                do {
                    return try context.unpinSnapshot() ? "unpinned" : "was not pinned"
                } catch let error as any DescribedError {
                    return "typed \(error.code)"
                } catch {
                    return "untyped \(type(of: error))"
                }
            }
            #expect(!outcome.hasPrefix("untyped"), "\(outcome)")
            #expect(context.performAndWait { context.isSnapshotPinned } == false)
            let gone = try (0..<100).contains { _ in
                let left = try admin.query("SELECT count(*)::int FROM pg_stat_activity WHERE pid = $1", [Int(pid)])[0]
                    .decode(Int.self, at: 0)
                if left == 0 { return true }
                Thread.sleep(forTimeInterval: 0.05)
                return false
            }
            #expect(gone, "the pinned session is still on the server")
        }
    }

    @Test func aPinnedPrivateContextKeepsItsTransactionUntilTheUnpin() throws {
        try ExampleSchema.withManager { manager in
            try PinnedPair.save(manager) { ExampleSchema.insertUsers(2, in: $0) }
            let reader = manager.newPrivateContext()
            let (merges, token) = countMerges(of: reader)
            defer { token.cancel() }
            let u0 = try reader.performAndWait { () throws -> User in
                #expect(try reader.pinSnapshot())
                #expect(reader.hasOpenTransaction)
                return try #require(try User.first(in: reader, where: "userID == 'u0'"))
            }
            var changes = ContextChanges()
            try PinnedPair.save(manager) { context in
                let user = try #require(try User.first(in: context, where: "userID == 'u0'"))
                user.name = "new"
                changes.updated = [user.objectID]
                ExampleSchema.insertUsers(1, prefix: "v", in: context)
            }
            try reader.performAndWait {
                try reader.mergeChanges(changes)  // kept for the unpin
                #expect(u0.name == nil && merges.count == 0)
                #expect(try User.count(in: reader) == 2)
                #expect(try reader.unpinSnapshot())
                #expect(merges.count == 1)
                #expect(u0.name == "new")
                #expect(try User.count(in: reader) == 3)
                // A rollback ends a private context's pin with its transaction.
                try reader.pinSnapshot()
                reader.rollback()
                #expect(!reader.isSnapshotPinned && !reader.hasOpenTransaction)
            }
        }
    }
}
