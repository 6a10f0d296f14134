import Foundation
import Synchronization
import Testing
import Tracing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A manager merges nothing into a main context nobody has read (`ContextManager.
/// mainContext`): a worker that only uses private contexts spends no thread hop and no
/// work merging its own saves or other processes'. Merges are seen through the recording
/// tracer's merge spans (`RecordingTracer`), the only trace a merge leaves that does not
/// need the main context.
@Suite("Unread main context")
struct UnreadMainContextTests {
    /// A private context's saves are merged into the main context only once it was read:
    /// the save before the read has no merge span, the one after has.
    @Test func ownSavesAreMergedOnlyOnceTheMainContextWasRead() async throws {
        try await TracingTests.withTracedManager { manager, trace in
            let context = manager.newPrivateContext()
            try await ServiceContext.withValue(trace.context) {
                try await context.perform {
                    ExampleSchema.insertUsers(1, prefix: "before-read-", in: context)
                    try context.save()
                }
            }
            // A merge would have been queued on the main context's queue during the save:
            // after this block it would have run.
            let main = manager.mainContext
            try await main.perform {}
            #expect(trace.spans(PGDataKitTracing.merge).isEmpty)
            // Nothing was merged, yet the main context sees the save: its fetch comes after.
            let before = try await main.perform { try User.fetch(in: main, where: "userID BEGINSWITH %@", "before-read-").count }
            #expect(before == 1)

            try await ServiceContext.withValue(trace.context) {
                try await context.perform {
                    ExampleSchema.insertUsers(2, prefix: "after-read-", in: context)
                    try context.save()
                }
            }
            try await main.perform {}
            let merges = trace.spans(PGDataKitTracing.merge)
            #expect(merges.count == 1)
            #expect(merges.first?.int(PGDataKitTracing.inserted) == 2)
        }
    }

    /// Another process's save that arrives before the main context is read is not merged
    /// (its records are delivered to the coordinator's observers all the same); one that
    /// arrives after is.
    @Test func anotherProcesssSavesAreMergedOnlyOnceTheMainContextWasRead() throws {
        _ = RecordingTracer.shared
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { manager.close() }
            let other = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { other.close() }
            let database = try TracingTests.databaseName(manager)
            // Registered after the manager's own observation, so delivered after it: once
            // this one has a record, the manager has decided about merging it.
            let delivered = Mutex(0)
            let token = manager.coordinator.observeRemoteChanges { record in
                delivered.withLock { $0 += record.changes.inserted.count }
            }
            defer { token.cancel() }
            func insert(_ count: Int, prefix: String) throws {
                let context = other.newPrivateContext()
                try context.performAndWait {
                    ExampleSchema.insertUsers(count, prefix: prefix, in: context)
                    try context.save()
                }
            }
            func remoteMerges() -> [RecordedSpan] {
                RecordingTracer.shared.unkeyedMerges(in: database).filter { $0.parent == nil }
            }

            try insert(1, prefix: "unread-")
            try eventually("the first save is delivered") { delivered.withLock { $0 } == 1 }
            let main = manager.mainContext
            main.performAndWait {}
            #expect(remoteMerges().isEmpty)

            try insert(2, prefix: "read-")
            try eventually("the second save is merged") { !remoteMerges().isEmpty }
            main.performAndWait {}
            // Only the second save's two users: the first save's user was never merged.
            #expect(remoteMerges().reduce(0) { $0 + ($1.int(PGDataKitTracing.inserted) ?? 0) } == 2)
            #expect(delivered.withLock { $0 } == 3)
        }
    }

    /// Reading `mainContext` is what counts, however it is read: a manager whose main
    /// context was read by another thread merges from then on.
    @Test func theFirstReadFromAnyThreadTurnsMergingOn() async throws {
        try await TracingTests.withTracedManager { manager, trace in
            let read = Thread { _ = manager.mainContext }
            read.start()
            try eventually("the other thread read the main context") { read.isFinished }
            let context = manager.newPrivateContext()
            try await ServiceContext.withValue(trace.context) {
                try await context.perform {
                    ExampleSchema.insertUsers(1, prefix: "threaded-", in: context)
                    try context.save()
                }
            }
            try await manager.mainContext.perform {}
            #expect(trace.spans(PGDataKitTracing.merge).count == 1)
        }
    }
}
