import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Saved users for child-context tests: `(userID, name, age)` each, saved by a private
/// context; their IDs in order.
func saveUsers(_ users: [(String, String, Int)], in manager: ContextManager) throws -> [ObjectID] {
    let context = manager.newPrivateContext()
    return try context.performAndWait { () throws -> [ObjectID] in
        let objects = users.map { userID, name, age in
            let user = User(context: context)
            user.userID = userID
            user.name = name
            user.age = age
            return user
        }
        try context.save()
        return objects.map(\.objectID)
    }
}

/// What a parent context is for a test: the manager's main context or a private one.
enum ParentKind: String, CaseIterable, Sendable {
    case main, `private`

    func context(of manager: ContextManager) -> ManagedObjectContext {
        self == .main ? manager.mainContext : manager.newPrivateContext(name: "parent")
    }
}

/// Child contexts read their parent's objects, unsaved changes included (issue 30).
@Suite("Child contexts: reads through the parent")
struct ChildContextReadTests {
    /// A fetch in the child applies its predicate and order to the parent's current
    /// values: the parent's unsaved insert, update and delete count; `count`, object-ID
    /// fetches and `fetchAll` agree; the child's own changes apply on top.
    @Test(arguments: ParentKind.allCases)
    func fetchSeesTheParentsUnsavedChanges(_ kind: ParentKind) throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("u1", "Ann", 20), ("u2", "Bob", 30), ("u3", "Cid", 40)], in: manager)
            let parent = kind.context(of: manager)
            let insertedID = try parent.performAndWait { () throws -> ObjectID in
                let users = try parent.fetchAll(User.self)
                users.first { $0.userID == "u2" }?.age = 50
                if let u3 = users.first(where: { $0.userID == "u3" }) { parent.delete(u3) }
                let u4 = User(context: parent)
                u4.userID = "u4"
                u4.age = 35
                return u4.objectID
            }
            let child = parent.newChildContext()
            #expect(child.parent === parent && child.concurrencyType == .private)
            try child.performAndWait { () throws in
                let request = FetchRequest<User>(
                    predicate: try FetchPredicate(format: "age > 25"), sortDescriptors: [FetchSortDescriptor("age")])
                let found = try child.fetch(request)
                #expect(found.map(\.userID) == ["u4", "u2"])
                #expect(found.map(\.age) == [35, 50])
                #expect(found.map(\.objectID) == [insertedID, ids[1]])
                #expect(found.allSatisfy { $0.managedObjectContext === child && !$0.hasChanges })
                #expect(try child.count(for: request) == 2)
                #expect(try child.fetchObjectIDs(request) == [insertedID, ids[1]])
                #expect(Set(try child.fetchAll(User.self).map(\.userID)) == ["u1", "u2", "u4"])
                #expect(try User.count(in: child, where: "age < 25") == 1)

                // The child's own change counts on top of the parent's values.
                let u1 = try #require(try child.existingObject(with: ids[0]) as? User)
                u1.age = 60
                #expect(try child.fetch(request).map(\.userID) == ["u4", "u2", "u1"])
                #expect(try child.count(for: request) == 3)
                #expect(try child.fetch(FetchRequest<User>(predicate: try FetchPredicate(format: "age < 25"))).isEmpty)
                // The parent's unsaved insert by its temporary ID; its delete.
                #expect((try child.existingObject(with: insertedID) as? User)?.userID == "u4")
                #expect(throws: ManagedObjectError.objectDeleted(ids[2])) {
                    try child.existingObject(with: ids[2])
                }
            }
            // Reading changed nothing in the parent.
            try parent.performAndWait { () throws in
                #expect(parent.insertedObjects.map(\.objectID) == [insertedID])
                #expect(parent.updatedObjects.compactMap { ($0 as? User)?.userID } == ["u2"])
                #expect(parent.deletedObjects.compactMap { ($0 as? User)?.userID } == ["u3"])
            }
        }
    }

    /// Relationships of the child's objects are read from the parent: to-one and
    /// to-many, through the parent's unsaved inserts and moves; objects are the child's
    /// own instances, with the parent's IDs.
    @Test func relationshipsFollowTheParentsObjects() throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("saved", "Sam", 30)], in: manager)
            let setup = manager.newPrivateContext()
            let postID = try setup.performAndWait { () throws -> ObjectID in
                let post = Post(context: setup)
                post.postID = "q"
                post.user = try setup.existingObject(with: ids[0]) as? User
                try setup.save()
                return post.objectID
            }
            let main = manager.mainContext
            let (newUserID, newPostID) = try main.performAndWait { () throws -> (ObjectID, ObjectID) in
                let user = User(context: main)
                user.userID = "new"
                let post = Post(context: main)
                post.postID = "p1"
                post.user = user
                // A saved post moves to the new user, unsaved.
                (try main.existingObject(with: postID) as? Post)?.user = user
                return (user.objectID, post.objectID)
            }
            let child = main.newChildContext()
            try child.performAndWait { () throws in
                let user = try #require(try child.existingObject(with: newUserID) as? User)
                #expect(user.managedObjectContext === child && !user.isInserted)
                #expect(Set(user.posts.map(\.postID)) == ["p1", "q"])
                #expect(user.posts.allSatisfy { $0.user === user && $0.managedObjectContext === child })
                let post = try #require(try child.existingObject(with: newPostID) as? Post)
                #expect(post.user === user)
                let saved = try #require(try child.existingObject(with: ids[0]) as? User)
                #expect(saved.posts.isEmpty)
                // A fetch through a to-one key path of an unsaved parent object.
                let request = FetchRequest<Post>(
                    predicate: try FetchPredicate(format: "user.userID == %@", "new"), sortDescriptors: [FetchSortDescriptor("postID")])
                #expect(try child.fetch(request).map(\.postID) == ["p1", "q"])
                #expect(!child.hasChanges)
                // A reference to the parent's unsaved object is where the child read it:
                // not a change, and what a rollback puts back.
                let q = try #require(try child.existingObject(with: postID) as? Post)
                q.title = "edited"
                #expect(Set(q.changedValues().keys) == ["title"])
                q.user = saved
                #expect(Set(q.changedValues().keys) == ["title", "user"])
                child.rollback()
                #expect(q.user === user && q.title == nil && !child.hasChanges)
            }
        }
    }

    /// A many-to-many set in the child is the parent's current set: its unsaved
    /// additions (a new topic) and removals.
    @Test func manyToManyReadsTheParentsCurrentSet() throws {
        try ManyToManySchema.withManager { manager in
            let setup = manager.newPrivateContext()
            let storyID = try setup.performAndWait { () throws -> ObjectID in
                let story = Story(context: setup)
                story.code = "s1"
                for name in ["a", "b"] {
                    let topic = Topic(context: setup)
                    topic.name = name
                    story.topics.insert(topic)
                }
                try setup.save()
                return story.objectID
            }
            let main = manager.mainContext
            try main.performAndWait { () throws in
                let story = try #require(try main.existingObject(with: storyID) as? Story)
                let fresh = Topic(context: main)
                fresh.name = "c"
                story.topics = Set(story.topics.filter { $0.name != "a" } + [fresh])
            }
            let child = main.newChildContext()
            try child.performAndWait { () throws in
                let story = try #require(try child.existingObject(with: storyID) as? Story)
                #expect(Set(story.topics.map(\.name)) == ["b", "c"])
                #expect(story.topics.allSatisfy { $0.managedObjectContext === child && $0.stories.contains(story) })
                #expect(!child.hasChanges)
                // A change in the child is tracked against the parent's set.
                story.topics = Set(story.topics.filter { $0.name != "c" })
                #expect(child.updatedObjects.count >= 1)
                child.rollback()
                #expect(Set(story.topics.map(\.name)) == ["b", "c"])
                #expect(!child.hasChanges)
            }
        }
    }

    /// A thread that runs a block of the parent can use the child with `performAndWait`
    /// (the child's reads and its save need the parent's queue, which that thread holds).
    @Test(arguments: [false, true])
    func childUsedFromInsideTheParentsQueue(async: Bool) throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("u1", "Ann", 20)], in: manager)
            let main = manager.mainContext
            let done = DispatchSemaphore(value: 0)
            let outcome = Mutex<Result<Bool, any Error>?>(nil)
            let work: @Sendable () -> Void = {
                let result = Result { () throws -> Bool in
                    let child = main.newChildContext()
                    try child.performAndWait { () throws in
                        let user = try #require(try child.existingObject(with: ids[0]) as? User)
                        user.name = "Ann B."
                        try child.save()
                    }
                    return main.hasChanges
                }
                outcome.withLock { $0 = result }
                done.signal()
            }
            if async {
                main.perform(work)
            } else {
                Thread.detachNewThread { main.performAndWait(work) }
            }
            #expect(done.wait(timeout: .now() + 20) == .success, "the child waited for the parent's queue")
            #expect(try outcome.withLock { $0 }?.get() == true)
        }
    }
}
