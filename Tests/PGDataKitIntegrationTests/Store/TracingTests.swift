import Foundation
import Testing
import Tracing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Spans of saves, fetches, merges, controller refreshes and import batches, through a
/// recording tracer bootstrapped once for the process (`RecordingTracer`): each test
/// reads only the spans made under its own `ServiceContext`, so tests in parallel do
/// not see each other's.
@Suite("Tracing")
struct TracingTests {
    typealias Trace = RecordingTracer.Trace

    /// Runs `body` with a manager made after the tracer's bootstrap (a coordinator looks
    /// the tracer up when it is made), off the cooperative threads.
    static func withTracedManager(_ body: @Sendable (ContextManager, Trace) async throws -> Void) async throws {
        _ = RecordingTracer.shared
        try await DedicatedExecutor.run { _ in
            try await ExampleSchema.withManagerAsync { manager in
                try await body(manager, RecordingTracer.trace())
            }
        }
    }

    /// The name of the manager's database.
    static func databaseName(_ manager: ContextManager) throws -> String {
        try manager.coordinator.pool.withConnection { try $0.query("SELECT current_database()")[0].decode(String.self, at: 0) }
    }

    /// Saves `count` users `<prefix><index>` outside any test's trace.
    static func seedUsers(_ count: Int, prefix: String = "u", in manager: ContextManager) async throws {
        let seed = manager.newPrivateContext()
        try await seed.perform {
            ExampleSchema.insertUsers(count, prefix: prefix, in: seed)
            try seed.save()
        }
    }

