import Foundation
import PGDataKit
import Testing

/// What a context and some of its objects look like: each object's presence, flags,
/// values, relationships and `changedValues()`, and the context's inserted, updated and
/// deleted sets and `hasChanges`. Objects are named by their place in `objects`, so two
/// descriptions are equal exactly when the states are.
private func describe(_ context: ManagedObjectContext, _ objects: [ManagedObject]) throws -> String {
    func name(_ object: ManagedObject) -> String {
        objects.firstIndex { $0 === object }.map { "#\($0)" } ?? "other \(object.objectID)"
    }
    func show(_ value: Any?) -> String {
        guard let value else { return "nil" }
        if let object = value as? ManagedObject { return name(object) }
        if let many = value as? [ManagedObject] { return "[" + many.map(name).sorted().joined(separator: ",") + "]" }
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional { return mirror.children.first.map { show($0.value) } ?? "nil" }
        return "\(value)"
    }
    func names(_ set: Set<ManagedObject>) -> String { set.map(name).sorted().joined(separator: ",") }
    var lines = [
        "inserted: \(names(context.insertedObjects))", "updated: \(names(context.updatedObjects))",
        "deleted: \(names(context.deletedObjects))", "hasChanges: \(context.hasChanges)",
    ]
    for (index, object) in objects.enumerated() {
        var line = "#\(index) here: \(object.managedObjectContext === context) "
        line += "flags: \(object.isInserted) \(object.isUpdated) \(object.isDeleted) \(object.hasChanges)"
        for attribute in object.entity.attributes {
            line += " \(attribute.name)=\(show(try object.value(forKey: attribute.name)))"
        }
        if object.managedObjectContext === context {
            for relationship in object.entity.relationships {
                line += " \(relationship.name)=\(show(try object.value(forKey: relationship.name)))"
            }
        }
        let changes = object.changedValues().map { "\($0.key)=\(show($0.value))" }.sorted()
        line += " changed: " + changes.joined(separator: ",")
        lines.append(line)
    }
    return lines.joined(separator: "\n")
}

/// Saves users and posts, then fetches them into a fresh private context with an undo
/// manager: `body` gets the context (on its queue) and the users and posts by ID.
private func withSavedGraph(
    levelsOfUndo: Int = 0, _ body: (ContextManager, ManagedObjectContext, [String: User], [String: Post]) throws -> Void
) throws {
    try ExampleSchema.withManager { manager in
        let seed = manager.newPrivateContext()
        try seed.performAndWait {
            let ada = User(context: seed)
            ada.userID = "u1"
            ada.name = "Ada"
            ada.age = 36
            let bob = User(context: seed)
            bob.userID = "u2"
            bob.name = "Bob"
            for (id, owner) in [("p1", ada), ("p2", ada), ("p3", bob)] {
                let post = Post(context: seed)
                post.postID = id
                post.title = "title " + id
                post.user = owner
            }
            try seed.save()
        }
        let context = manager.newPrivateContext()
        try context.performAndWait {
            context.undoManager = ObjectUndoManager(levelsOfUndo: levelsOfUndo)
            let users = Dictionary(uniqueKeysWithValues: try context.fetchAll(User.self).map { ($0.userID, $0) })
            let posts = Dictionary(uniqueKeysWithValues: try context.fetchAll(Post.self).map { ($0.postID, $0) })
            try body(manager, context, users, posts)
        }
    }
}

/// Makes a change, then checks that undo puts the described state back exactly and redo
/// the changed one.
private func expectRoundTrip(
    _ context: ManagedObjectContext, _ objects: [ManagedObject], _ change: () throws -> Void,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let undo = try #require(context.undoManager)
    let before = try describe(context, objects)
    try change()
    let after = try describe(context, objects)
    #expect(after != before, "the change changed nothing", sourceLocation: sourceLocation)
    #expect(undo.canUndo, sourceLocation: sourceLocation)
    #expect(undo.undo(), sourceLocation: sourceLocation)
    #expect(try describe(context, objects) == before, "undo", sourceLocation: sourceLocation)
    #expect(undo.canRedo, sourceLocation: sourceLocation)
    #expect(undo.redo(), sourceLocation: sourceLocation)
    #expect(try describe(context, objects) == after, "redo", sourceLocation: sourceLocation)
    #expect(undo.undo(), sourceLocation: sourceLocation)
    #expect(try describe(context, objects) == before, "undo again", sourceLocation: sourceLocation)
}

