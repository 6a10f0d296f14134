import Foundation
import Synchronization
@testable import PGDataKit
import PGDataKitPostgres
import Testing

@Suite("Context reset releases its objects")
struct ContextResetTests {
    @Test func aBatchOfObjectsIsReleasedWhileTheNextStatementRuns() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                ExampleSchema.insertUsers(100, in: context)
                try context.save()
                weak var released: User?
                do {
                    let first = try context.fetchAll(User.self).first
                    released = first
                    #expect(released != nil)
                }
                context.reset()
                #expect(released?.managedObjectContext == nil)  // detached at once
                #expect(try context.fetchAll(User.self).count == 100)  // the next statement
                #expect(released == nil)
            }
        }
    }

    @Test func moreThanABatchIsReleasedAtOnce() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            context.performAndWait {
                weak let released = ExampleSchema.insertUsers(16_385, in: context).first
                #expect(released != nil)
                context.reset()
                #expect(released == nil)
            }
        }
    }
}

/// A fetch into a fresh context makes its objects, then registers them in a pass of its
/// own with references it took while making them: none may be left over, whether the
/// fetch succeeds (the objects go with a reset) or fails on a later row.
@Suite("A fresh context's fetch holds no object beyond its registry")
struct FreshFetchReleaseTests {
    @Test func aFailedOrResetFetchLeavesNoObjectAlive() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let setup = try Connection(configuration)
            defer { setup.close() }
            try setup.executeScript(
                """
                CREATE TABLE counted (id bigserial PRIMARY KEY, version bigint NOT NULL DEFAULT 1, amount numeric);
                INSERT INTO counted (amount) VALUES (1), (2), (\(String(repeating: "9", count: 50)));
                """)
            let manager = try ContextManager(configuration: configuration, entities: [Counted.self])
            defer { manager.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                // Rows 1 and 2 are made before row 3 fails (a numeric Decimal cannot hold).
                #expect(throws: ManagedObjectError.self) { _ = try context.fetchAll(Counted.self) }
                #expect(Counted.live.withLock { $0 } == 0)
                #expect(context.registeredObjects.isEmpty)
                let small = try Counted.fetch(in: context, where: "amount < 10")
                #expect(small.count == 2 && context.registeredObjects == Set(small))
                #expect(Counted.live.withLock { $0 } == 2)
            }
            try context.performAndWait { () throws in
                context.reset()
                _ = try Counted.count(in: context)  // (the objects go while this runs)
            }
            #expect(Counted.live.withLock { $0 } == 0)
        }
    }
}

/// An object that counts the instances alive.
final class Counted: ManagedObject {
    override class var tableName: String { "counted" }
    @Attribute var amount: Decimal?
    static let live = Mutex(0)

    required init() {
        super.init()
        Self.live.withLock { $0 += 1 }
    }

    deinit { Self.live.withLock { $0 -= 1 } }
}
