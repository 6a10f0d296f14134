import Foundation
import PGDataKit
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