@Suite("Undo manager: unsaved changes undone and redone exactly, groups, levels, clearing")
struct UndoManagerTests {
    @Test func attributeChangesRoundTrip() throws {
        try withSavedGraph { _, context, users, posts in
            let ada = try #require(users["u1"])
            let all: [ManagedObject] = [ada, try #require(users["u2"]), try #require(posts["p1"])]
            try expectRoundTrip(context, all) { ada.name = "Grace" }
            try expectRoundTrip(context, all) { ada.age = nil }
            try expectRoundTrip(context, all) { try ada.setValue(40, forKey: "age") }
            // On top of an unsaved change: undo goes back to that change, not the stored row.
            ada.name = "Grace"
            try expectRoundTrip(context, all) { ada.name = "Hopper" }
            #expect(ada.name == "Grace")
            #expect(ada.changedValues().keys.sorted() == ["name"])
            // Back to the stored value is a change too, and undoing it makes the object changed again.
            try expectRoundTrip(context, all) { ada.name = "Ada" }
        }
    }

    @Test func undoingAnInsertTakesTheObjectOutAndRedoPutsItBack() throws {
        try withSavedGraph { manager, context, users, _ in
            let ada = try #require(users["u1"])
            let undo = try #require(context.undoManager)
            let post = Post(context: context)
            let id = post.objectID
            #expect(context.insertedObjects == [post])
            #expect(undo.undo())
            #expect(context.insertedObjects.isEmpty)
            #expect(!context.hasChanges)
            #expect(post.managedObjectContext == nil)
            #expect(context.registeredObjects.allSatisfy { $0 !== post })
            #expect(undo.redo())
            #expect(context.insertedObjects == [post])
            #expect(post.objectID == id)
            #expect(post.managedObjectContext === context)
            #expect(context.registeredObjects.contains(post))

            // An insert with its values and relationship, in one group, round-trips.
            let objects: [ManagedObject] = [ada, post]
            try expectRoundTrip(context, objects) {
                undo.group {
                    post.postID = "p9"
                    post.title = "new"
                    post.user = ada
                }
            }
            try expectRoundTrip(context, objects + [try #require(users["u2"])]) {
                undo.group {
                    let other = User(context: context)
                    other.userID = "u9"
                }
            }
            post.postID = "p9"
            try context.save()
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts WHERE post_id = 'p9'", in: manager) == 1)
        }
    }

    @Test func undoingADeleteRestoresTheObjectAndItsRelationships() throws {
        try withSavedGraph { _, context, users, posts in
            let ada = try #require(users["u1"])
            let p1 = try #require(posts["p1"]), p2 = try #require(posts["p2"])
            let objects: [ManagedObject] = [ada, p1, p2, try #require(users["u2"])]
            // A cascade: the user's posts go with it, and come back with it.
            try expectRoundTrip(context, objects) { context.delete(ada) }
            #expect(ada.posts == [p1, p2])
            #expect(p1.user === ada && !p1.isDeleted)
            // A delete of an object inserted in this context takes it out; undo puts it back.
            let fresh = Post(context: context)
            fresh.postID = "p8"
            fresh.user = ada
            try expectRoundTrip(context, objects + [fresh]) { fresh.delete() }
            #expect(fresh.managedObjectContext === context && ada.posts.contains(fresh))
        }
    }

    @Test func undoingADeleteRestoresNullifiedRelationships() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let team = Team(context: context)
                team.name = "blue"
                let members = (0..<2).map { index in
                    let member = Member(context: context)
                    member.name = "m\(index)"
                    member.team = team
                    return member
                }
                try context.save()
                context.undoManager = ObjectUndoManager()
                try expectRoundTrip(context, [team] + members) { context.delete(team) }
                #expect(members.allSatisfy { $0.team === team })
                #expect(team.members == Set(members))
            }
        }
    }

