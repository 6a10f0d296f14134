import Foundation
import PGDataKit
import Synchronization
import Testing

/// The mapper of the user records, as an insert-or-update.
let userMapper = ObjectMapper<User>(uniqueKey: \.userID, remoteKey: "UserID") { record, user in
    ImportSchema.setUser(record, user)
}

/// Records made on demand, calling `observe` with each index handed out.
struct ObservedRecords: Sequence, Sendable {
    let records: [JSONValue]
    let observe: @Sendable (Int) -> Void

    func makeIterator() -> AnyIterator<JSONValue> {
        var index = 0
        return AnyIterator {
            guard index < records.count else { return nil }
            defer { index += 1 }
            observe(index)
            return records[index]
        }
    }
}

@Suite("Import operations: batches, skip unchanged, prune, cancellation, links, retries")
struct ImportOperationTests {
    /// Any batch size a caller can pass works: `Int.max` is CRLoom's documented "one
    /// save at the end" (`NSUIntegerMax`) and used to overflow the batch's reserved
    /// allocation (2^40 asked for terabytes); 0 and negative sizes mean batches of one.
    @Test(arguments: [Int.max, Int.max - 1, 1 << 40, Int(Int32.max) + 1, 7, 1, 0, -1, Int.min])
    func everyBatchSizeWorks(batchSize: Int) async throws {
        try await ExampleSchemaAsync.withImportManager { manager in
            let records = ImportSchema.userRecords(0..<20)
            let summary = try await manager.importRecords(records, mapper: userMapper, options: ImportOptions(batchSize: batchSize))
            #expect(summary.inserted == 20)
            #expect(summary.batches == (batchSize >= 20 ? 1 : batchSize == 7 ? 3 : 20))
            let operation = manager.importOperation(
                ImportSchema.userRecords(0..<20, name: "Again"), mapper: userMapper, options: ImportOptions(batchSize: batchSize))
            operation.start()  // runs the whole import on this thread
            #expect(operation.error == nil)
            #expect(operation.summary?.updated == 20)
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let users = try User.insertOrUpdate(
                    ImportSchema.userRecords(10..<30, name: "Third"), uniqueModelKey: \.userID, uniqueRemoteKey: "UserID",
                    in: context, batchSize: batchSize) { record, user in ImportSchema.setUser(record, user) }
                #expect(users.count == 20)
                try context.save()
                var request = FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")])
                request.fetchBatchSize = batchSize
                var seen = 0
                try context.fetch(request) { batch in seen += batch.count }
                #expect(seen == 30)
            }
        }
    }

    @Test func anOperationImportsInBatchesAndReportsProgress() throws {
        try ImportSchema.withManager { manager throws in
            let operation = manager.importOperation(
                ImportSchema.userRecords(0..<2500), mapper: userMapper, options: ImportOptions(batchSize: 1000, expectedCount: 2500))
            let queue = OperationQueue()
            queue.addOperations([operation], waitUntilFinished: true)
            #expect(operation.error == nil)
            var expected = ImportSummary()
            expected.records = 2500
            expected.inserted = 2500
            expected.batches = 3
            #expect(operation.summary == expected)
            #expect(operation.progress.completedUnitCount == 2500)
            #expect(operation.progress.fractionCompleted == 1)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 2500)
            #expect(try ImportSchema.integer("SELECT count(*) FROM pgdatakit_changes", in: manager) == 3)  // one per batch
        }
    }

    /// Identical records write nothing: no UPDATE, no version bump, no change record.
    @Test(.onItsOwnThread) func identicalRecordsAreSkipped() async throws {
        try await ExampleSchemaAsync.withImportManager { manager in
            let records = ImportSchema.userRecords(0..<1000)
            let first = try await manager.importRecords(records, mapper: userMapper, options: ImportOptions(batchSize: 400))
            #expect(first.inserted == 1000)
            let changes = try ImportSchema.integer("SELECT count(*) FROM pgdatakit_changes", in: manager)
            let statements = manager.coordinator.statementCount
            var changed = records
            changed[7] = ["UserID": "u7", "Name": "Changed", "Age": 7]
            let second = try await manager.importRecords(changed, mapper: userMapper, options: ImportOptions(batchSize: 400))
            #expect(second.unchanged == 999)
            #expect(second.updated == 1)
            #expect(second.inserted == 0)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE version <> 1", in: manager) == 1)
            #expect(try ImportSchema.integer("SELECT count(*) FROM pgdatakit_changes", in: manager) == changes + 1)
            // Batches 2 and 3 wrote nothing: begin, fetch, end each; batch 1 instead of the
            // end one statement that updates the row and writes the change record (of
            // one row: no lock statement before it, see `lockRows`), and the commit.
            #expect(manager.coordinator.statementCount - statements == 3 * 3 + 1)
        }
    }

    @Test func pruningDeletesTheRowsMissingFromTheInputWithOneStatement() throws {
        try ImportSchema.withManager { manager throws in
            let seed = manager.importOperation(
                ImportSchema.userRecords(0..<10) + [["UserID": "keep-x"]], mapper: userMapper)
            seed.start()
            #expect(seed.error == nil)
            var options = ImportOptions(pruneMissingObjects: true)
            options.prunePredicate = try FetchPredicate(format: "userID BEGINSWITH %@", "u")
            // Without pruning first, to count the statements pruning adds.
            let plain = manager.importOperation(ImportSchema.userRecords(0..<5), mapper: userMapper)
            var before = manager.coordinator.statementCount
            plain.start()
            let withoutPruning = manager.coordinator.statementCount - before
            let pruning = manager.importOperation(ImportSchema.userRecords(0..<5), mapper: userMapper, options: options)
            before = manager.coordinator.statementCount
            pruning.start()
            #expect(pruning.error == nil)
            #expect(manager.coordinator.statementCount - before == withoutPruning + 4)  // begin, DELETE, change record, commit
            #expect(pruning.summary?.deleted == 5)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 6)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE user_id = 'keep-x'", in: manager) == 1)
        }
    }

    @Test(.onItsOwnThread) func cancellingRollsTheCurrentBatchBackAndKeepsTheSavedOnes() async throws {
        try await ExampleSchemaAsync.withImportManager { manager in
            // Operation: cancelled while its third batch is read.
            let box = Mutex<ImportOperation<User>?>(nil)
            let records = ObservedRecords(records: ImportSchema.userRecords(0..<5000)) { index in
                if index == 2500 { box.withLock { $0 }?.cancel() }
            }
            let operation = manager.importOperation(records, mapper: userMapper, options: ImportOptions(batchSize: 1000))
            box.withLock { $0 = operation }
            operation.start()
            #expect(operation.error is CancellationError)
            #expect(operation.summary?.records == 2000)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 2000)

            // Async: cancelled through its progress while the second batch is read.
            let progress = Progress(totalUnitCount: 5000)
            let more = ObservedRecords(records: ImportSchema.userRecords(5000..<10_000)) { index in
                if index == 1500 { progress.cancel() }
            }
            await #expect(throws: CancellationError.self) {
                try await manager.importRecords(more, mapper: userMapper, options: ImportOptions(batchSize: 1000), progress: progress)
            }
            #expect(progress.completedUnitCount == 1000)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 3000)

            // Async: the task is cancelled.
            let task = Task(executorPreference: OwnThreadExecutor.current) {
                try await manager.importRecords(
                    ImportSchema.userRecords(10_000..<11_000), mapper: userMapper, options: ImportOptions(batchSize: 100))
            }
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            let total = try ImportSchema.integer("SELECT count(*) FROM users", in: manager)
            #expect(total >= 3000 && total < 4000 && total % 100 == 0)
        }
    }

    @Test func aBadRecordStopsTheImportWithItsIndexAndNothingOfItsBatch() throws {
        try ImportSchema.withManager { manager throws in
            var records = ImportSchema.userRecords(0..<300)
            records[250] = ["Name": "no key"]
            let failing = manager.importOperation(records, mapper: userMapper, options: ImportOptions(batchSize: 100))
            failing.start()
            guard let error = failing.error as? ImportError, error.code == .missingKey else {
                Issue.record("expected a missing key, got \(String(describing: failing.error))")
                return
            }
            #expect(error.recordIndex == 250)
            #expect(failing.summary?.records == 200)
        }
    }

    /// Posts link to their users by remote ids: one lookup per batch for the users not
    /// known yet, stubs for users that do not exist, and a cache across batches.
    @Test func relationshipsLinkByRemoteKeysWithOneLookupPerBatch() throws {
        try ImportSchema.withManager { manager throws in
            let seed = manager.importOperation(ImportSchema.userRecords(0..<5), mapper: userMapper)
            seed.start()
            let posts = (0..<2000).map { index -> JSONValue in
                ["PostID": .string("p\(index)"), "Title": .string("Post \(index)"), "UserID": .string("u\(index % 10)")]
            }
            let link = ObjectMap<Post>.relationship("UserID", to: \.user, matching: \User.userID)
            let context = manager.newPrivateContext()
            let cache = ImportKeyCache()
            try context.performAndWait {
                _ = try Post.count(in: context)
                var before = manager.coordinator.statementCount
                try Post.insertOrUpdate(
                    Array(posts[0..<500]), uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context,
                    relationships: [link], keyCache: cache
                ) { record, post in post.title = record["Title"]?.stringValue }
                #expect(manager.coordinator.statementCount - before == 2)  // posts fetch, users lookup
                #expect(cache.count == 5)
                #expect(context.insertedObjects.count == 505)  // 500 posts, 5 user stubs
                try context.save()
                _ = try Post.count(in: context)
                before = manager.coordinator.statementCount
                try Post.insertOrUpdate(
                    Array(posts[500..<1000]), uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context,
                    relationships: [link], keyCache: cache
                ) { record, post in post.title = record["Title"]?.stringValue }
                // The saved stubs are looked up once more, the other users are cached.
                #expect(manager.coordinator.statementCount - before == 2)
                #expect(cache.count == 10)
                try context.save()
            }
            // The operation: the rest, and everything again (unchanged).
            let mapper = ObjectMapper<Post>(uniqueKey: \.postID, remoteKey: "PostID", relationships: [link]) { record, post in
                post.title = record["Title"]?.stringValue
            }
            let operation = manager.importOperation(posts, mapper: mapper, options: ImportOptions(batchSize: 500))
            operation.start()
            #expect(operation.error == nil)
            #expect(operation.summary?.inserted == 1000)
            #expect(operation.summary?.unchanged == 1000)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 10)
            #expect(
                try ImportSchema.integer(
                    "SELECT count(*) FROM posts p JOIN users u ON u.id = p.user_id WHERE u.user_id = 'u' || (substring(p.post_id from 2)::int % 10)",
                    in: manager) == 2000)
            #expect(try ImportSchema.integer("SELECT count(*) FROM posts WHERE version <> 1", in: manager) == 0)
        }
    }

    @Test func guaranteedInsertSkipsTheFetchAndStillNeverDuplicates() throws {
        try ImportSchema.withManager { manager throws in
            let seed = manager.importOperation(ImportSchema.userRecords(0..<10), mapper: userMapper)
            seed.start()
            let statements = manager.coordinator.statementCount
            let run = manager.importOperation(
                ImportSchema.userRecords(5..<20, name: "Again"), mapper: userMapper, options: ImportOptions(guaranteedInsert: true))
            run.start()
            #expect(run.error == nil)
            let summary = try #require(run.summary)
            // begin, the claim of new keys, the lock (without waiting) of the 5 rows that
            // existed, their upsert, their re-read, change record, commit
            #expect(manager.coordinator.statementCount - statements == 7)
            #expect(summary.inserted == 10)
            #expect(summary.updated == 5)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 20)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name LIKE 'Again%'", in: manager) == 15)
        }
    }

    /// With the `.error` merge policy, a row changed between the batch's fetch and its
    /// save is a conflict: the batch is rolled back and redone with fresh rows.
    @Test func aConflictingBatchIsRedone() throws {
        try ImportSchema.withManager { manager throws in
            let seed = manager.importOperation(ImportSchema.userRecords(0..<10), mapper: userMapper)
            seed.start()
            let meddled = Mutex(false)
            let pool = manager.coordinator.pool
            let meddling = ObjectMapper<User>(uniqueKey: \.userID, remoteKey: "UserID") { record, user in
                ImportSchema.setUser(record, user)
                let first = meddled.withLock { done in
                    defer { done = true }
                    return !done
                }
                if first {
                    _ = try pool.withConnection { try $0.execute("UPDATE users SET age = 99, version = version + 1 WHERE user_id = 'u3'") }
                }
            }
            var options = ImportOptions()
            options.mergePolicy = .error
            let operation = manager.importOperation(ImportSchema.userRecords(0..<10, name: "New"), mapper: meddling, options: options)
            operation.start()
            #expect(operation.error == nil)
            #expect(operation.summary?.retries == 1)
            #expect(operation.summary?.updated == 10)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name LIKE 'New%'", in: manager) == 10)
            #expect(try ImportSchema.integer("SELECT age FROM users WHERE user_id = 'u3'", in: manager) == 3)
        }
    }
}

enum ExampleSchemaAsync {
    /// `ImportSchema.withManager` for async tests.
    static func withImportManager(_ body: @Sendable (ContextManager) async throws -> Void) async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let connection = try Connection(configuration)
        try connection.executeScript(try ImportSchema.table)
        connection.close()
        let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self, Account.self])
        defer { manager.close() }
        try await body(manager)
    }
}
