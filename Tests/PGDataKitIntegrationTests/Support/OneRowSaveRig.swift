import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// For the one-round-trip saves' tests: a fresh database with the example schema, a
/// manager that reaches it through a `CuttingProxy` (which counts the client's round
/// trips), a direct connection for what is stored, and a second manager (direct) whose
/// listener collects the change records it hears from the first.
struct OneRowSaveRig {
    let admin: Connection
    let proxy: CuttingProxy
    let manager: ContextManager
    /// The changes of every record the second manager heard, in order.
    let heard: Heard

    /// What the second manager's listener heard (shared with its observer).
    final class Heard: Sendable {
        let changes = Mutex<[ContextChanges]>([])
    }

    static func run(_ body: (OneRowSaveRig) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let admin = try Connection(configuration)
            defer { admin.close() }
            let proxy = try CuttingProxy(inFrontOf: configuration) { _ in }
            defer { proxy.close() }
            let manager = try ExampleSchema.makeManager(proxy.configuration)
            defer { manager.close() }
            let observer = try ContextManager(configuration: configuration, entities: ExampleSchema.entities)
            defer { observer.close() }
            let heard = Heard()
            let token = observer.coordinator.observeRemoteChanges { record in heard.changes.withLock { $0.append(record.changes) } }
            defer { token.cancel() }
            try body(OneRowSaveRig(admin: admin, proxy: proxy, manager: manager, heard: heard))
        }
    }

    /// Waits (up to 10 s) until the second manager heard `count` records; returns what
    /// it heard.
    func hearing(_ count: Int) -> [ContextChanges] {
        let deadline = ContinuousClock.now + .seconds(10)
        while heard.changes.withLock({ $0.count }) < count, ContinuousClock.now < deadline { usleep(1_000) }
        return heard.changes.withLock { $0 }
    }

    /// Records that the latest change record stored is `expected` (compared as JSON).
    func expectLastRecord(_ expected: ContextChanges, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try Self.expectLastRecord(expected, on: admin, sourceLocation: sourceLocation)
    }

    /// Records that the latest change record stored on `connection`'s database is
    /// `expected` (compared as JSON: the record a save that took the general path writes).
    static func expectLastRecord(
        _ expected: ContextChanges, on connection: Connection, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let record = try connection.query(
            "SELECT changes = $1::jsonb, changes::text FROM pgdatakit_changes ORDER BY id DESC LIMIT 1",
            [try ChangeLog.encode(expected)])[0]
        let text = try record.decode(String.self, at: 1)
        #expect(try record.decode(Bool.self, at: 0), "\(text)", sourceLocation: sourceLocation)
    }
}
