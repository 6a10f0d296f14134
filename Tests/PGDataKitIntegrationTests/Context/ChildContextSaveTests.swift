import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A child context's save pushes into its parent, not the database (issue 30).
@Suite("Child contexts: saving into the parent")
struct ChildContextSaveTests {
    /// The child's insert, update and delete become the parent's unsaved changes, under
    /// the same IDs and pointing at the parent's instances; the database and the change
    /// log see nothing until the parent saves, which writes them with one change record.
    @Test(arguments: ParentKind.allCases)
    func saveMovesChangesIntoTheParentNotTheDatabase(_ kind: ParentKind) throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("u1", "Ann", 20), ("u2", "Bob", 30)], in: manager)
            let records = try ExampleSchema.count("SELECT count(*) FROM pgdatakit_changes", in: manager)
            let parent = kind.context(of: manager)
            let child = parent.newChildContext()
            let heard = Mutex<[ContextChanges]>([])
            let token = child.observeDidSave { changes in heard.withLock { $0.append(changes) } }
            defer { token.cancel() }
            let (userID, postID) = try child.performAndWait { () throws -> (ObjectID, ObjectID) in
                let u1 = try #require(try child.existingObject(with: ids[0]) as? User)
                u1.name = "Ann B."
                let u2 = try #require(try child.existingObject(with: ids[1]) as? User)
                child.delete(u2)
                let u3 = User(context: child)
                u3.userID = "u3"
                u3.age = 3
                let post = Post(context: child)
                post.postID = "p"
                post.user = u3
                try child.save()
                #expect(!child.hasChanges && child.insertedObjects.isEmpty && child.updatedObjects.isEmpty)
                #expect(u3.objectID.isTemporaryID && !u3.isInserted && u3.managedObjectContext === child)
                #expect(u2.isDeleted && u2.managedObjectContext == nil)
                #expect(u1.name == "Ann B." && !u1.hasChanges)
                return (u3.objectID, post.objectID)
            }
            // The child's did-save observers heard what was pushed, under the parent's IDs.
            let pushed = try #require(heard.withLock { $0 }.first)
            #expect(pushed.inserted == [userID, postID] && pushed.updated == [ids[0]] && pushed.deleted == [ids[1]])
            #expect(pushed.changedKeys[ids[0]] == ["name"])
            try parent.performAndWait { () throws in
                #expect(parent.hasChanges)
                #expect(Set(parent.insertedObjects.map(\.objectID)) == [userID, postID])
                #expect(parent.updatedObjects.map(\.objectID) == [ids[0]])
                #expect(parent.deletedObjects.map(\.objectID) == [ids[1]])
                let user = try #require(try parent.existingObject(with: userID) as? User)
                let post = try #require(try parent.existingObject(with: postID) as? Post)
                #expect(post.user === user && user.managedObjectContext === parent)
                #expect(user.userID == "u3" && user.age == 3 && user.posts == [post])
                #expect((try parent.existingObject(with: ids[0]) as? User)?.name == "Ann B.")
            }
            // Nothing reached the database.
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 2)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'Ann B.'", in: manager) == 0)
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts", in: manager) == 0)
            #expect(try ExampleSchema.count("SELECT count(*) FROM pgdatakit_changes", in: manager) == records)
            let fresh = manager.newPrivateContext()
            try fresh.performAndWait { () throws in #expect(try User.count(in: fresh) == 2) }

            try parent.performAndWait { try parent.save() }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 2)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'Ann B.'", in: manager) == 1)
            #expect(
                try ExampleSchema.count(
                    "SELECT count(*) FROM posts p JOIN users u ON u.id = p.user_id WHERE u.user_id = 'u3'", in: manager) == 1)
            #expect(try ExampleSchema.count("SELECT count(*) FROM pgdatakit_changes", in: manager) == records + 1)
        }
    }

    /// Relationships set in the child arrive in the parent between the parent's own
    /// instances: a to-many set (one member removed, one added, one new), a to-one
    /// reference, and after the parent's save the rows hold them.
    @Test func toOneAndToManyChangesArriveOnTheParentsInstances() throws {
        try ExampleSchema.withManager { manager in
            let setup = manager.newPrivateContext()
            let (teamID, m1ID, m2ID) = try setup.performAndWait { () throws -> (ObjectID, ObjectID, ObjectID) in
                let team = Team(context: setup)
                team.name = "red"
                let m1 = Member(context: setup)
                m1.name = "m1"
                m1.team = team
                let m2 = Member(context: setup)
                m2.name = "m2"
                try setup.save()
                return (team.objectID, m1.objectID, m2.objectID)
            }
            let main = manager.mainContext
            let child = main.newChildContext()
            let m3ID = try child.performAndWait { () throws -> ObjectID in
                let team = try #require(try child.existingObject(with: teamID) as? Team)
                let m2 = try #require(try child.existingObject(with: m2ID) as? Member)
                let m3 = Member(context: child)
                m3.name = "m3"
                team.members = [m2, m3]
                try child.save()
                return m3.objectID
            }
            try main.performAndWait { () throws in
                let team = try #require(try main.existingObject(with: teamID) as? Team)
                let members = try [m1ID, m2ID, m3ID].map { try #require(try main.existingObject(with: $0) as? Member) }
                #expect(members[0].team == nil)
                #expect(members[1].team === team && members[2].team === team)
                #expect(Set(team.members.map(\.name)) == ["m2", "m3"])
                try main.save()
            }
            #expect(
                try ExampleSchema.count(
                    "SELECT count(*) FROM members m JOIN teams t ON t.id = m.team_id WHERE t.name = 'red'", in: manager) == 2)
            #expect(try ExampleSchema.count("SELECT count(*) FROM members WHERE team_id IS NULL", in: manager) == 1)
        }
    }

    /// Many-to-many sets (with a new member and a removed one), a set within one entity,
    /// and a one-to-one partner set in the child arrive in the parent; its save writes
    /// the join rows.
    @Test func manyToManyAndOneToOneChangesArriveInTheParent() throws {
        try ManyToManySchema.withManager { manager in
            let setup = manager.newPrivateContext()
            let (storyID, aliceID, bobID) = try setup.performAndWait { () throws -> (ObjectID, ObjectID, ObjectID) in
                let story = Story(context: setup)
                story.code = "s1"
                for name in ["a", "b"] {
                    let topic = Topic(context: setup)
                    topic.name = name
                    if name == "a" { story.topics.insert(topic) }
                }
                let alice = Person(context: setup)
                alice.name = "alice"
                let bob = Person(context: setup)
                bob.name = "bob"
                try setup.save()
                return (story.objectID, alice.objectID, bob.objectID)
            }
            let main = manager.mainContext
            let child = main.newChildContext()
            try child.performAndWait { () throws in
                let story = try #require(try child.existingObject(with: storyID) as? Story)
                let b = try #require(try Topic.first(in: child, where: "name == 'b'"))
                let c = Topic(context: child)
                c.name = "c"
                story.topics = [b, c]
                let alice = try #require(try child.existingObject(with: aliceID) as? Person)
                let bob = try #require(try child.existingObject(with: bobID) as? Person)
                alice.following = [bob]
                let passport = Passport(context: child)
                passport.number = "P-1"
                passport.holder = alice
                try child.save()
                #expect(!child.hasChanges)
                #expect(Set(story.topics.map(\.name)) == ["b", "c"] && bob.followers == [alice] && alice.passport === passport)
            }
            try main.performAndWait { () throws in
                let story = try #require(try main.existingObject(with: storyID) as? Story)
                #expect(Set(story.topics.map(\.name)) == ["b", "c"])
                #expect(story.topics.allSatisfy { $0.managedObjectContext === main && $0.stories.contains(story) })
                let alice = try #require(try main.existingObject(with: aliceID) as? Person)
                let bob = try #require(try main.existingObject(with: bobID) as? Person)
                #expect(alice.following == [bob] && bob.followers == [alice])
                #expect(alice.passport?.number == "P-1" && alice.passport?.holder === alice)
                try main.save()
            }
            #expect(try ManyToManySchema.storyTopics(in: manager) == ["s1-b", "s1-c"])
            #expect(
                try ManyToManySchema.pairs(
                    "SELECT a.name, b.name FROM follows f JOIN people a ON a.id = f.follower_id JOIN people b ON b.id = f.followed_id",
                    in: manager) == ["alice-bob"])
        }
    }

    /// A child of a child pushes into its parent only; that child's save moves the
    /// changes one more level up; the main context's save writes them.
    @Test func aGrandchildPushesOneLevelAtATime() throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("u1", "Ann", 20)], in: manager)
            let main = manager.mainContext
            let child = main.newChildContext()
            let grandchild = child.newChildContext()
            #expect(grandchild.parent === child && child.parent === main)
            let newID = try grandchild.performAndWait { () throws -> ObjectID in
                (try grandchild.existingObject(with: ids[0]) as? User)?.age = 21
                let user = User(context: grandchild)
                user.userID = "g"
                try grandchild.save()
                return user.objectID
            }
            try child.performAndWait { () throws in
                #expect(Set(child.insertedObjects.map(\.objectID)) == [newID])
                #expect((try child.existingObject(with: ids[0]) as? User)?.age == 21)
            }
            main.performAndWait { #expect(!main.hasChanges) }
            try child.performAndWait { try child.save() }
            try main.performAndWait { () throws in
                #expect(Set(main.insertedObjects.map(\.objectID)) == [newID])
                #expect((try main.existingObject(with: ids[0]) as? User)?.age == 21)
                try main.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE user_id = 'g' OR age = 21", in: manager) == 2)
            // The grandchild reads the saved state through both levels.
            try grandchild.performAndWait { () throws in
                #expect(try User.count(in: grandchild) == 2)
            }
        }
    }

    /// `rollback()` and `reset()` in the child drop its changes only, and dropping a
    /// child with changes leaves the parent as it was.
    @Test func discardingTheChildLeavesTheParentUntouched() throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("u1", "Ann", 20)], in: manager)
            let main = manager.mainContext
            try main.performAndWait { (try main.existingObject(with: ids[0]) as? User)?.name = "parent's" }
            var child: ManagedObjectContext? = main.newChildContext()
            try child?.performAndWait { () throws in
                guard let child else { return }
                let user = try #require(try child.existingObject(with: ids[0]) as? User)
                #expect(user.name == "parent's")
                user.name = "child's"
                user.age = 99
                _ = User(context: child)
                child.rollback()
                #expect(user.name == "parent's" && user.age == 20 && !child.hasChanges)
                user.name = "again"
                child.reset()
                #expect(!child.hasChanges)
                let reread = try #require(try child.existingObject(with: ids[0]) as? User)
                #expect(reread !== user && reread.name == "parent's")
                reread.name = "dropped"
                User(context: child).userID = "dropped"
            }
            child = nil
            try main.performAndWait { () throws in
                #expect(main.insertedObjects.isEmpty && main.deletedObjects.isEmpty)
                let user = try #require(try main.existingObject(with: ids[0]) as? User)
                #expect(user.name == "parent's" && user.age == 20)
                #expect(main.updatedObjects == [user])
            }
        }
    }

    /// A save that cannot be applied (the parent deleted an object the child changed, or
    /// one a relationship set in the child points at) throws `objectGoneFromParent` and
    /// changes nothing in the parent; the child keeps its changes.
    @Test(arguments: ["edited", "related"])
    func aSaveTheParentCannotTakeChangesNothing(_ what: String) throws {
        try ExampleSchema.withManager { manager in
            let ids = try saveUsers([("u1", "Ann", 20), ("u2", "Bob", 30)], in: manager)
            let main = manager.mainContext
            let child = main.newChildContext()
            let gone = ids[what == "edited" ? 0 : 1]
            try child.performAndWait { () throws in
                let u1 = try #require(try child.existingObject(with: ids[0]) as? User)
                u1.name = "child's"
                let post = Post(context: child)
                post.postID = "p"
                post.user = try child.existingObject(with: ids[1]) as? User
                User(context: child).userID = "new"
            }
            try main.performAndWait { () throws in
                main.delete(try main.existingObject(with: gone))
            }
            try child.performAndWait { () throws in
                #expect(throws: ChildContextError.objectGoneFromParent(gone, call: "save()")) { try child.save() }
                #expect(child.hasChanges && child.insertedObjects.count == 2)
                #expect(child.updatedObjects.compactMap { ($0 as? User)?.name } == ["child's"])
            }
            try main.performAndWait { () throws in
                #expect(main.insertedObjects.isEmpty && main.deletedObjects.map(\.objectID) == [gone])
                #expect(main.updatedObjects.isEmpty)
                let u2 = try main.existingObject(with: ids[what == "edited" ? 1 : 0]) as? User
                #expect(u2?.name == (what == "edited" ? "Bob" : "Ann") && u2?.posts.isEmpty == true)
            }
            // Reset, the child reads the parent's state again and saves fine.
            try child.performAndWait { () throws in
                child.reset()
                #expect(throws: ManagedObjectError.objectDeleted(gone)) { try child.existingObject(with: gone) }
                #expect(try User.count(in: child) == 1)
                try child.save()
            }
        }
    }

    /// An object the parent inserted and has saved since the child read it is still
    /// found by the temporary ID the child holds; objects the child inserted and deleted
    /// again never reach the parent.
    @Test func idsThatChangedOrNeverLeftTheChild() throws {
        try ExampleSchema.withManager { manager in
            let main = manager.mainContext
            let temporaryID = main.performAndWait { () -> ObjectID in
                let user = User(context: main)
                user.userID = "early"
                return user.objectID
            }
            let child = main.newChildContext()
            let postID = try child.performAndWait { () throws -> ObjectID in
                let user = try #require(try child.existingObject(with: temporaryID) as? User)
                #expect(user.userID == "early")
                let post = Post(context: child)
                post.postID = "p"
                let doomed = User(context: child)
                doomed.userID = "doomed"
                post.user = doomed
                child.delete(doomed)
                #expect(post.isDeleted && child.insertedObjects.isEmpty)  // (the cascade rule)
                return post.objectID
            }
            let permanentID = try main.performAndWait { () throws -> ObjectID in
                let user = try main.existingObject(with: temporaryID)
                try main.save()
                return user.objectID
            }
            #expect(!permanentID.isTemporaryID)
            try child.performAndWait { () throws in
                let user = try #require(try child.existingObject(with: temporaryID) as? User)
                user.name = "renamed"
                try child.save()
            }
            try main.performAndWait { () throws in
                let user = try #require(try main.existingObject(with: permanentID) as? User)
                #expect(user.name == "renamed" && main.updatedObjects == [user])
                #expect(main.insertedObjects.isEmpty)
                #expect(throws: ManagedObjectError.objectNotFound(postID)) { try main.existingObject(with: postID) }
                try main.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'renamed'", in: manager) == 1)
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE user_id = 'doomed'", in: manager) == 0)
        }
    }
}
