import Foundation
import PGDataKit
import Testing

// The examples of Importing.md, compiled and run here; `articleExamplesAreThisCode`
// checks that every Swift block of the article appears in this file.

extension User: MappableModel {
    static var objectMapper: ObjectMapper<User> {
        ObjectMapper(uniqueKey: \.userID, keyStyle: .snakeCase, dateFormat: .iso8601)
    }
}
// try User.importRecords([["user_id": "u5", "name": "Eve", "age": 41]], in: context)
// let record = try user.exportRecord()   // {"user_id": "u5", "name": "Eve", "age": 41}

@Suite("Docs: Importing")
struct ImportReadmeTests {
    @Test func articleExamplesAreThisCode() throws {
        let file = "\(DocSnippets.catalog)/Importing.md"
        #expect(try DocSnippets.swiftBlocks(in: file).count == 7)
        for block in try DocSnippets.blocksMissing(from: #filePath, in: file) {
            Issue.record("Importing.md block not in ImportReadmeTests.swift:\n\(block)")
        }
    }

    @Test func insertOrUpdateStubsLinksAndMapper() throws {
        try ImportSchema.withManager { manager throws in
            let data = Data(#"[{"UserID": "u1", "Name": "Ada", "Age": 36}, {"UserID": "u2", "Name": "Bob"}]"#.utf8)
            let context = manager.newPrivateContext()
            let records = try JSONDecoder().decode([JSONValue].self, from: data)   // [{"UserID": "u1", "Name": "Ada", "Age": 36}, …]
            try context.performAndWait {
                try User.insertOrUpdate(records, uniqueModelKey: \.userID, uniqueRemoteKey: "UserID", in: context) { record, user in
                    user.name = record["Name"]?.stringValue
                    user.age = record["Age"]?.intValue
                }
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name IS NOT NULL", in: manager) == 2)

            try context.performAndWait {
                // Posts known only by their ids: stubs (the record is the key).
                try Post.insertOrUpdate(["p1", "p2"], uniqueModelKey: \.postID, uniqueRemoteKey: "self", in: context)
                // Posts with their authors' remote ids: linked, with one user lookup per batch.
                let posts: [JSONValue] = [["PostID": "p1", "Title": "Hello", "UserID": "u1"], ["PostID": "p3", "Title": "New", "UserID": "u9"]]
                try Post.insertOrUpdate(
                    posts, uniqueModelKey: \.postID, uniqueRemoteKey: "PostID", in: context,
                    relationships: [.relationship("UserID", to: \.user, matching: \User.userID)]
                ) { record, post in
                    post.title = record["Title"]?.stringValue
                }
                try context.save()   // u9 did not exist: a stub user carries only its userID
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM posts", in: manager) == 3)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE user_id = 'u9' AND name IS NULL", in: manager) == 1)

            let postMapper = ObjectMapper<Post>(
                uniqueKey: \.postID,
                maps: [
                    ObjectMap("id", to: \.postID),
                    ObjectMap("headline", to: \.title, ignoresNullValueOverwrites: true),
                    .relationship("author.id", to: \.user, matching: \User.userID),
                ],
                mapsOtherAttributes: false)
            let feed: [JSONValue] = [["id": "p7", "headline": "Mapped", "author": ["id": "u1", "name": "Ada"]]]
            let exported = try context.performAndWait {
                try Post.importRecords(feed, mapper: postMapper, in: context)
                try context.save()
                return try postMapper.export(try Post.fetch(in: context, where: "postID == 'p7'"))
            }
            // [{"id": "p7", "headline": "Mapped", "author": {"id": "u1"}}]; style: .flat writes "author.id"
            #expect(exported == [["id": "p7", "headline": "Mapped", "author": ["id": "u1"]]])

            try context.performAndWait {
                let user = try #require(try User.importRecords([["user_id": "u5", "name": "Eve", "age": 41]], in: context).first)
                #expect(try user.exportRecord() == ["user_id": "u5", "name": "Eve", "age": 41])
            }
        }
    }

    static let records: [JSONValue] = [["user_id": "u1", "name": "Ada"], ["user_id": "u2"], ["user_id": "u3", "age": 3]]

    @Test func importOperation() throws {
        try ImportSchema.withManager { manager throws in
            let queue = OperationQueue()
            let records = Self.records
            let operation = manager.importOperation(records, mapper: User.objectMapper, options: ImportOptions(batchSize: 5_000))
            queue.addOperations([operation], waitUntilFinished: true)
            if let error = operation.error { print("stopped:", error) }
            print(operation.summary ?? ImportSummary(), operation.progress.completedUnitCount)
            #expect(operation.summary?.inserted == 3)
        }
    }

    @Test(.onItsOwnThread) func asyncImport() async throws {
        try await ExampleSchemaAsync.withImportManager { manager in
            let records = Self.records
            try await manager.importRecords(records, mapper: User.objectMapper)
            let summary = try await manager.importRecords(records, mapper: User.objectMapper, options: ImportOptions(batchSize: 5_000))
            print(summary)   // 3 records in 1 batches: 0 inserted, 0 updated, 3 unchanged, 0 deleted, 0 retries
            #expect(summary.description == "3 records in 1 batches: 0 inserted, 0 updated, 3 unchanged, 0 deleted, 0 retries")
        }
    }

    @Test func dataOperation() throws {
        try ImportSchema.withManager { manager throws in
            let queue = OperationQueue()
            let operation = DataOperation(manager: manager) { operation, context in
                let user = try User.insertOrFetch(key: "userID", value: "u1", in: context)
                user.name = "Ada Lovelace"
                operation.completeAndSave()
            }
            queue.addOperations([operation], waitUntilFinished: true)
            print(operation.errors)   // [] — or what the work threw, or why the save failed
            #expect(operation.errors.isEmpty)
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE name = 'Ada Lovelace'", in: manager) == 1)
        }
    }
}
