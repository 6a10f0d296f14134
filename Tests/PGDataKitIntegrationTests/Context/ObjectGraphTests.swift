import Foundation
import PGDataKit
import Testing

@Suite("Object graph: attributes, relationships, delete rules")
struct ObjectGraphTests {
    @Test func everyAttributeTypeRoundTripsThroughANewContext() throws {
        try ExampleSchema.withManager { manager in
            let uuid = UUID()
            let date = Date(timeIntervalSince1970: 1_700_000_000.123456)
            let decimal = try #require(Decimal(string: "12345678901234567890.123456789"))
            let json: JSONValue = ["a": [1, "two", nil], "b": true]
            let writer = manager.newPrivateContext()
            let ids = try writer.performAndWait { () throws -> [ObjectID] in
                let full = Sample(context: writer)
                full.text = "Ünïcødé 🚀 '; DROP TABLE samples; --"
                full.optionalText = ""
                full.int = Int.max
                full.int64 = Int64.min
                full.int32 = Int32.max
                full.int16 = Int16.min
                full.double = -Double.infinity
                full.float = 1.5
                full.decimal = decimal
                full.flag = true
                full.date = date
                full.uuid = uuid
                full.data = Data((0...255).map(UInt8.init))
                full.json = json
                full.optionalInt = 0
                full.optionalDouble = 0.1
                full.optionalDecimal = decimal
                full.optionalFlag = false
                full.optionalDate = date
                full.optionalUUID = uuid
                full.optionalData = Data()
                full.optionalJSON = .null
                let empty = Sample(context: writer)
                try writer.save()
                return [full.objectID, empty.objectID]
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let full = try #require(try reader.existingObject(with: ids[0]) as? Sample)
                #expect(full.text == "Ünïcødé 🚀 '; DROP TABLE samples; --")
                #expect(full.optionalText == "")
                #expect(full.int == Int.max)
                #expect(full.int64 == Int64.min)
                #expect(full.int32 == Int32.max)
                #expect(full.int16 == Int16.min)
                #expect(full.double == -Double.infinity)
                #expect(full.float == 1.5)
                #expect(full.decimal == decimal)
                #expect(full.flag)
                #expect(full.date == date)
                #expect(full.uuid == uuid)
                #expect(full.data == Data((0...255).map(UInt8.init)))
                #expect(full.json == json)
                #expect(full.optionalInt == 0)
                #expect(full.optionalDouble == 0.1)
                #expect(full.optionalDecimal == decimal)
                #expect(full.optionalFlag == false)
                #expect(full.optionalDate == date)
                #expect(full.optionalUUID == uuid)
                #expect(full.optionalData == Data())
                #expect(full.optionalJSON == .null)
                let empty = try #require(try reader.existingObject(with: ids[1]) as? Sample)
                #expect(empty.optionalText == nil)
                #expect(empty.optionalInt == nil)
                #expect(empty.optionalDecimal == nil)
                #expect(empty.optionalDate == nil)
                #expect(empty.optionalJSON == nil)
                #expect(empty.text == "")
                #expect(empty.json == .null)
            }
        }
    }

