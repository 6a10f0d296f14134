import Foundation
import PGDataKit
import Testing

/// The post mapper of the tests: nested remote keys, a relationship by the author's id.
let postMapper = ObjectMapper<Post>(
    uniqueKey: \.postID,
    maps: [
        ObjectMap("id", to: \.postID),
        ObjectMap("headline", to: \.title),
        .relationship("author.id", to: \.user, matching: \User.userID),
    ],
    mapsOtherAttributes: false)

@Suite("ObjectMapper: maps, formats, nulls, relationships, export")
struct ObjectMapperTests {
    func date(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text))
    }

    @Test func defaultMapsReadSameNamesAndSnakeCase() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let records: [JSONValue] = [
                    ["number": 1, "owner": "Ada", "opened_at": "2024-01-02T03:04:05Z", "balance": 12.5, "active": false],
                    ["number": 2, "owner": "Bob", "openedAt": "2024-01-02T03:04:05.25+02:00"],
                ]
                let accounts = try Account.importRecords(records, mapper: ObjectMapper(uniqueKey: \.number), in: context)
                #expect(accounts.map(\.owner) == ["Ada", "Bob"])
                #expect(accounts[0].openedAt == (try date("2024-01-02T03:04:05Z")))
                #expect(accounts[1].openedAt == Date(timeIntervalSince1970: try date("2024-01-02T01:04:05Z").timeIntervalSince1970 + 0.25))
                #expect(accounts[0].balance == Decimal(string: "12.5"))
                #expect(accounts[0].active == false)
                #expect(accounts[1].active == true)  // missing: left as it was
                try context.save()
            }
        }
    }

    @Test func datesInEveryFormat() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let formats: [(DateFormat, JSONValue, String)] = [
                    (.iso8601, "2024-03-04T05:06:07.123456Z", "2024-03-04T05:06:07.123456Z"),
                    (.iso8601, "2024-03-04T05:06:07Z", "2024-03-04T05:06:07Z"),
                    (.iso8601, "2024-03-04", "2024-03-04T00:00:00Z"),
                    (.custom("dd/MM/yyyy HH:mm"), "04/03/2024 05:06", "2024-03-04T05:06:00Z"),
                    (.custom("dd/MM/yyyy HH:mm", timeZone: TimeZone(secondsFromGMT: 3600) ?? .gmt), "04/03/2024 06:06", "2024-03-04T05:06:00Z"),
                    (.secondsSince1970, 1_709_528_767.5, "2024-03-04T05:06:07.5Z"),
                    (.millisecondsSince1970, 1_709_528_767_250, "2024-03-04T05:06:07.25Z"),
                ]
                for (index, (format, value, expected)) in formats.enumerated() {
                    let mapper = ObjectMapper<Account>(uniqueKey: \.number, maps: [ObjectMap("when", to: \.openedAt, dateFormat: format)])
                    let account = try #require(
                        try Account.importRecords([["number": .number(Double(index)), "when": value]], mapper: mapper, in: context).first)
                    let exported = try mapper.export(account)
                    #expect(exported["when"] == (format == .iso8601 ? .string(expected) : value), "\(format)")
                    let parsed = try #require(try Account.importRecords([["number": 99, "when": .string(expected)]], mapper: ObjectMapper(uniqueKey: \.number, maps: [ObjectMap("when", to: \.openedAt)]), in: context).first)
                    #expect(account.openedAt == parsed.openedAt, "\(format) \(value)")
                }
                for bad: JSONValue in ["2024-13-01T00:00:00Z", "yesterday", "2024-02-30", 5] {
                    #expect {
                        try Account.importRecords([["number": 1, "opened_at": bad]], mapper: ObjectMapper(uniqueKey: \.number), in: context)
                    } throws: { error in
                        guard let error = error as? ImportError, error.code == .typeMismatch, error.recordIndex == 0,
                            error.key == "opened_at", error.entity == "Account", error.attribute == "openedAt"
                        else { return false }
                        return error.expected?.contains("ISO 8601") == true
                    }
                }
            }
        }
    }

    @Test func numbersFromStringsOnlyWhenAsked() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let record: JSONValue = ["number": 1, "balance": "1234.5678"]
                do {
                    try Account.importRecords([["number": 0], record], mapper: ObjectMapper(uniqueKey: \.number), in: context)
                    Issue.record("expected a type mismatch")
                } catch let error as ImportError where error.code == .typeMismatch {
                    #expect(error.recordIndex == 1 && error.key == "balance" && error.entity == "Account")
                    #expect(error.attribute == "balance")
                    #expect(error.expected == "Decimal?" && error.actual == "a string")
                }
                #expect(!context.hasChanges)  // nothing of the batch, not even record 0
                let parsing = ObjectMapper<Account>(uniqueKey: \.number, parsesNumbersFromStrings: true)
                let account = try #require(try Account.importRecords([record], mapper: parsing, in: context).first)
                #expect(account.balance == Decimal(string: "1234.5678"))
                let perMap = ObjectMapper<Account>(uniqueKey: \.number, maps: [ObjectMap("balance", to: \.balance, parsesNumbersFromStrings: true)])
                #expect(try Account.importRecords([["number": 2, "balance": "-3"]], mapper: perMap, in: context).first?.balance == -3)
                #expect(throws: ImportError.self) {
                    try Account.importRecords([["number": 3, "balance": "abc"]], mapper: parsing, in: context)
                }
                #expect(throws: ImportError.self) {  // null into a non-optional attribute
                    try Account.importRecords([["number": 4, "active": nil]], mapper: parsing, in: context)
                }
            }
        }
    }

    @Test func nullsOverwriteUnlessIgnoredPerMapperOrPerMap() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                try Account.importRecords([["number": 1, "owner": "Ada", "balance": 5]], mapper: ObjectMapper(uniqueKey: \.number), in: context)
                try context.save()
                let nulls: JSONValue = ["number": 1, "owner": nil, "balance": nil]
                let keeping = ObjectMapper<Account>(uniqueKey: \.number, ignoresNullValueOverwrites: true)
                var account = try #require(try Account.importRecords([nulls], mapper: keeping, in: context).first)
                #expect(account.owner == "Ada" && account.balance == 5)
                #expect(!context.hasChanges)
                let keepingOwnerOnly = ObjectMapper<Account>(
                    uniqueKey: \.number, maps: [ObjectMap("owner", to: \.owner, ignoresNullValueOverwrites: true)])
                account = try #require(try Account.importRecords([nulls], mapper: keepingOwnerOnly, in: context).first)
                #expect(account.owner == "Ada" && account.balance == nil)
                account = try #require(try Account.importRecords([nulls], mapper: ObjectMapper(uniqueKey: \.number), in: context).first)
                #expect(account.owner == nil)
            }
        }
    }

    @Test func nestedKeyPathsRelationshipsAndAfterImport() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let records: [JSONValue] = [
                    ["id": "p1", "headline": "First", "author": ["id": "u1", "name": "Ada"]],
                    ["id": "p2", "headline": "Second", "author": ["id": "u1"]],
                    ["id": "p3", "headline": "Orphan", "author": nil],
                ]
                var mapper = postMapper
                mapper.afterImport = { record, post in
                    post.title = (post.title ?? "") + " by " + (record.value(atKeyPath: "author.name")?.stringValue ?? "?")
                }
                let posts = try Post.importRecords(records, mapper: mapper, in: context)
                #expect(posts.map(\.title) == ["First by Ada", "Second by ?", "Orphan by ?"])
                #expect(posts[0].user === posts[1].user)
                #expect(posts[0].user?.userID == "u1")
                #expect(posts[2].user == nil)
                try context.save()
            }
            #expect(try ImportSchema.integer("SELECT count(*) FROM users WHERE user_id = 'u1'", in: manager) == 1)
            #expect(try ImportSchema.integer("SELECT count(*) FROM posts WHERE user_id IS NOT NULL", in: manager) == 2)
        }
    }

    @Test func exportRoundTripsThroughImport() throws {
        try ImportSchema.withManager { manager throws in
            let records: [JSONValue] = (0..<20).map { index in
                ["id": .string("p\(index)"), "headline": index % 4 == 0 ? nil : .string("Post \(index)"),
                 "author": ["id": .string("u\(index % 3)")]]
            }
            let context = manager.newPrivateContext()
            let exported = try context.performAndWait { () throws -> [JSONValue] in
                try Post.importRecords(records, mapper: postMapper, in: context)
                try context.save()
                let posts = try Post.fetch(in: context, sortedBy: [FetchSortDescriptor("postID")])
                let flat = try postMapper.export(posts, style: .flat)
                #expect(flat.first?["author.id"] != nil)
                #expect(flat.first?["author"] == nil)
                return try postMapper.export(posts)
            }
            let sorted = records.sorted { ($0["id"]?.stringValue ?? "") < ($1["id"]?.stringValue ?? "") }
            #expect(exported == sorted)
            // Importing the export again changes nothing.
            let operation = manager.importOperation(exported, mapper: postMapper)
            operation.start()
            #expect(operation.error == nil)
            let summary = try #require(operation.summary)
            #expect(summary.unchanged == 20)

            // A mappable model with every kind of value, through its own mapper.
            try context.performAndWait {
                let account: JSONValue = [
                    "number": 7, "owner": "Ada", "balance": 12.25, "opened_at": "2024-03-04T05:06:07.123456Z", "active": false,
                ]
                let imported = try #require(try Account.importRecords([account], in: context).first)
                try context.save()
                #expect(try imported.exportRecord() == account)
                try context.refresh(imported, mergeChanges: false)
                #expect(try imported.exportRecord() == account)  // as stored
            }
        }
    }

    @Test func mapsNamingUnknownKeysAreRefused() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            context.performAndWait {
                let bad = ObjectMapper<Account>(uniqueKey: \.number, maps: [ObjectMap("x", to: "nothing")])
                #expect {
                    try Account.importRecords([["number": 1]], mapper: bad, in: context)
                } throws: { error in
                    guard let error = error as? ImportError, error.code == .unknownKey else { return false }
                    return error.entity == "Account" && error.key == "nothing"
                }
                let toMany = ObjectMapper<User>(uniqueKey: \.userID, maps: [.relationship("x", to: "posts", matching: "postID")])
                #expect(throws: ImportError.self) { try User.importRecords([["userID": "u"]], mapper: toMany, in: context) }
            }
        }
    }
}
