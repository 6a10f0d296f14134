import Foundation
import PGDataKit
import Testing

@Suite("Context reset releases its objects")
struct ContextResetTests {
    @Test func aBatchOfObjectsIsReleasedWhileTheNextStatementRuns() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for index in 0..<100 {
                    let user = User(context: context)
                    user.userID = "u\(index)"
                }
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
                weak var released: User?
                do {
                    for index in 0..<16_385 {
                        let user = User(context: context)
                        user.userID = "u\(index)"
                        if index == 0 { released = user }
                    }
                }
                #expect(released != nil)
                context.reset()
                #expect(released == nil)
            }
        }
    }
}
