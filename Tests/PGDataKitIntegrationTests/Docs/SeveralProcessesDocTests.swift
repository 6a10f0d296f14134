import Foundation
import Testing

@testable import PGDataKit

/// The Swift blocks of SeveralProcesses.md, compiled and run: a second manager on the same
/// database stands for another process.
@Suite("Docs: several processes")
struct SeveralProcessesDocTests {
    /// Saves a user through `other` and waits until `manager`'s main context has it.
    func saveElsewhere(_ userID: String, _ other: ContextManager, seenBy manager: ContextManager) throws {
        let context = other.newPrivateContext()
        try context.performAndWait {
            User(context: context).userID = userID
            try context.save()
        }
        try ControllerTesting.wait("the other save is merged", on: manager.mainContext, timeout: .seconds(60)) {
            try User.exists(in: manager.mainContext, where: "userID == %@", userID)
        }
    }

    @Test func observingRawRecords() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { manager.close() }
            let other = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
            defer { other.close() }
            let token = manager.coordinator.observeRemoteChanges { record in
                // on the listener's thread: keep it short, hand work to a context with perform
                print(record)  // change 42 from process 1234: 1 inserted, 0 updated, 0 deleted
            }
            // token.cancel() stops observing
            try saveElsewhere("remote", other, seenBy: manager)
            token.cancel()
        }
    }

    @Test(.onItsOwnThread) func remoteChangesStream() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
        let other = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
        defer { other.close() }
        let watcher = Task(executorPreference: OwnThreadExecutor.current) {   // not the busy shared pool
            for await record in manager.coordinator.remoteChanges() {
                print(record.changes.deleted)
            }
        }
        try saveElsewhere("remote", other, seenBy: manager)
        manager.close()   // ends the stream (at once, if the loop asks for it only now)
        await watcher.value
    }

    @Test func relayInASharedFolder() throws {
        let sharedFolder = NSTemporaryDirectory() + "pgdatakit-relay-doc-" + UUID().uuidString.prefix(8)
        #expect(mkdir(sharedFolder, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: sharedFolder) }
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let manager = try ContextManager(
                configuration: configuration, entities: [User.self, Post.self],
                changeLog: ChangeLogOptions(relay: .directory(sharedFolder)))   // or .off
            defer { manager.close() }
            try eventually("the listener is connected") { manager.coordinator.listenerBackendPID != nil }
            #expect(manager.coordinator.hostsListenerRelay)
        }
    }

    @Test func retention() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let url = try #require(configuration.renderedConnectionString())
            let manager = try ContextManager(
                configuration: ConnectionConfiguration(url), entities: [User.self, Post.self],
                changeLog: ChangeLogOptions(retention: .seconds(2 * 86_400)))
            defer { manager.close() }   // stops the listener and closes the pool
            #expect(try manager.mainContext.performAndWait { try manager.mainContext.fetchAll(User.self).count } == 0)
        }
    }
}