    /// Checks that no span of the test says `values` anywhere.
    static func expectNoValues(_ values: [String], in trace: Trace, sourceLocation: SourceLocation = #_sourceLocation) {
        for span in trace.spans {
            let text = span.allText
            for value in values {
                #expect(!text.contains(value), "span \(span.operationName) says \(value)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test func aSaveUnderARequestSpanIsItsChildWithTheConventionsAttributesAndNoValues() async throws {
        try await Self.withTracedManager { manager, trace in
            let context = manager.newPrivateContext()
            let (request, sent) = try await trace.withRequestSpan("POST /users") { request in
                let sent = try await context.perform { () throws -> Int in
                    let user = User(context: context)
                    user.userID = "secret-user-4711"
                    user.name = "Ada Secret"
                    user.age = 36
                    let before = manager.coordinator.statementCount
                    try context.save()
                    return manager.coordinator.statementCount - before
                }
                return (request, sent)
            }
            let saves = trace.spans(PGDataKitTracing.save)
            #expect(saves.count == 1)
            let save = try #require(saves.first)
            #expect(save.parent == request.id)
            #expect(save.kind == .client)
            #expect(save.ended)
            #expect(save.operationName == "save users")
            #expect(save.string(PGDataKitTracing.system) == "postgresql")
            #expect(save.string(PGDataKitTracing.systemName) == "postgresql")
            #expect(save.string(PGDataKitTracing.collectionName) == "users")
            #expect(save.string(PGDataKitTracing.entity) == "User")
            #expect(save.string(PGDataKitTracing.namespace) == (try Self.databaseName(manager)))
            #expect(save.string(PGDataKitTracing.context) == "private")
            #expect(save.int(PGDataKitTracing.inserted) == 1)
            #expect(save.int(PGDataKitTracing.updated) == 0)
            #expect(save.int(PGDataKitTracing.deleted) == 0)
            #expect(sent >= 1)
            #expect(save.int(PGDataKitTracing.statements) == Int64(sent))
            #expect(save.int(PGDataKitTracing.retries) == 0)
            #expect(save.status == nil)
            #expect(save.errors.isEmpty)
            Self.expectNoValues(["secret-user-4711", "Ada Secret"], in: trace)
        }
    }

    @Test func aFailedSaveRecordsItsSQLStateButNotTheServersMessage() async throws {
        try await Self.withTracedManager { manager, trace in
            try await Self.seedUsers(1, prefix: "dup-secret-", in: manager)
            let context = manager.newPrivateContext()
            let thrown = await ServiceContext.withValue(trace.context) {
                await #expect(throws: PostgresError.self) {
                    try await context.perform {
                        let user = User(context: context)
                        user.userID = "dup-secret-0"
                        try context.save()
                    }
                }
            }
            let error = try #require(thrown)
            #expect(error.sqlState == .uniqueViolation)
            // The server quotes the key: what the span must not carry.
            #expect((error.detail ?? "").contains("dup-secret-0"))
            let save = try #require(trace.spans(PGDataKitTracing.save).first)
            #expect(save.status?.code == .error)
            #expect(save.string(PGDataKitTracing.errorType) == "23505")
            #expect(save.string(PGDataKitTracing.statusCode) == "23505")
            #expect(save.errors.count == 1)
            #expect(save.errors.first.map { String(describing: $0) } == "PGDataKitPostgres.PostgresError (SQLSTATE 23505)")
            #expect(save.ended)
            Self.expectNoValues(["dup-secret-0", "already exists"], in: trace)
        }
    }

    @Test func aSaveRedoneAfterAConflictRecordsTheRetryAndItsCause() async throws {
        try await Self.withTracedManager { manager, trace in
            try await Self.seedUsers(1, prefix: "conflict-", in: manager)
            let reader = manager.newPrivateContext()
            reader.mergePolicy = .mergeByPropertyObjectTrump
            let user = try await reader.perform { () throws -> ObjectID? in
                let users = try reader.fetch(FetchRequest<User>())
                return users.first?.objectID
            }
            let id = try #require(user)
            let writer = manager.newPrivateContext()
            try await writer.perform {
                let users = try writer.fetch(FetchRequest<User>())
                users.first?.age = 1
                try writer.save()
            }
            try await ServiceContext.withValue(trace.context) {
                try await reader.perform {
                    let object = try reader.existingObject(with: id) as? User
                    object?.name = "changed here"
                    try reader.save()
                }
            }
            let save = try #require(trace.spans(PGDataKitTracing.save).first)
            #expect(save.int(PGDataKitTracing.retries) == 1)
            let retries = save.events.filter { $0.name == PGDataKitTracing.retryEvent }
            #expect(retries.count == 1)
            // The one-row update in the reader's repeatable-read transaction meets the row
            // the writer changed since its snapshot: a serialization failure, redone
            // read-committed (where the version check finds the conflict and the policy
            // settles it).
            #expect(retries.first?.attributes.get(PGDataKitTracing.cause) == .string("serialization"))
            #expect(save.status == nil)
            let stored = try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'changed here' AND age = 1", in: manager)
            #expect(stored == 1)
        }
    }

    @Test func fetchesAndCountsHaveSpansWithTheirRows() async throws {
        try await Self.withTracedManager { manager, trace in
            try await Self.seedUsers(3, in: manager)
            let context = manager.newPrivateContext()
            let request = try await trace.withRequestSpan("GET /users") { request in
                try await context.perform {
                    _ = try context.fetch(FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")]))
                    _ = try context.count(for: FetchRequest<User>())
                    _ = try context.fetchObjectIDs(FetchRequest<User>(fetchLimit: 2))
                }
                return request
            }
            let fetches = trace.spans(PGDataKitTracing.fetch)
            #expect(fetches.map(\.operationName) == ["fetch users", "fetch users"])
            #expect(fetches.map { $0.int(PGDataKitTracing.returnedRows) } == [3, 2])
            #expect(fetches.allSatisfy { $0.parent == request.id && $0.kind == .client && $0.ended })
            #expect(fetches.allSatisfy { $0.string(PGDataKitTracing.collectionName) == "users" })
            #expect(fetches.allSatisfy { ($0.int(PGDataKitTracing.statements) ?? 0) >= 1 })
            let counts = trace.spans(PGDataKitTracing.count)
            #expect(counts.count == 1)
            #expect(counts.first?.int(PGDataKitTracing.returnedRows) == 3)
        }
    }

    @Test func anotherContextsSaveIsMergedIntoTheMainContextInASpanUnderTheSave() async throws {
        try await Self.withTracedManager { manager, trace in
            // (Read before the save: nothing is merged into a main context nobody read.)
            let main = manager.mainContext
            let context = manager.newPrivateContext()
            try await ServiceContext.withValue(trace.context) {
                try await context.perform {
                    ExampleSchema.insertUsers(2, prefix: "merged-", in: context)
                    try context.save()
                }
            }
            // The merge was queued on the main context's queue during the save: after
            // this block, it has run.
            try await main.perform {}
            let save = try #require(trace.spans(PGDataKitTracing.save).first)
            let merges = trace.spans(PGDataKitTracing.merge)
            #expect(merges.count == 1)
            let merge = try #require(merges.first)
            #expect(merge.parent == save.id)
            #expect(merge.ended)
            #expect(merge.string(PGDataKitTracing.context) == "main")
            #expect(merge.int(PGDataKitTracing.inserted) == 2)
            #expect(merge.string(PGDataKitTracing.collectionName) == "users")
            #expect(merge.operationName == "merge users")
            Self.expectNoValues(["merged-0", "merged-1"], in: trace)
        }
    }

    /// The listener reads another process's save and the manager merges it into the main
    /// context: a span of its own (no caller's context crosses processes), kept by the
    /// recording tracer by database.
    @Test func anotherProcesssSaveIsMergedInARootSpan() throws {
        _ = RecordingTracer.shared
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { manager.close() }
            let other = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { other.close() }
            let database = try Self.databaseName(manager)
            _ = manager.mainContext  // (nothing is merged into a main context nobody read)
            let context = other.newPrivateContext()
            try context.performAndWait {
                ExampleSchema.insertUsers(1, prefix: "remote-secret-", in: context)
                try context.save()
            }
            // `other` merges its own save into its main context under the save's span;
            // the remote merge into `manager`'s has no parent.
            func remoteMerges() -> [RecordedSpan] {
                RecordingTracer.shared.unkeyedMerges(in: database).filter { $0.parent == nil }
            }
            try eventually("the other process's save is merged") { !remoteMerges().isEmpty }
            let merge = try #require(remoteMerges().first)
            #expect(merge.operationName == "merge users")
            #expect(merge.string(PGDataKitTracing.context) == "main")
            #expect(merge.int(PGDataKitTracing.inserted) == 1)
            #expect(merge.kind == .client)
            #expect(!merge.allText.contains("remote-secret-"))
        }
    }

    @Test func controllersHaveARefreshSpanOnTheirFetchAndOnEachMergeThatConcernsThem() async throws {
        try await Self.withTracedManager { manager, trace in
            try await Self.seedUsers(2, in: manager)
            let main = manager.mainContext
            let controller = ManagedObjectController(
                fetchRequest: FetchRequest<User>(sortDescriptors: [FetchSortDescriptor("userID")]), context: main)
            defer { withExtendedLifetime(controller) {} }
            try await ServiceContext.withValue(trace.context) {
                try await main.perform { try controller.performFetch() }
            }
            let first = try #require(trace.spans(PGDataKitTracing.refresh).first)
            #expect(first.operationName == "refresh users")
            #expect(first.int(PGDataKitTracing.controllers) == 1)
            #expect(trace.spans(PGDataKitTracing.fetch).contains { $0.parent == first.id })

            let context = manager.newPrivateContext()
            try await ServiceContext.withValue(trace.context) {
                try await context.perform {
                    ExampleSchema.insertUsers(1, prefix: "late-", in: context)
                    try context.save()
                }
            }
            try await main.perform {}
            let merge = try #require(trace.spans(PGDataKitTracing.merge).first)
            let refreshes = trace.spans(PGDataKitTracing.refresh)
            #expect(refreshes.count == 2)
            #expect(refreshes.last?.parent == merge.id)
            #expect(refreshes.last?.string(PGDataKitTracing.collectionName) == "users")
            #expect(refreshes.allSatisfy { $0.ended })
            let count = try await main.perform { controller.objects.count }
            #expect(count == 3)
        }
    }

    @Test func eachImportBatchHasASpanWithItsRecords() async throws {
        try await Self.withTracedManager { manager, trace in
            let records: [JSONValue] = (0..<5).map { ["id": .string("import-secret-\($0)")] }
            let context = manager.newPrivateContext()
            let request = try await trace.withRequestSpan("POST /import") { request in
                try await context.perform {
                    _ = try User.insertOrUpdate(records, uniqueModelKey: "userID", uniqueRemoteKey: "id", in: context, batchSize: 2)
                    try context.save()
                }
                return request
            }
            let batches = trace.spans(PGDataKitTracing.importBatch)
            #expect(batches.map { $0.int(PGDataKitTracing.records) } == [2, 2, 1])
            #expect(batches.allSatisfy { $0.parent == request.id && $0.operationName == "import users" && $0.ended })
            #expect(batches.allSatisfy { ($0.int(PGDataKitTracing.statements) ?? 0) >= 1 })

            // importRecords: each batch saves, and its save is a child of the batch.
            let mapper = ObjectMapper<User>(uniqueKey: \.userID, remoteKey: "id") { _, _ in }
            try await ServiceContext.withValue(trace.context) {
                var options = ImportOptions()
                options.batchSize = 3
                _ = try await manager.importRecords(records, mapper: mapper, options: options)
            }
            let imported = Array(trace.spans(PGDataKitTracing.importBatch).dropFirst(3))
            #expect(imported.map { $0.int(PGDataKitTracing.records) } == [3, 2])
            #expect(imported.allSatisfy { $0.int(PGDataKitTracing.retries) == 0 })
            let saves = trace.spans(PGDataKitTracing.save)
            #expect(imported.allSatisfy { batch in saves.contains { $0.parent == batch.id } })
            Self.expectNoValues(["import-secret-"], in: trace)
        }
    }

    @Test func theCallersServiceContextCrossesEveryWayOntoTheQueue() async throws {
        try await Self.withTracedManager { manager, trace in
            let context = manager.newPrivateContext()
            let test = trace.test
            let (async, plain) = await ServiceContext.withValue(trace.context) {
                let async = try? await context.perform { ServiceContext.current?[RecordingTracer.TestKey.self] }
                let plain = await withCheckedContinuation { continuation in
                    context.perform { continuation.resume(returning: ServiceContext.current?[RecordingTracer.TestKey.self]) }
                }
                return (async, plain)
            }
            #expect(async == test)
            #expect(plain == test)
            // Outside the caller's context, the queue has none.
            let outside = try await context.perform { ServiceContext.current?[RecordingTracer.TestKey.self] }
            #expect(outside == nil)
        }
    }

    /// `performAndWait` runs its block on the calling thread (`DispatchQueue.sync`), where
    /// the caller's task-locals are visible: no capture is needed.
    @Test func performAndWaitSeesTheCallersServiceContext() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            let trace = RecordingTracer.trace()
            let seen = ServiceContext.withValue(trace.context) {
                context.performAndWait { ServiceContext.current?[RecordingTracer.TestKey.self] }
            }
            #expect(seen == trace.test)
        }
    }
}

