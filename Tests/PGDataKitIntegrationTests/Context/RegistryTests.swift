import Foundation
import Testing

@testable import PGDataKit

/// The context's registry keeps inserts by temporary ID apart from saved objects: what a
/// lookup, the registered objects and a relationship's members see, across a save, a
/// refused save and the save after it.
@Suite("The registry by temporary and permanent ID")
struct RegistryTests {
    @Test func insertsMoveToTheirPermanentIDsAndTheTemporaryOnesAreForgotten() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let users = Self.insertUsers(0..<20, in: context)
                let temporaries = users.map(\.objectID)
                let allTemporary = temporaries.allSatisfy { $0.isTemporaryID }
                #expect(allTemporary)
                for (user, id) in zip(users, temporaries) { #expect(context.registeredObject(for: id) === user) }
                #expect(context.registeredObjects.count == 20)
                try context.save()
                for (user, temporary) in zip(users, temporaries) {
                    #expect(!user.objectID.isTemporaryID)
                    #expect(context.registeredObject(for: temporary) == nil)
                    #expect(context.registeredObject(for: user.objectID) === user)
                    #expect(try context.existingObject(with: user.objectID) === user)
                }
                #expect(context.registeredObjects == Set(users))
                // A new insert after the save is found by its temporary ID as before.
                let later = User(context: context)
                later.userID = "later"
                #expect(context.registeredObject(for: later.objectID) === later)
                #expect(context.registeredObjects.count == 21)
            }
        }
    }

    /// A refused save leaves every insert under its temporary ID; the next save moves
    /// them all, with the inserts made in between.
    @Test func aRefusedSaveKeepsTheTemporariesAndTheNextMovesThemAll() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                var users = Self.insertUsers(0..<12, in: context)
                let sample = Sample(context: context)
                sample.text = "nul \u{0} inside"
                #expect(throws: PostgresValueError.self) { try context.save() }
                let stillTemporary = (users + [sample]).allSatisfy { $0.objectID.isTemporaryID }
                #expect(stillTemporary)
                let stillRegistered = users.allSatisfy { context.registeredObject(for: $0.objectID) === $0 }
                #expect(stillRegistered)
                sample.text = "mended"
                users += Self.insertUsers(12..<15, in: context)
                let temporaries = (users + [sample]).map(\.objectID)
                try context.save()
                for (object, temporary) in zip(users + [sample], temporaries) {
                    #expect(context.registeredObject(for: temporary) == nil)
                    #expect(context.registeredObject(for: object.objectID) === object)
                }
                #expect(context.registeredObjects.count == 16)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 15)
        }
    }

    /// An unsaved owner's members are found among the unsaved objects (the members index
    /// is built from both tables), and stay its members once saved.
    @Test func membersOfAnInsertAreFoundBeforeAndAfterTheSave() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let saved = User(context: context)
                saved.userID = "saved"
                try context.save()
                let owner = User(context: context)
                owner.userID = "owner"
                let posts = (0..<3).map { number in
                    let post = Post(context: context)
                    post.postID = "p\(number)"
                    post.user = owner
                    return post
                }
                let other = Post(context: context)
                other.postID = "other"
                other.user = saved
                #expect(owner.posts == Set(posts))
                #expect(saved.posts == [other])
                try context.save()
                #expect(owner.posts == Set(posts))
                #expect(saved.posts == [other])
                #expect(context.registeredObjects.count == 6)
            }
        }
    }

    /// New users `u<number>` for the numbers, inserted into the context.
    static func insertUsers(_ numbers: Range<Int>, in context: ManagedObjectContext) -> [User] {
        numbers.map { number in
            let user = User(context: context)
            user.userID = "u\(number)"
            return user
        }
    }
}