    @Test func relationshipsStayInSyncOnBothSides() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            let userID = try context.performAndWait { () throws -> ObjectID in
                let user = User(context: context)
                user.userID = "u1"
                let first = Post(context: context)
                first.postID = "p1"
                first.user = user
                #expect(user.posts == [first])
                let second = Post()
                second.postID = "p2"
                user.posts.insert(second)  // inserted into the context with it
                #expect(second.user === user)
                #expect(second.managedObjectContext === context)
                #expect(user.posts == [first, second])
                first.user = nil
                #expect(user.posts == [second])
                first.user = user
                try context.save()
                return user.objectID
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts WHERE user_id = $1", [userID.primaryKey], in: manager) == 2)

            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let user = try #require(try reader.existingObject(with: userID) as? User)
                let before = manager.coordinator.statementCount
                let posts = user.posts
                #expect(posts.map(\.postID).sorted() == ["p1", "p2"])
                #expect(manager.coordinator.statementCount - before == 1)  // one query for the set
                _ = user.posts
                #expect(manager.coordinator.statementCount - before == 1)  // then cached
                for post in posts { #expect(post.user === user) }
                // Moving a post to another user moves it between the sets.
                let other = User(context: reader)
                other.userID = "u2"
                let moved = try #require(posts.first { $0.postID == "p1" })
                moved.user = other
                #expect(user.posts.map(\.postID) == ["p2"])
                #expect(other.posts.map(\.postID) == ["p1"])
                try reader.save()
            }
            #expect(try ExampleSchema.count(
                "SELECT count(*) FROM posts p JOIN users u ON u.id = p.user_id WHERE u.user_id = 'u2'", in: manager) == 1)
        }
    }

    @Test func toOneLoadsLazilyWithOneQuery() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            let postID = try context.performAndWait { () throws -> ObjectID in
                let user = User(context: context)
                user.userID = "lazy"
                user.name = "Lazy Owner"
                let post = Post(context: context)
                post.postID = "lp"
                post.user = user
                try context.save()
                return post.objectID
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let post = try #require(try reader.existingObject(with: postID) as? Post)
                let before = manager.coordinator.statementCount
                #expect(post.user?.name == "Lazy Owner")
                #expect(manager.coordinator.statementCount - before == 1)
                #expect(post.user?.posts.contains(post) == true)
            }
        }
    }

    @Test func cascadeDeletesRelatedObjects() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "doomed"
                for index in 0..<3 {
                    let post = Post(context: context)
                    post.postID = "doomed-\(index)"
                    post.user = user
                }
                let survivor = User(context: context)
                survivor.userID = "survivor"
                let kept = Post(context: context)
                kept.postID = "kept"
                kept.user = survivor
                try context.save()
            }
            let deleter = manager.newPrivateContext()
            try deleter.performAndWait {
                let user = try #require(try deleter.fetchAll(User.self).first { $0.userID == "doomed" })
                user.delete()
                #expect(user.isDeleted)
                #expect(deleter.deletedObjects.count == 4)
                try deleter.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM users", in: manager) == 1)
            #expect(try ExampleSchema.count("SELECT count(*) FROM posts", in: manager) == 1)
        }
    }

    @Test func nullifyClearsTheOtherSide() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let team = Team(context: context)
                team.name = "red"
                for name in ["a", "b"] {
                    let member = Member(context: context)
                    member.name = name
                    member.team = team
                }
                try context.save()
            }
            let deleter = manager.newPrivateContext()
            try deleter.performAndWait {
                let team = try #require(try deleter.fetchAll(Team.self).first)
                let members = team.members
                #expect(members.count == 2)
                deleter.delete(team)
                for member in members {
                    #expect(member.team == nil)
                    #expect(member.isUpdated)
                }
                try deleter.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM teams", in: manager) == 0)
            #expect(try ExampleSchema.count("SELECT count(*) FROM members WHERE team_id IS NULL", in: manager) == 2)
        }
    }

    @Test func denyRefusesTheDeleteAtSave() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let vault = Vault(context: context)
                vault.name = "v"
                let item = Item(context: context)
                item.name = "gold"
                item.vault = vault
                try context.save()

                vault.delete()
                do {
                    try context.save()
                    Issue.record("expected the deny rule to refuse")
                } catch let error as ManagedObjectError {
                    #expect(error.code == .deleteDenied, "\(error)")
                    #expect(error.entity == "Vault")
                    #expect(error.key == "items")
                    #expect(error.relatedCount == 1)
                }
                #expect(context.hasChanges)
                // Removing the item first lets the delete through.
                item.delete()
                try context.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM vaults", in: manager) == 0)
        }
    }

    @Test func objectStateAndChangeTracking() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                user.userID = "state"
                #expect(user.isInserted)
                #expect(user.objectID.isTemporaryID)
                #expect(context.hasChanges)
                try context.save()
                #expect(!user.isInserted)
                #expect(!user.objectID.isTemporaryID)
                #expect(user.objectID.primaryKey != nil)
                #expect(!context.hasChanges)

                user.name = "Ada"
                #expect(user.isUpdated)
                #expect(context.updatedObjects == [user])
                let changes = user.changedValues()
                #expect(changes.keys.sorted() == ["name"])
                #expect(changes["name"] as? String == "Ada")
                let committed = user.committedValues(forKeys: ["name", "userID"])
                #expect(committed["userID"] as? String == "state")
                #expect(committed["name"].map { $0 == nil } == true)
                user.name = nil  // back to the committed value
                #expect(!user.isUpdated)
                #expect(!context.hasChanges)

                user.age = 40
                context.rollback()
                #expect(user.age == nil)
                #expect(!context.hasChanges)
                #expect(context.registeredObjects.contains(user))
                context.reset()
                #expect(context.registeredObjects.isEmpty)
            }
        }
    }

    @Test func dynamicAccessChecksKeysAndTypes() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let user = User(context: context)
                try user.setValue("dyn", forKey: "userID")
                try user.setValue(Int32(41), forKey: "age")  // integers convert when they fit
                #expect(user.age == 41)
                #expect(try user.value(forKey: "userID") as? String == "dyn")
                do {
                    try user.setValue("forty", forKey: "age")
                    Issue.record("expected a type mismatch")
                } catch let error as ManagedObjectError {
                    #expect(error == .typeMismatch(entity: "User", key: "age", expected: "Int?", actual: "String"))
                    #expect(error.description.contains("User.age"))
                }
                #expect(throws: ManagedObjectError.typeMismatch(entity: "User", key: "userID", expected: "String", actual: "nil")) {
                    try user.setValue(nil, forKey: "userID")
                }
                #expect(throws: ManagedObjectError.unknownKey(entity: "User", key: "nickname")) {
                    try user.setValue("x", forKey: "nickname")
                }
                let post = Post(context: context)
                try post.setValue("p", forKey: "postID")
                try post.setValue(user, forKey: "user")
                #expect(user.posts == [post])
                #expect(throws: ManagedObjectError.self) { try post.setValue(post, forKey: "user") }
                try context.save()
            }
        }
    }

    /// Relating objects of two contexts through `setValue(_:forKey:)` is a thrown
    /// error, not a trap.
    @Test func relatingObjectsOfAnotherContextThrows() throws {
        try ExampleSchema.withManager { manager in
            let first = manager.newPrivateContext()
            let second = manager.newPrivateContext()
            let stranger = first.performAndWait {
                let user = User(context: first)
                user.userID = "stranger"
                return user
            }
            let strangerPost = first.performAndWait {
                let post = Post(context: first)
                post.postID = "stranger-post"
                return post
            }
            second.performAndWait {
                let post = Post(context: second)
                post.postID = "p"
                let user = User(context: second)
                user.userID = "u"
                #expect(throws: ManagedObjectError.wrongContext(stranger.objectID)) {
                    try post.setValue(stranger, forKey: "user")
                }
                #expect(throws: ManagedObjectError.wrongContext(strangerPost.objectID)) {
                    try user.setValue(Set([strangerPost]), forKey: "posts")
                }
                #expect(throws: ManagedObjectError.wrongContext(strangerPost.objectID)) {
                    try user.setValue([strangerPost], forKey: "posts")
                }
                // Nothing changed, and objects of no context are still taken in.
                #expect(post.user == nil)
                #expect(user.posts.isEmpty)
                let loose = Post()
                loose.postID = "loose"
                #expect(throws: Never.self) { try user.setValue([loose], forKey: "posts") }
                #expect(loose.managedObjectContext === second)
                #expect(loose.user === user)
            }
        }
    }
}