/// `StoreTracing` alone, with a tracer of its own (the bootstrapped one is the process's).
@Suite("Tracing: the coordinator's tracing")
struct StoreTracingTests {
    final class Evaluations: Sendable {
        private let count = Counter()
        var value: Int { count.value }
        /// A name, counting that it was asked for.
        func name(_ name: String) -> String {
            count.add(1)
            return name
        }
    }

    @Test func withTheNoOpTracerNothingIsMadeNotEvenTheNames() {
        let tracing = StoreTracing(tracer: NoOpTracer(), configuration: ConnectionConfiguration("postgres://app@db/shop"))
        #expect(!tracing.isEnabled)
        #expect(tracing.tracer == nil)
        let evaluations = Evaluations()
        let spanGiven = tracing.withSpan(
            PGDataKitTracing.fetch, table: evaluations.name("users"), entity: evaluations.name("User")
        ) { span in span != nil }
        #expect(!spanGiven)
        #expect(evaluations.value == 0)
    }

    @Test func spansSayTheDatabaseAndServerButNotThePassword() throws {
        let tracer = RecordingTracer()
        let trace = tracer.trace()
        let tracing = StoreTracing(
            tracer: tracer, configuration: ConnectionConfiguration("postgres://app:hunter2-secret@db.example:6543/shop"))
        #expect(tracing.isEnabled)
        ServiceContext.withValue(trace.context) {
            tracing.withSpan(PGDataKitTracing.fetch, table: "users", entity: "User") { span in
                span?.set([PGDataKitTracing.returnedRows: .int64(2)])
            }
        }
        let span = try #require(trace.spans.first)
        #expect(span.operationName == "fetch users")
        #expect(span.kind == .client)
        #expect(span.string(PGDataKitTracing.namespace) == "shop")
        #expect(span.string(PGDataKitTracing.serverAddress) == "db.example")
        #expect(span.int(PGDataKitTracing.serverPort) == 6543)
        #expect(span.string(PGDataKitTracing.systemName) == "postgresql")
        #expect(span.int(PGDataKitTracing.returnedRows) == 2)
        #expect(span.int(PGDataKitTracing.statements) == 0)
        #expect(!span.allText.contains("hunter2"))
        #expect(span.ended)
    }

    @Test func severalHostsNameNoServerAndAnErrorIsRecordedByItsType() throws {
        struct Refused: Error, CustomStringConvertible {
            var description: String { "refused for user-secret-42" }
        }
        let tracer = RecordingTracer()
        let trace = tracer.trace()
        let tracing = StoreTracing(
            tracer: tracer, configuration: ConnectionConfiguration("postgresql://app@db1:5432,db2:5432/shop"))
        _ = ServiceContext.withValue(trace.context) {
            #expect(throws: Refused.self) {
                try tracing.withSpan(PGDataKitTracing.save) { _ in throw Refused() }
            }
        }
        let span = try #require(trace.spans.first)
        #expect(span.operationName == "save")
        #expect(span.string(PGDataKitTracing.serverAddress) == nil)
        #expect(span.int(PGDataKitTracing.serverPort) == nil)
        #expect(span.status?.code == .error)
        #expect(span.string(PGDataKitTracing.errorType)?.hasSuffix("Refused") == true)
        #expect(span.string(PGDataKitTracing.statusCode) == nil)
        #expect(!span.allText.contains("user-secret-42"))
    }
}
