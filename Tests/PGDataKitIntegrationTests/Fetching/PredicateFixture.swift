import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A writer with numbers of several types, for numeric predicates (the example schema's
/// users and posts have one integer between them).
final class Writer: ManagedObject {
    override class var tableName: String { "writers" }
    @Attribute var code: String = ""
    @Attribute var name: String?
    @Attribute var nickname: String?
    @Attribute var age: Int?
    @Attribute var rating: Double?
    @Attribute var born: Date?
    @Relationship(inverse: "writer", deleteRule: .cascade) var articles: Set<Article>

    /// The writers' and articles' tables, generated from the entities.
    static var table: String {
        get throws { try Model(entities: [Writer.self, Article.self]).schemaSQL() }
    }
}

/// An article of a writer.
final class Article: ManagedObject {
    override class var tableName: String { "articles" }
    @Attribute var code: String = ""
    @Attribute var title: String?
    @Attribute var score: Int?
    @Attribute var pages: Int32?
    @Attribute var weight: Double?
    @Attribute var price: Decimal?
    @Attribute var tag: UUID?
    @Attribute var blob: Data?
    @Relationship(inverse: "articles") var writer: Writer?
}

/// Objects the predicate tests find by a label: the key (`userID`, `postID`, `code`)
/// without its `s:` (saved) or `m:` (unsaved) prefix.
protocol Labelled: ManagedObject {
    var key: String { get }
}

extension User: Labelled { var key: String { userID } }
extension Post: Labelled { var key: String { postID } }
extension Writer: Labelled { var key: String { code } }
extension Article: Labelled { var key: String { code } }

extension Labelled {
    /// The key without its prefix.
    var label: String { String(key.dropFirst(2)) }
    /// Whether the object is one of the unsaved copies.
    var isCopy: Bool { key.hasPrefix("m:") }
}

/// The predicate tests' data: users and posts (the example schema), writers and
/// articles, saved once (keys prefixed `s:`); `insertCopies(into:)` adds the same
/// objects unsaved (prefixed `m:`), so one fetch decides the saved rows in SQL and the
/// copies in memory.
struct PredicateFixture {
    let manager: ContextManager
    /// A context with the saved objects registered, for arguments and in-memory checks.
    let reader: ManagedObjectContext

    static let entities: [ManagedObject.Type] = [User.self, Post.self, Writer.self, Article.self]

    /// Runs `body` over a fresh database holding the data.
    static func with(_ body: (PredicateFixture) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let connection = try Connection(configuration)
            try connection.executeScript(try Writer.table)
            connection.close()
            let manager = try ContextManager(configuration: configuration, entities: entities)
            defer { manager.close() }
            let writer = manager.newPrivateContext()
            try writer.performAndWait {
                insert(prefix: "s:", into: writer)
                try writer.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait { () throws in
                for type in entities { _ = try reader.fetchAll(type) }
            }
            try body(PredicateFixture(manager: manager, reader: reader))
        }
    }

    /// Inserts the data with keys starting with `prefix`.
    static func insert(prefix: String, into context: ManagedObjectContext) {
        var users: [String: User] = [:]
        for (label, name, age) in [("ada", "Ada", 36), ("bob", "bob", 25), ("ce", "Cé", 40), ("anon", nil, nil), ("ada2", "ada", 41)]
            as [(String, String?, Int?)]
        {
            let user = User(context: context)
            user.userID = prefix + label
            user.name = name
            user.age = age
            users[label] = user
        }
        for (label, title, owner) in [
            ("p1", "apple pie", "ada"), ("p2", "Zebra", "ada"), ("p3", "about", "bob"), ("p4", "b*x", "bob"),
            ("p5", "a?c", "anon"), ("p6", "Ada", "ada2"), ("p7", nil, "ada2"), ("p8", "orphan", nil),
            ("p9", "a\\b", "bob"), ("p10", "box", "bob"), ("p11", "abc", nil),
        ] as [(String, String?, String?)] {
            let post = Post(context: context)
            post.postID = prefix + label
            post.title = title
            post.user = owner.flatMap { users[$0] }
        }
        var writers: [String: Writer] = [:]
        let born: [Date?] = [
            Date(timeIntervalSince1970: 631_152_000), Date(timeIntervalSince1970: 961_070_400.123456), nil,
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 961_070_400.123457),
        ]
        for (index, row) in ([
            ("w1", "Ada", "ad", 36, 4.5), ("w2", "bob", "b\\*x", 25, nil), ("w3", "Cé", "ce", 40, 40.0),
            ("w4", nil, nil, nil, 2.0), ("w5", "ada", "a*", 41, 41.5),
        ] as [(String, String?, String?, Int?, Double?)]).enumerated() {
            let writer = Writer(context: context)
            writer.code = prefix + row.0
            writer.name = row.1
            writer.nickname = row.2
            writer.age = row.3
            writer.rating = row.4
            writer.born = born[index]
            writers[row.0] = writer
        }
        for row in [
            ("a1", "apple pie", 5, 100, 1.5, "9.99", "w1"), ("a2", "Zebra", 1, 20, 0.25, "1.01", "w1"),
            ("a3", "about", 3, 300, 2.0, "5", "w2"), ("a4", "b*x", nil, nil, nil, nil, "w2"),
            ("a5", "a?c", 7, 7, 3.5, "7.5", "w4"), ("a6", "Ada", 2, 40_000, 0.5, "2", "w5"),
            ("a7", nil, 4, 4, 4.0, "4.25", "w5"), ("a8", "orphan", 9, 9, 9.0, "9", nil),
        ] as [(String, String?, Int?, Int32?, Double?, String?, String?)] {
            let article = Article(context: context)
            article.code = prefix + row.0
            article.title = row.1
            article.score = row.2
            article.pages = row.3
            article.weight = row.4
            article.price = row.5.flatMap { Decimal(string: $0) }
            article.writer = row.6.flatMap { writers[$0] }
            switch row.0 {
            case "a1":
                article.tag = Self.tags[0]
                article.blob = Data([1, 2])
            case "a2":
                article.tag = Self.tags[1]
                article.blob = Data([0, 255])
            default: break
            }
        }
    }

    static let tags = [
        UUID(uuidString: "00000000-0000-0000-0000-000000000001"), UUID(uuidString: "00000000-0000-0000-0000-000000000002"),
    ].compactMap { $0 }

    /// The saved object of a type with a label.
    func saved<T: Labelled>(_ type: T.Type, _ label: String) throws -> T {
        try reader.performAndWait {
            try #require(try reader.fetchAll(T.self).first { $0.key == "s:" + label })
        }
    }

    /// Checks that `predicate` selects the objects labelled `expected`, three ways: in
    /// SQL over the saved rows; in memory over the same objects, saved and registered;
    /// and, unless `copies` is false (predicates naming saved objects), in one fetch
    /// with pending changes over the saved rows (SQL) and unsaved copies (memory).
    func check<T: Labelled>(
        _ type: T.Type, _ predicate: FetchPredicate, _ expected: [String], copies: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let expected = expected.sorted()
        let evaluator = PredicateEvaluator(model: manager.coordinator.model)
        try reader.performAndWait { () throws in
            var request = FetchRequest<T>(predicate: predicate)
            request.includesPendingChanges = false
            let sql = try reader.fetch(request).map(\.label).sorted()
            #expect(sql == expected, "SQL: \(predicate)", sourceLocation: sourceLocation)
            let memory = try reader.fetchAll(T.self).filter { try evaluator.evaluate(predicate, on: $0) }.map(\.label).sorted()
            #expect(memory == expected, "memory: \(predicate)", sourceLocation: sourceLocation)
        }
        guard copies else { return }
        let context = manager.newPrivateContext()
        try context.performAndWait { () throws in
            Self.insert(prefix: "m:", into: context)
            let found = try context.fetch(FetchRequest<T>(predicate: predicate))
            #expect(found.filter { !$0.isCopy }.map(\.label).sorted() == expected, "saved, with pending: \(predicate)",
                    sourceLocation: sourceLocation)
            #expect(found.filter(\.isCopy).map(\.label).sorted() == expected, "unsaved copies: \(predicate)",
                    sourceLocation: sourceLocation)
            context.rollback()
        }
    }

    /// `check` for a format string.
    func check<T: Labelled>(
        _ type: T.Type, _ format: String, _ arguments: [Any?] = [], _ expected: [String], copies: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let predicate: FetchPredicate
        do {
            predicate = try FetchPredicate(format: format, argumentArray: arguments)
        } catch {
            Issue.record("\(format): \(error)", sourceLocation: sourceLocation)
            return
        }
        try check(type, predicate, expected, copies: copies, sourceLocation: sourceLocation)
    }

    /// Checks that `predicate` is a `FetchPredicateError` (containing `fragment`) both in
    /// SQL and in memory, and never reaches the server.
    func expectError<T: Labelled>(
        _ entity: T.Type, _ predicate: FetchPredicate, _ fragment: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let evaluator = PredicateEvaluator(model: manager.coordinator.model)
        try reader.performAndWait { () throws in
            var request = FetchRequest<T>(predicate: predicate)
            request.includesPendingChanges = false
            let object = try #require(try reader.fetchAll(T.self).first)
            for (engine, run) in [
                ("SQL", { _ = try reader.fetch(request) }), ("memory", { _ = try evaluator.evaluate(predicate, on: object) }),
            ] as [(String, () throws -> Void)] {
                do {
                    try run()
                    Issue.record("\(engine): no error for \(predicate)", sourceLocation: sourceLocation)
                } catch let error as FetchPredicateError {
                    #expect(error.message.contains(fragment), "\(engine): \(error.message)", sourceLocation: sourceLocation)
                } catch {
                    Issue.record("\(engine): \(type(of: error)) \(error) for \(predicate)", sourceLocation: sourceLocation)
                }
            }
        }
    }
}
