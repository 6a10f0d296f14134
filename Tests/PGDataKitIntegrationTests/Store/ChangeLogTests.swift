import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The change log, the listener and merging within one test process; two coordinators on
/// one database stand for two programs where a real second process is not the point.
@Suite("Change log, listener and remote merges")
struct ChangeLogTests {
    /// Two managers over one fresh database: `writer` and `reader`.
    func withTwoManagers(
        readerPolicy: MergePolicy = .error, _ body: (_ writer: ContextManager, _ reader: ContextManager) throws -> Void
    ) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let writer = try ExampleSchema.makeManager(configuration)
            defer { writer.close() }
            let reader = try ContextManager(configuration: configuration, entities: ExampleSchema.entities)
            defer { reader.close() }
            reader.mainContext.performAndWait { reader.mainContext.mergePolicy = readerPolicy }
            try body(writer, reader)
        }
    }

    /// Waits until `condition` holds, polling.
    func eventually(_ what: String, timeout: Duration = patience, _ condition: () throws -> Bool) throws {
        let start = ContinuousClock.now
        while try !condition() {
            if start.duration(to: .now) > timeout { throw TestFailure("timed out waiting until \(what)") }
            usleep(2_000)
        }
    }

    /// The stream's next element (`nil` when it ended), failing after `timeout` rather
    /// than hanging.
    func firstElement<T: Sendable>(of stream: AsyncStream<T>, timeout: Duration = patience) async throws -> T? {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { await stream.first { _ in true } }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TestFailure("no element within \(timeout)")
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    func insertUser(_ userID: String, name: String? = nil, in manager: ContextManager) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            let user = User(context: context)
            user.userID = userID
            user.name = name
            try context.save()
        }
    }

    @Test func ownSavesAreMergedOnceAndOtherCoordinatorsGetThemThroughTheListener() throws {
        try withTwoManagers { writer, reader in
            let merged = ChangeCollector()
            let mergeToken = writer.mainContext.observeObjectsDidChange { merged.append($0) }
            defer { mergeToken.cancel() }
            let ownRecords = ChangeCollector()
            let ownToken = writer.coordinator.observeRemoteChanges { ownRecords.append($0.changes) }
            defer { ownToken.cancel() }
            let received = ChangeCollector()
            let readerToken = reader.coordinator.observeRemoteChanges { received.append($0.changes) }
            defer { readerToken.cancel() }

            try insertUser("once", in: writer)
            try eventually("the other coordinator has the record") { received.all.count == 1 }
            // A sentinel saved by the reader after it: the writer's listener delivers in
            // commit order, so once the sentinel is there, its own record would be too.
            try insertUser("sentinel", in: reader)
            try eventually("the writer has the sentinel") { ownRecords.all.count >= 1 }
            try eventually("the writer merged its save and the sentinel") { merged.all.count >= 2 }
            writer.mainContext.performAndWait {}  // any merge queued before this has run
            #expect(merged.all.count == 2)
            #expect(ownRecords.all.count == 1)
            #expect(received.all.first?.inserted.map(\.entityName) == ["User"])
        }
    }

    /// A process's listener puts off reading after notifications of its own records (the
    /// read skips them anyway) and reads at once for anyone else's.
    @Test func notificationsOfOwnRecordsAreKnownByTheirIDs() throws {
        try withTwoManagers { writer, reader in
            let received = ChangeCollector()
            let token = writer.coordinator.observeRemoteChanges { received.append($0.changes) }
            defer { token.cancel() }
            let before = try ExampleSchema.count("SELECT coalesce(max(id), 0)::bigint FROM pgdatakit_changes", in: writer)
            try insertUser("own", in: writer)
            let own = try ExampleSchema.count("SELECT max(id)::bigint FROM pgdatakit_changes", in: writer)
            #expect(own > before)
            let listener = writer.coordinator.listener
            // The save noted its record (unless the listener saw the notification first and
            // forgot it already); an id is own once, and other ids never are. (Only a
            // notification that carries just an id — a record too large for a payload —
            // is looked up by id; a payload names its origin.)
            listener.ownRecords.note(Int64(own))
            #expect(listener.ownRecords.take(Int64(own)))
            #expect(!listener.ownRecords.take(Int64(own)))
            #expect(!listener.ownRecords.take(Int64(own + 1_000)))
            // Another process's record right after the own one still arrives.
            try insertUser("other", in: reader)
            try eventually("the writer has the reader's record") { received.all.count == 1 }
            #expect(received.all.first?.inserted.count == 1)
        }
    }

    @Test(arguments: [MergePolicy.error, .mergeByPropertyStoreTrump, .rollback])
    func unsavedLocalEditsFollowTheMergePolicy(_ policy: MergePolicy) throws {
        try withTwoManagers(readerPolicy: policy) { writer, reader in
            try insertUser("p1", name: "original", in: writer)
            let main = reader.mainContext
            let user = try main.performAndWait { () throws -> User in
                let user = try #require(try User.first(in: main, where: "userID == 'p1'"))
                user.name = "local"
                return user
            }
            let changed = ChangeCollector()
            let token = main.observeObjectsDidChange { changed.append($0) }
            defer { token.cancel() }
            let context = writer.newPrivateContext()
            try context.performAndWait {
                let remote = try #require(try User.first(in: context, where: "userID == 'p1'"))
                remote.name = "remote"
                remote.age = 7
                try context.save()
            }
            // (The insert of p1 may be merged after the observer was added: skip it.)
            try eventually("the reader's main context merged") { changed.all.contains { !$0.updated.isEmpty } }
            let notification = try #require(changed.all.first { !$0.updated.isEmpty })
            #expect(notification.updated == [user.objectID])
            #expect(notification.changedKeys[user.objectID] == ["name", "age"])
            main.performAndWait {
                #expect(user.age == 7)
                switch policy {
                case .error:
                    #expect(user.name == "local")
                    #expect(user.hasChanges)
                default:
                    #expect(user.name == "remote")
                    #expect(!user.hasChanges)
                }
            }
        }
    }

    @Test func privateContextsKeepTheirSnapshotUntilTheirTransactionEnds() throws {
        try withTwoManagers { writer, reader in
            try insertUser("s1", name: "before", in: writer)
            let readerContext = reader.newPrivateContext()
            let name = { () throws -> String? in
                try readerContext.performAndWait { try User.first(in: readerContext, where: "userID == 's1'")?.name }
            }
            #expect(try name() == "before")
            let changed = ChangeCollector()
            let token = reader.mainContext.observeObjectsDidChange { changed.append($0) }
            defer { token.cancel() }
            let context = writer.newPrivateContext()
            try context.performAndWait {
                try #require(try User.first(in: context, where: "userID == 's1'")).name = "after"
                try context.save()
            }
            try eventually("the main context merged") { changed.all.contains { !$0.updated.isEmpty } }
            #expect(try name() == "before")  // same transaction, same snapshot
            readerContext.performAndWait { readerContext.reset() }
            #expect(try name() == "after")
        }
    }

    /// A stream asked for after the coordinator closed ends at once (it used to be kept
    /// open for good: close() had already ended the streams it knew).
    @Test(.onItsOwnThread) func aStreamOfAClosedCoordinatorEnds() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let coordinator = try StoreCoordinator(model: try Model(entities: [User.self, Post.self]), configuration: configuration)
        coordinator.close()
        let stream = coordinator.remoteChanges()
        let ended = Task(executorPreference: OwnThreadExecutor.current) {
            var count = 0
            for await _ in stream { count += 1 }
            return count
        }
        // Cancelling the reading task would end the stream too: the watchdog notes that it
        // had to (a bound in seconds instead failed on a loaded machine).
        let watchdogFired = Mutex(false)
        let watchdog = Task(executorPreference: OwnThreadExecutor.current) {
            try await Task.sleep(for: patience)
            watchdogFired.withLock { $0 = true }
            ended.cancel()
        }
        defer { watchdog.cancel() }
        #expect(await ended.value == 0)
        #expect(!watchdogFired.withLock { $0 }, "the stream ended only when its task was cancelled")
    }

    @Test(.onItsOwnThread) func remoteChangesStreamAndTurningAutomaticMergingOff() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let writer = try ExampleSchema.makeManager(configuration)
        defer { writer.close() }
        let reader = try ContextManager(
            configuration: configuration, entities: ExampleSchema.entities, automaticallyMergesRemoteChanges: false)
        defer { reader.close() }
        #expect(!reader.automaticallyMergesRemoteChanges)
        let merged = ChangeCollector()
        let token = reader.mainContext.observeObjectsDidChange { merged.append($0) }
        defer { token.cancel() }
        let stream = reader.coordinator.remoteChanges()
        try insertUser("stream", in: writer)
        let record = try #require(try await firstElement(of: stream))
        #expect(record.origin == writer.coordinator.origin)
        #expect(record.originProcessID == getpid())
        #expect(record.changes.inserted.count == 1)
        // The listener calls observers in registration order and the stream registered
        // last, so a merge of this record would have been queued on the main context by
        // now: let the queue run, then look.
        try await reader.mainContext.perform {}
        #expect(merged.all.isEmpty)
        reader.coordinator.close()
        #expect(try await firstElement(of: stream) == nil)  // closing ends the stream
    }

    @Test func recordsOlderThanTheRetentionArePrunedByOneProcessAtATime() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let writer = try ExampleSchema.makeManager(configuration)
            defer { writer.close() }
            try insertUser("old", in: writer)
            let admin = try Connection(configuration)
            defer { admin.close() }
            func records() throws -> Int { try admin.query("SELECT count(*) FROM pgdatakit_changes")[0].decode(Int.self, at: 0) }
            #expect(try records() == 1)
            // Another process is pruning: this one must not.
            try admin.execute("SELECT pg_advisory_lock($1)", [ChangeLog.pruneLockKey])
            let pruner = try StoreCoordinator(
                model: writer.coordinator.model, configuration: configuration,
                changeLog: ChangeLogOptions(retention: .zero, pruneInterval: .milliseconds(50)))
            defer { pruner.close() }
            let token = pruner.observeRemoteChanges { _ in }
            defer { token.cancel() }
            try eventually("the pruner tried twice") { pruner.listener.pruneAttempts >= 2 }
            #expect(try records() == 1)
            try admin.execute("SELECT pg_advisory_unlock($1)", [ChangeLog.pruneLockKey])
            try eventually("the record is pruned") { try records() == 0 }
        }
    }

    @Test func recordsAreReadByTransactionVisibilityNotByID() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ExampleSchema.makeManager(configuration)
            defer { manager.close() }
            let reader = try Connection(configuration)
            let first = try Connection(configuration)
            let second = try Connection(configuration)
            defer { [reader, first, second].forEach { $0.close() } }
            var position = try ChangeLog.currentPosition(on: reader)
            var changes = ContextChanges()
            changes.deleted = [ObjectID(entityName: "User", primaryKey: 1)]
            let write = { (connection: Connection) throws -> Int64 in
                try connection.begin()
                return try ChangeLog.write(changes, origin: UUID(), on: connection)
            }
            let earlier = try write(first)
            let later = try write(second)
            try second.commit()
            var read = try ChangeLog.read(after: position, skippingOrigin: manager.coordinator.origin, on: reader)
            #expect(read.records.map(\.id) == [later])
            position = read.position
            try first.commit()
            read = try ChangeLog.read(after: position, skippingOrigin: manager.coordinator.origin, on: reader)
            #expect(read.records.map(\.id) == [earlier])
            #expect(read.records.first?.changes == changes)
            read = try ChangeLog.read(after: read.position, skippingOrigin: manager.coordinator.origin, on: reader)
            #expect(read.records.isEmpty)
            // A rolled-back record never appears, and does not hold later ones back.
            _ = try write(first)
            try first.rollback()
            let afterRollback = try write(second)
            try second.commit()
            read = try ChangeLog.read(after: read.position, skippingOrigin: manager.coordinator.origin, on: reader)
            #expect(read.records.map(\.id) == [afterRollback])
        }
    }

    @Test func theRelayHostLeavesItsOwnLargeRecordsUndecoded() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let reader = try Connection(configuration)
            let writer = try Connection(configuration)
            defer { [reader, writer].forEach { $0.close() } }
            let position = try ChangeLog.currentPosition(on: reader)
            let own = UUID()
            var small = ContextChanges()
            small.deleted = [ObjectID(entityName: "User", primaryKey: 1)]
            var large = ContextChanges()
            large.deleted = Set((1...2_000).map { ObjectID(entityName: "User", primaryKey: Int64($0)) })
            func write(_ changes: ContextChanges, origin: UUID) throws -> Int64 {
                try writer.begin()
                let id = try ChangeLog.write(changes, origin: origin, on: writer)
                try writer.commit()
                return id
            }
            let ownSmall = try write(small, origin: own)
            let ownLarge = try write(large, origin: own)
            let otherLarge = try write(large, origin: UUID())
            #expect(try ChangeLog.encode(large).utf8.count > ChangeLog.payloadChangesLimit)
            // The host's read: its own large record by id, the rest decoded.
            let hosts = try ChangeLog.readEntries(after: position, skippingOrigin: nil, leavingLargeRecordsOf: own, on: reader)
            #expect(hosts.entries.map(\.id) == [ownSmall, ownLarge, otherLarge])
            #expect(hosts.entries[1] == .largeOwnRecord(id: ownLarge))
            #expect(hosts.entries[0].record?.changes == small && hosts.entries[2].record?.changes == large)
            // What it passes on for the large one is what its writer's notification said: the id.
            #expect(try ChangeLog.payload(of: #require(hosts.entries[2].record)) == String(otherLarge))
            // Any other read decodes every record.
            let plain = try ChangeLog.read(after: position, skippingOrigin: nil, on: reader)
            #expect(plain.records.map(\.id) == [ownSmall, ownLarge, otherLarge])
            #expect(plain.records[1].changes == large)
        }
    }

    @Test func droppingTheManagerStopsItsListener() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let admin = try Connection(configuration)
            defer { admin.close() }
            func listeners() throws -> Int {
                try admin.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
                    [ChangeListener.applicationName])[0].decode(Int.self, at: 0)
            }
            weak var coordinator: StoreCoordinator?
            do {
                let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
                coordinator = manager.coordinator
                #expect(manager.automaticallyMergesRemoteChanges)
                #expect(try listeners() == 1)
            }
            try eventually("the coordinator is released") { coordinator == nil }
            try eventually("the listener's session is gone") { try listeners() == 0 }
        }
    }

    @Test func largeRecordsAreNotCompressedWithPglzAndTheSchemaRunsAgainUnchanged() throws {
        try withTwoManagers { writer, reader in
            let changed = ChangeCollector()
            let token = reader.mainContext.observeObjectsDidChange { changed.append($0) }
            defer { token.cancel() }
            try writer.coordinator.pool.withConnection { connection in
                func storage() throws -> String {
                    try connection.query(
                        """
                        SELECT attstorage::text || ',' || coalesce(nullif(attcompression::text, ''), '-')
                        FROM pg_attribute WHERE attrelid = 'pgdatakit_changes'::regclass AND attname = 'changes'
                        """)[0].decode(String.self, at: 0)
                }
                let before = try storage()
                #expect(before.hasSuffix(",l") || before.hasPrefix("e,"), "\(before)")
                try Migrator.installLibrarySchema(on: connection)
                try connection.executeScript(Migrator.librarySchemaSQL)
                #expect(try storage() == before)
            }
            let context = writer.newPrivateContext()
            try context.performAndWait {
                _ = ExampleSchema.insertUsers(3_000, prefix: "large-", in: context)
                try context.save()
            }
            try writer.coordinator.pool.withConnection { connection in
                let method = try connection.query(
                    "SELECT pg_column_compression(changes) FROM pgdatakit_changes ORDER BY id DESC LIMIT 1")[0]
                    .decode(String?.self, at: 0)
                #expect(method != "pglz")
            }
            try eventually("the large record was read and merged") { changed.all.contains { $0.inserted.count == 3_000 } }
        }
    }

    @Test func withoutLz4TheRecordColumnIsStoredUncompressed() throws {
        // A server that refuses the compression method (as PostgreSQL 13, or one built
        // without lz4, refuses lz4) gets the fallback.
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.execute("DROP TABLE IF EXISTS pgdatakit_changes")  // (as installed with lz4)
            let refused = Migrator.librarySchemaSQL.replacingOccurrences(of: "lz4", with: "no_such_method")
            try connection.executeScript(refused)
            try connection.executeScript(refused)
            let storage = try connection.query(
                "SELECT attstorage::text FROM pg_attribute WHERE attrelid = 'pgdatakit_changes'::regclass AND attname = 'changes'")
            #expect(try storage[0].decode(String.self, at: 0) == "e")
        }
    }

    @Test func aRemoteBatchIsMergedWithOneQueryPerEntity() throws {
        try withTwoManagers { writer, reader in
            let main = reader.mainContext
            let changed = ChangeCollector()
            let token = main.observeObjectsDidChange { changed.append($0) }
            defer { token.cancel() }
            let seed = writer.newPrivateContext()
            try seed.performAndWait {
                for index in 0..<50 {
                    let user = User(context: seed)
                    user.userID = "b\(index)"
                    let post = Post(context: seed)
                    post.postID = "p\(index)"
                    post.user = user
                }
                try seed.save()
            }
            // Hold every user and post in the reader's main context.
            try main.performAndWait { () throws in
                #expect(try User.fetchAll(in: main).count == 50)
                #expect(try Post.fetchAll(in: main).count == 50)
            }
            try eventually("the seed's insert was merged") { changed.all.contains { !$0.inserted.isEmpty } }
            let before = reader.coordinator.statementCount
            let editor = writer.newPrivateContext()
            try editor.performAndWait {
                for user in try User.fetchAll(in: editor) { user.age = 3 }
                for post in try Post.fetchAll(in: editor) { post.title = "t" }
                try editor.save()
            }
            try eventually("the update was merged") { changed.all.contains { $0.updated.count == 100 } }
            #expect(reader.coordinator.statementCount - before == 2)  // one refresh query per entity
            try main.performAndWait { () throws in
                let statements = reader.coordinator.statementCount
                #expect(try User.fetchAll(in: main).allSatisfy { $0.age == 3 })
                #expect(reader.coordinator.statementCount - statements == 1)
            }
        }
    }

    @Test func aFailedSaveLeavesNoRecordAndSendsNothing() throws {
        try withTwoManagers { writer, reader in
            let received = ChangeCollector()
            let token = reader.coordinator.observeRemoteChanges { received.append($0.changes) }
            defer { token.cancel() }
            try insertUser("dup", in: writer)
            #expect(throws: PostgresError.self) { try insertUser("dup", in: writer) }  // unique violation
            try insertUser("after", in: writer)
            // The later save is the sentinel: a record of the failed save would come before it.
            let after = try writer.coordinator.pool.withConnection { connection in
                try connection.query("SELECT id FROM users WHERE user_id = 'after'")[0].decode(Int64.self, at: 0)
            }
            try eventually("the later save arrived") {
                received.all.contains { $0.inserted.contains(ObjectID(entityName: "User", primaryKey: after)) }
            }
            #expect(received.all.count == 2)
            let records = try writer.coordinator.pool.withConnection { connection in
                try connection.query("SELECT count(*) FROM pgdatakit_changes")[0].decode(Int.self, at: 0)
            }
            #expect(records == 2)
        }
    }
}