    @Test func relationshipChangesKeepBothSidesConsistent() throws {
        try withSavedGraph { _, context, users, posts in
            let ada = try #require(users["u1"]), bob = try #require(users["u2"])
            let p1 = try #require(posts["p1"]), p2 = try #require(posts["p2"]), p3 = try #require(posts["p3"])
            let objects: [ManagedObject] = [ada, bob, p1, p2, p3]
            // To-one, seen from the to-many sides too.
            try expectRoundTrip(context, objects) { p1.user = bob }
            #expect(ada.posts == [p1, p2] && bob.posts == [p3])
            try expectRoundTrip(context, objects) { p1.user = nil }
            // To-many, through the inverse: one group for every member it moves.
            try expectRoundTrip(context, objects) { bob.posts = [p1, p3] }
            #expect(ada.posts == [p1, p2] && bob.posts == [p3])
            try expectRoundTrip(context, objects) { try ada.setValue([p3], forKey: "posts") }
            try expectRoundTrip(context, objects) { ada.posts.insert(p3) }
        }
    }

    @Test func manyToManyAndOneToOneChangesRoundTripOnBothSides() throws {
        try ManyToManySchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let story = Story(context: context)
                story.code = "s1"
                let swift = Topic(context: context)
                swift.name = "swift"
                let sql = Topic(context: context)
                sql.name = "sql"
                story.topics = [swift]
                let ada = Person(context: context)
                ada.name = "ada"
                let bob = Person(context: context)
                bob.name = "bob"
                let passport = Passport(context: context)
                passport.number = "P1"
                passport.holder = ada
                try context.save()
                context.undoManager = ObjectUndoManager()
                let objects: [ManagedObject] = [story, swift, sql, ada, bob, passport]
                try expectRoundTrip(context, objects) { story.topics.insert(sql) }
                try expectRoundTrip(context, objects) { swift.stories = [] }
                try expectRoundTrip(context, objects) { ada.following.insert(bob) }
                try expectRoundTrip(context, objects) { bob.passport = passport }
                #expect(passport.holder === ada && ada.passport === passport && bob.passport == nil)
                try expectRoundTrip(context, objects) { context.delete(swift) }
                #expect(story.topics == [swift])

                // What is left after undoing is what a save writes.
                story.topics.insert(sql)
                ada.following.insert(bob)
                #expect(try #require(context.undoManager).undo())
                try context.save()
                #expect(try ManyToManySchema.storyTopics(in: manager) == ["s1-sql", "s1-swift"])
            }
        }
    }

    @Test func groupsAreUndoneAsOne() throws {
        try withSavedGraph { _, context, users, posts in
            let ada = try #require(users["u1"]), p1 = try #require(posts["p1"])
            let undo = try #require(context.undoManager)
            let objects: [ManagedObject] = [ada, p1]
            let before = try describe(context, objects)
            undo.beginUndoGrouping()
            ada.name = "Grace"
            undo.beginUndoGrouping()
            #expect(undo.groupingLevel == 2)
            p1.title = "changed"
            undo.endUndoGrouping()
            // Inside an open group there is nothing to undo yet.
            #expect(!undo.canUndo)
            #expect(!undo.undo())
            context.delete(p1)
            undo.endUndoGrouping()
            #expect(undo.groupingLevel == 0)
            let after = try describe(context, objects)
            #expect(undo.undo())
            #expect(try describe(context, objects) == before)
            #expect(!undo.canUndo)
            #expect(undo.redo())
            #expect(try describe(context, objects) == after)

            // The closure form closes its group when the closure throws.
            struct Stop: Error {}
            #expect(throws: Stop.self) {
                try undo.group {
                    ada.age = 1
                    throw Stop()
                }
            }
            #expect(undo.groupingLevel == 0)
            #expect(undo.undo())
            #expect(ada.age == 36)
        }
    }

    @Test func levelsDropTheOldestGroups() throws {
        try withSavedGraph(levelsOfUndo: 2) { _, context, users, _ in
            let ada = try #require(users["u1"])
            let undo = try #require(context.undoManager)
            ada.name = "one"
            ada.name = "two"
            ada.name = "three"
            #expect(undo.undo())
            #expect(undo.undo())
            #expect(!undo.undo())
            #expect(ada.name == "one")
            // Lowering the limit drops the oldest at once.
            #expect(undo.redo() && undo.redo())
            undo.levelsOfUndo = 1
            #expect(undo.undo())
            #expect(!undo.undo())
            #expect(ada.name == "two")
        }
    }

    @Test func aNewChangeClearsRedoAndNoOpsRecordNothing() throws {
        try withSavedGraph { _, context, users, posts in
            let ada = try #require(users["u1"]), p1 = try #require(posts["p1"])
            let undo = try #require(context.undoManager)
            // Nothing to undo or redo: no-ops answering false.
            #expect(!undo.canUndo && !undo.canRedo)
            #expect(!undo.undo() && !undo.redo())
            undo.endUndoGrouping()  // without a begin: nothing
            #expect(undo.groupingLevel == 0)
            // Setting what is there, and reading relationships, record nothing.
            ada.name = "Ada"
            p1.user = ada
            _ = ada.posts
            _ = p1.user
            undo.group {}
            #expect(!undo.canUndo)

            ada.name = "Grace"
            #expect(undo.undo())
            #expect(undo.canRedo)
            ada.age = 1
            #expect(!undo.canRedo)
            #expect(!undo.redo())
            #expect(ada.name == "Ada" && ada.age == 1)
        }
    }

    @Test func saveRollbackAndResetClearTheStacks() throws {
        try withSavedGraph { _, context, users, _ in
            let ada = try #require(users["u1"])
            let undo = try #require(context.undoManager)
            ada.name = "Grace"
            try context.save()
            #expect(!undo.canUndo)
            ada.name = "Hopper"
            ada.name = "Ada"
            #expect(undo.undo())
            #expect(undo.canRedo)
            context.rollback()
            #expect(!undo.canUndo && !undo.canRedo)
            let user = try #require(try context.fetchAll(User.self).first { $0.userID == "u1" })
            user.name = "Lovelace"
            context.reset()
            #expect(!undo.canUndo)
            #expect(context.undoManager === undo)
            // A save with nothing to write clears it too.
            let again = try #require(try context.fetchAll(User.self).first { $0.userID == "u1" })
            again.name = "X"
            again.name = "Grace"
            try context.save()
            #expect(!undo.canUndo)
            // Changes after the reset are recorded again.
            again.age = 2
            #expect(undo.undo())
            #expect(!again.hasChanges)
        }
    }

    @Test func aSaveAfterUndoWritesExactlyWhatIsLeft() throws {
        try withSavedGraph { manager, context, users, posts in
            let ada = try #require(users["u1"]), bob = try #require(users["u2"])
            let p3 = try #require(posts["p3"])
            let undo = try #require(context.undoManager)
            ada.name = "Grace"
            ada.age = 99
            p3.user = ada
            undo.group {
                let carl = User(context: context)
                carl.userID = "u3"
            }
            context.delete(bob)
            #expect(undo.undo())  // bob back
            #expect(undo.undo())  // no u3
            #expect(undo.undo())  // p3 back with bob
            #expect(undo.undo())  // age back
            #expect(context.updatedObjects == [ada])
            #expect(ada.changedValues().keys.sorted() == ["name"])
            try context.save()
            let rows = try manager.coordinator.pool.withConnection { connection in
                try connection.query("SELECT user_id, name, age FROM users ORDER BY user_id").map {
                    "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String?.self, at: 1) ?? "-") \(try $0.decode(Int?.self, at: 2).map(String.init) ?? "-")"
                }
            }
            #expect(rows == ["u1 Grace 36", "u2 Bob -"])
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts p JOIN users u ON u.id = p.user_id WHERE u.user_id = 'u2'", in: manager) == 1)
        }
    }

    @Test func aChildSaveClearsTheParentsUndoManager() throws {
        try withSavedGraph { _, context, users, _ in
            let ada = try #require(users["u1"])
            let undo = try #require(context.undoManager)
            ada.name = "Grace"
            let child = context.newChildContext()
            try child.performAndWait {
                child.undoManager = ObjectUndoManager()
                let user = try #require(try child.existingObject(with: ada.objectID) as? User)
                user.age = 50
                #expect(child.undoManager?.canUndo == true)
                try child.save()
                #expect(child.undoManager?.canUndo == false)
            }
            #expect(!undo.canUndo)
            #expect(ada.age == 50 && ada.name == "Grace")
        }
    }

    @Test func withoutAnUndoManagerNothingIsRecordedAndAManagerMovesBetweenContexts() throws {
        try withSavedGraph { manager, context, users, _ in
            let undo = try #require(context.undoManager)
            context.undoManager = nil
            try #require(users["u1"]).name = "Grace"
            #expect(!undo.canUndo)
            let other = manager.newPrivateContext()
            other.performAndWait {
                other.undoManager = undo
                let user = User(context: other)
                user.userID = "u7"
                #expect(undo.undo())  // the user ID
                #expect(other.insertedObjects == [user] && user.userID == "")
                #expect(undo.undo())  // the insert
                #expect(!other.hasChanges)
            }
        }
    }

    @Test func anImportIsUndoneAsOneAndAFailedImportLeavesNothingToUndo() throws {
        try withSavedGraph { _, context, users, _ in
            let ada = try #require(users["u1"])
            let undo = try #require(context.undoManager)
            let before = try describe(context, [ada])
            let records = try JSONDecoder().decode(
                [JSONValue].self, from: Data(#"[{"UserID": "u1", "Name": "Imported"}, {"UserID": "u5", "Name": "New"}]"#.utf8))
            try undo.group {
                _ = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) { record, user in
                    user.name = record["Name"]?.stringValue
                }
            }
            #expect(ada.name == "Imported" && context.insertedObjects.count == 1)
            #expect(undo.undo())
            #expect(!undo.canUndo)
            #expect(try describe(context, [ada]) == before)

            // A failing import puts the context back itself; what it recorded undoes to
            // that same state, never to the import's objects.
            struct Stop: Error {}
            #expect(throws: ImportError.self) {  // (naming the record and the setter's error)
                _ = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) { record, user in
                    if user.userID == "u5" { throw Stop() }
                    user.name = record["Name"]?.stringValue
                }
            }
            #expect(try describe(context, [ada]) == before)
            #expect(!undo.canUndo, "a failed import left a group to undo")
            #expect(!context.hasChanges)

            // Without a group of the caller's, the import call is one group of its own.
            _ = try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) { record, user in
                user.name = record["Name"]?.stringValue
            }
            #expect(ada.name == "Imported" && context.insertedObjects.count == 1)
            #expect(undo.undo())
            #expect(!undo.canUndo)
            #expect(try describe(context, [ada]) == before)
        }
    }

    /// An import that points a to-one relationship at a row the context holds no object
    /// of (by its key alone) is undone too.
    @Test func anImportsLinkByKeyIsUndone() throws {
        try withSavedGraph { manager, _, _, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                context.undoManager = ObjectUndoManager()
                let post = try #require(try Post.fetch(in: context, where: "postID == %@", "p3").first)
                #expect(post.user?.userID == "u2")
                let adaRegistered = context.registeredObjects.contains { object in
                    guard let user = object as? User else { return false }
                    return user.userID == "u1"
                }
                #expect(!adaRegistered)
                let link = ObjectMap<Post>.relationship("UserID", to: \.user, matching: \User.userID)
                let records = try JSONDecoder().decode([JSONValue].self, from: Data(#"[{"PostID": "p3", "UserID": "u1"}]"#.utf8))
                _ = try Post.insertOrUpdate(records, uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context, relationships: [link])
                #expect(post.user?.userID == "u1")
                #expect(context.undoManager?.undo() == true)
                #expect(post.user?.userID == "u2")
                #expect(!context.hasChanges)
            }
        }
    }

    /// The example of ContextsAndTransactions.md ("Undo and redo").
    @Test func documentedExample() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            context.undoManager = ObjectUndoManager(levelsOfUndo: 20)
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "u1"
                try context.save()                // nothing left to undo
                user.name = "Ada"                 // a group of its own
                context.undoManager?.group {      // one group for both
                    user.name = "Grace"
                    user.age = 45
                }
                context.undoManager?.undo()       // name "Ada", age nil
                context.undoManager?.redo()       // name "Grace", age 45
                context.undoManager?.undo()
                try context.save()                // writes name "Ada"
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users WHERE name = 'Ada' AND age IS NULL", in: manager) == 1)
        }
    }
}
