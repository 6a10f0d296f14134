import Foundation
import PGDataKit
import Synchronization
import Testing

/// The seed helpers' behaviours that ported code still missed (issue 48, item 6).
@Suite("Seed parity: nested export without nil, keeping existing objects, export hook")
struct SeedParityTests {
    /// Vokoder's hierarchical export makes the parent dictionary of every mapped key path
    /// before it looks at the value, so a post without author exports `"author": {}` even
    /// when nil values are left out; only the flat style has no parent to keep.
    @Test func nestedExportWithoutNilKeepsTheEmptyParent() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                var mapper = ObjectMapper<Post>(
                    uniqueKey: \.postID,
                    maps: [
                        ObjectMap("id", to: \.postID),
                        ObjectMap("meta.headline", to: \.title),
                        .relationship("author.id", to: \.user, matching: \User.userID),
                    ],
                    mapsOtherAttributes: false)
                mapper.exportOmitsNil = true
                let posts = try Post.importRecords(
                    [["id": "p1", "meta": ["headline": "Hi"], "author": ["id": "u1"]], ["id": "p2"]], mapper: mapper,
                    in: context)
                let exported = try mapper.export(posts)
                #expect(exported[0] == ["id": "p1", "meta": ["headline": "Hi"], "author": ["id": "u1"]])
                #expect(exported[1] == ["id": "p2", "meta": .object([:]), "author": .object([:])])
                #expect(try mapper.export(posts[1]) == exported[1])
                #expect(try mapper.export(posts, style: .flat)[1] == ["id": "p2"])
                mapper.exportOmitsNil = false
                #expect(try mapper.export(posts[1]) == ["id": "p2", "meta": ["headline": nil], "author": ["id": nil]])
                // The empty parents import back to what they came from.
                let again = try Post.importRecords(exported, mapper: mapper, in: context)
                #expect(again[1] === posts[1] && again[1].title == nil && again[1].user == nil)
            }
        }
    }

    /// Vokoder's `overwriteObjectsWithServerChanges = NO` on the mapper itself: in one
    /// context, without saving in between, a record for a key the context already has
    /// (saved, or inserted by an earlier import) leaves that object as it is; with the
    /// option off the same records overwrite it.
    @Test(arguments: [false, true])
    func theMapperCanKeepExistingObjectsInOneContext(updatesExisting: Bool) throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                var mapper = ObjectMapper<User>(uniqueKey: \.userID)
                let saved = try User.importRecords([["userID": "saved", "name": "Ada", "age": 36]], mapper: mapper, in: context)
                try context.save()
                let pending = try User.importRecords([["userID": "pending", "name": "Bo", "age": 7]], mapper: mapper, in: context)
                mapper.updatesExistingObjects = updatesExisting
                let records: [JSONValue] = [
                    ["userID": "saved", "name": "Changed", "age": 1], ["userID": "pending", "name": "Changed", "age": 2],
                    ["userID": "new", "name": "New", "age": 3],
                ]
                let users = try User.importRecords(records, mapper: mapper, in: context)
                #expect(users.map(\.userID) == ["saved", "pending", "new"])
                #expect(users[0] === saved[0] && users[1] === pending[0])
                if updatesExisting {
                    #expect(users[0].name == "Changed" && users[0].age == 1)
                    #expect(users[1].name == "Changed" && users[1].age == 2)
                } else {
                    #expect(users[0].name == "Ada" && users[0].age == 36 && !users[0].hasChanges)
                    #expect(users[1].name == "Bo" && users[1].age == 7)
                }
                #expect(users[2].name == "New" && users[2].isInserted)
                try context.save()
            }
            let changed = try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'Changed'", in: manager)
            #expect(changed == (updatesExisting ? 2 : 0))
            #expect(try ImportSchema.integer("SELECT count(*) FROM users", in: manager) == 3)
        }
    }

    /// The same option through the other import paths: `insertOrUpdate(updatesExisting:)`
    /// keeps an object inserted earlier in the context, and an import operation keeps
    /// stored rows when its mapper says so (its `ImportOptions` left at their default).
    @Test func everyImportPathCanKeepExistingObjects() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let pending = User(context: context)
                pending.userID = "pending"
                pending.name = "Bo"
                let users = try User.insertOrUpdate(
                    [["UserID": "pending", "Name": "Changed"]], uniqueModelKey: \.userID, uniqueRemoteKey: "UserID",
                    in: context, updatesExisting: false
                ) { record, user in user.name = record["Name"]?.stringValue }
                #expect(users == [pending] && pending.name == "Bo")
                try context.save()
            }
            var mapper = ObjectMapper<User>(uniqueKey: \.userID)
            mapper.updatesExistingObjects = false
            let operation = manager.importOperation(
                [["userID": "pending", "name": "Changed"], ["userID": "new", "name": "New"]] as [JSONValue], mapper: mapper)
            operation.start()
            #expect(operation.error == nil)
            #expect(operation.summary?.inserted == 1 && operation.summary?.updated == 0)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'Changed'", in: manager) == 0)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'New'", in: manager) == 1)
        }
    }

    /// Vokoder's `exportCompletionBlock`: `afterExport` sees each object with its
    /// record, in the export's style, and what it changes is what the export returns.
    @Test func afterExportAdjustsEachRecord() throws {
        struct Refused: Error {}
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let posts = try Post.importRecords(
                    [["id": "p1", "headline": "Hello", "author": ["id": "u1"]], ["id": "p2", "headline": "Hi"]],
                    mapper: postMapper, in: context)
                let seen = Mutex<[String]>([])
                var mapper = postMapper
                mapper.afterExport = { post, record in
                    seen.withLock { $0.append(post.postID) }
                    record["length"] = .number(Double(post.title?.count ?? 0))
                    if record["author"] == ["id": nil] || record["author.id"] == .null {
                        record["author"] = nil
                        record["author.id"] = nil
                    }
                }
                #expect(
                    try mapper.export(posts) == [
                        ["id": "p1", "headline": "Hello", "author": ["id": "u1"], "length": 5],
                        ["id": "p2", "headline": "Hi", "length": 2],
                    ])
                #expect(try mapper.export(posts[1]) == ["id": "p2", "headline": "Hi", "length": 2])
                #expect(try mapper.export(posts, style: .flat)[0] == ["id": "p1", "headline": "Hello", "author.id": "u1", "length": 5])
                #expect(seen.withLock { $0 } == ["p1", "p2", "p2", "p1", "p2"])
                #expect(try postMapper.export(posts[1]) == ["id": "p2", "headline": "Hi", "author": ["id": nil]])
                mapper.afterExport = { post, _ in if post.postID == "p2" { throw Refused() } }
                #expect(throws: Refused.self) { try mapper.export(posts) }
            }
        }
    }
}
