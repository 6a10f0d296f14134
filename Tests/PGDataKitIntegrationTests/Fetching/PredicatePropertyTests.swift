import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Random format-string predicates over users/posts and writers/articles, on random
/// data: the saved rows in SQL, the same objects in memory, and unsaved copies in
/// memory must agree. Seeded and bounded (a few seconds), so a failure replays.
@Suite("Random predicates agree in SQL and in memory")
struct PredicatePropertyTests {
    static let seed: UInt64 = 13_2026
    static let rounds = 90

    @Test func randomPredicatesAgree() throws {
        var random = SeededGenerator(state: Self.seed)
        let data = RandomData(using: &random)
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let connection = try Connection(configuration)
            try connection.executeScript(try Writer.table)
            connection.close()
            let manager = try ContextManager(configuration: configuration, entities: PredicateFixture.entities)
            defer { manager.close() }
            let writer = manager.newPrivateContext()
            try writer.performAndWait {
                data.insert(prefix: "s:", into: writer)
                try writer.save()
            }
            let reader = manager.newPrivateContext()
            let copies = manager.newPrivateContext()
            copies.performAndWait { data.insert(prefix: "m:", into: copies) }
            let evaluator = PredicateEvaluator(model: manager.coordinator.model)
            try reader.performAndWait { () throws in
                let saved = Saved(
                    users: try reader.fetchAll(User.self), posts: try reader.fetchAll(Post.self),
                    writers: try reader.fetchAll(Writer.self), articles: try reader.fetchAll(Article.self))
                var generator = PredicateGenerator(saved: saved)
                for round in 0..<Self.rounds {
                    for entity in Schema.Entity.allCases {
                        let (format, arguments) = generator.predicate(for: entity, depth: 0, using: &random)
                        let label = "round \(round) \(entity): \(format) \(arguments)"
                        let predicate: FetchPredicate
                        do {
                            predicate = try FetchPredicate(format: format, argumentArray: arguments)
                        } catch {
                            Issue.record("\(label): \(error)")
                            return
                        }
                        let agreed: Bool
                        switch entity {
                        case .user: agreed = try Self.agree(User.self, predicate, label, reader, copies, evaluator, generator.namesObjects)
                        case .post: agreed = try Self.agree(Post.self, predicate, label, reader, copies, evaluator, generator.namesObjects)
                        case .writer: agreed = try Self.agree(Writer.self, predicate, label, reader, copies, evaluator, generator.namesObjects)
                        case .article:
                            agreed = try Self.agree(Article.self, predicate, label, reader, copies, evaluator, generator.namesObjects)
                        }
                        if !agreed { return }
                    }
                }
            }
        }
    }

    /// Runs a predicate three ways; `false` (after recording the issue) on the first
    /// disagreement.
    static func agree<T: Labelled>(
        _ type: T.Type, _ predicate: FetchPredicate, _ label: String, _ reader: ManagedObjectContext,
        _ copies: ManagedObjectContext, _ evaluator: PredicateEvaluator, _ namesObjects: Bool
    ) throws -> Bool {
        var request = FetchRequest<T>(predicate: predicate)
        request.includesPendingChanges = false
        let sql: [String]
        do {
            sql = try reader.fetch(request).map(\.label).sorted()
        } catch {
            Issue.record("\(label): SQL threw \(error)")
            return false
        }
        let memory = try reader.fetchAll(T.self).filter { try evaluator.evaluate(predicate, on: $0) }.map(\.label).sorted()
        guard memory == sql else {
            Issue.record("\(label)\n  SQL:    \(sql)\n  memory: \(memory)")
            return false
        }
        let (savedPart, copiesPart) = try copies.performAndWait {
            let found = try copies.fetch(FetchRequest<T>(predicate: predicate))
            return (found.filter { !$0.isCopy }.map(\.label).sorted(), found.filter(\.isCopy).map(\.label).sorted())
        }
        guard savedPart == sql, namesObjects || copiesPart == sql else {
            Issue.record("\(label)\n  SQL: \(sql)\n  with pending, saved: \(savedPart)\n  unsaved copies: \(copiesPart)")
            return false
        }
        return true
    }
}

/// The saved objects, for object arguments.
struct Saved {
    let users: [User]
    let posts: [Post]
    let writers: [Writer]
    let articles: [Article]
}

/// What the generator knows of the four entities.
enum Schema {
    enum Entity: CaseIterable {
        case user, post, writer, article
    }

    /// String key paths, through to-one relationships too.
    static func strings(_ entity: Entity) -> [String] {
        switch entity {
        case .user: ["name"]
        case .post: ["title", "user.name"]
        case .writer: ["name", "nickname"]
        case .article: ["title", "writer.name", "writer.nickname"]
        }
    }

    /// Numeric key paths.
    static func numbers(_ entity: Entity) -> [String] {
        switch entity {
        case .user: ["age"]
        case .post: ["user.age"]
        case .writer: ["age", "rating"]
        case .article: ["score", "pages", "weight", "price", "writer.age", "writer.rating"]
        }
    }

    /// To-many relationships and their entities.
    static func toMany(_ entity: Entity) -> [(String, Entity)] {
        switch entity {
        case .user: [("posts", .post)]
        case .post: [("user.posts", .post)]
        case .writer: [("articles", .article)]
        case .article: [("writer.articles", .article)]
        }
    }

    /// Paths a quantifier may follow: the to-many relationships, and paths through two
    /// or three of them (every object the whole path reaches counts).
    static func quantified(_ entity: Entity) -> [(String, Entity)] {
        switch entity {
        case .user: toMany(entity) + [("posts.user.posts", .post)]
        case .post: toMany(entity) + [("user.posts.user.posts", .post)]
        case .writer: toMany(entity) + [("articles.writer.articles", .article), ("articles.writer.articles.writer.articles", .article)]
        case .article: toMany(entity) + [("writer.articles.writer.articles", .article)]
        }
    }

    /// To-one relationships and their entities.
    static func toOne(_ entity: Entity) -> [(String, Entity)] {
        switch entity {
        case .user, .writer: []
        case .post: [("user", .user)]
        case .article: [("writer", .writer)]
        }
    }
}

/// Random, well-formed format strings with their arguments.
struct PredicateGenerator {
    let saved: Saved
    /// Whether the last predicate names saved objects (unsaved copies cannot match them).
    private(set) var namesObjects = false

    init(saved: Saved) {
        self.saved = saved
    }

    static let words = [
        "", "a", "A", "ab", "Ab", "été", "Été", "ete", "über", "zoë", "日本", "a_b", "a%b", "a*b", "a\\b", "O'Hara", "b*x", "box",
    ]
    static let patterns = ["a*", "*b", "?", "*", "é*", "*ü*", "a?b", "a\\*b", "\\?", "*\\\\*", "A*", "b\\*x", "%", "_"]
    static let dates = RandomData.dates.compactMap { $0 }

    mutating func predicate(for entity: Schema.Entity, depth: Int, using random: inout SeededGenerator) -> (String, [Any?]) {
        if depth == 0 { namesObjects = false }
        var arguments: [Any?] = []
        let text = self.text(for: entity, depth: depth, arguments: &arguments, using: &random)
        return (text, arguments)
    }

    private mutating func text(
        for entity: Schema.Entity, depth: Int, arguments: inout [Any?], using random: inout SeededGenerator
    ) -> String {
        let roll = Int.random(in: 0..<10, using: &random)
        if depth < 2 && roll < 3 {
            let parts = (0..<(roll == 2 ? 1 : Int.random(in: 2...3, using: &random))).map { _ in
                text(for: entity, depth: depth + 1, arguments: &arguments, using: &random)
            }
            switch roll {
            case 0: return "(" + parts.joined(separator: " AND ") + ")"
            case 1: return "(" + parts.joined(separator: " OR ") + ")"
            default: return "NOT (" + parts[0] + ")"
            }
        }
        return comparison(for: entity, depth: depth, arguments: &arguments, using: &random)
    }

    private func pick<T>(_ items: [T], _ random: inout SeededGenerator) -> T {
        items[Int.random(in: 0..<items.count, using: &random)]
    }

    private func options(_ random: inout SeededGenerator) -> String {
        pick(["", "", "[c]", "[d]", "[cd]"], &random)
    }

    private func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// A random number constant: an integer, a double, or a decimal argument.
    private func number(_ arguments: inout [Any?], _ random: inout SeededGenerator) -> String {
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return String(Int.random(in: -3...45, using: &random))
        case 1: return String(Double(Int.random(in: -12...180, using: &random)) / 4)
        case 2:
            arguments.append(Decimal(Int.random(in: -300...4500, using: &random)) / 100)
            return "%@"
        default:
            arguments.append(Double(Int.random(in: -6...90, using: &random)) / 2)
            return "%f"
        }
    }

    private mutating func comparison(
        for entity: Schema.Entity, depth: Int, arguments: inout [Any?], using random: inout SeededGenerator
    ) -> String {
        let strings = Schema.strings(entity), numbers = Schema.numbers(entity)
        switch Int.random(in: 0..<14, using: &random) {
        case 0, 1:
            // A string key with a constant.
            let key = pick(strings, &random)
            let op = pick(["==", "!=", "<", "<=", ">", ">=", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "IN", "BETWEEN"], &random)
            switch op {
            case "LIKE": return "\(key) LIKE\(options(&random)) \(quoted(pick(Self.patterns, &random)))"
            case "IN":
                arguments.append((0..<3).map { _ in pick(Self.words, &random) } as [String])
                return "\(key) IN\(options(&random)) %@"
            case "BETWEEN":
                let pair = [pick(Self.words, &random), pick(Self.words, &random)]
                return "\(key) BETWEEN\(options(&random)) {\(quoted(pair[0])), \(quoted(pair[1]))}"
            default:
                if (op == "==" || op == "!=") && Int.random(in: 0..<5, using: &random) == 0 { return "\(key) \(op) nil" }
                arguments.append(pick(Self.words, &random))
                return "\(key) \(op)\(options(&random)) %@"
            }
        case 2:
            // Two string keys, or a constant on the left of a string operator.
            let op = pick(["==", "!=", "<", ">=", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "IN"], &random)
            if strings.count > 1 && Bool.random(using: &random) {
                let left = pick(strings, &random), right = pick(strings, &random)
                return "\(left) \(op)\(options(&random)) \(right)"
            }
            let constantOp = pick(["BEGINSWITH", "ENDSWITH", "CONTAINS", "IN"], &random)
            arguments.append(pick(Self.words, &random) + pick(Self.words, &random))
            return constantOp == "IN"
                ? "%@ IN\(options(&random)) \(pick(strings, &random))"
                : "%@ \(constantOp)\(options(&random)) \(pick(strings, &random))"
        case 3, 4:
            // A number key with a constant (across types), [c] ignored now and then.
            let key = pick(numbers, &random)
            let op = pick(["==", "!=", "<", "<=", ">", ">=", "IN", "BETWEEN"], &random)
            let ignored = Int.random(in: 0..<8, using: &random) == 0 ? "[c]" : ""
            switch op {
            case "IN":
                let items = (0..<3).map { _ in number(&arguments, &random) }
                return "\(key) IN\(ignored) {\(items.joined(separator: ", "))}"
            case "BETWEEN":
                let low = number(&arguments, &random), high = number(&arguments, &random)
                return "\(key) BETWEEN {\(low), \(high)}"
            default:
                if Int.random(in: 0..<6, using: &random) == 0 { return "\(key) \(op) nil" }
                let constant = number(&arguments, &random)
                return Bool.random(using: &random) ? "\(key) \(op)\(ignored) \(constant)" : "\(constant) \(op) \(key)"
            }
        case 5:
            // Two number keys of any types.
            let op = pick(["==", "!=", "<", "<=", ">", ">="], &random)
            return "\(pick(numbers, &random)) \(op) \(pick(numbers, &random))"
        case 6:
            // Dates, at the microsecond.
            guard entity == .writer else { return comparison(for: entity, depth: depth, arguments: &arguments, using: &random) }
            arguments.append(pick(Self.dates, &random))
            return "born \(pick(["==", "!=", "<", ">=", ">"], &random)) %@"
        case 7, 8:
            // A quantifier over a to-many relationship (or several).
            let (path, target) = pick(Schema.quantified(entity), &random)
            let quantifier = pick(["ANY", "ALL", "NONE", "SOME"], &random)
            if Bool.random(using: &random) {
                let key = pick(Schema.strings(target).filter { !$0.contains(".") }, &random)
                if Int.random(in: 0..<4, using: &random) == 0 {
                    // Compared with a key of the object itself.
                    return "\(quantifier) \(path).\(key) \(pick(["==", "<", "BEGINSWITH", "CONTAINS"], &random))"
                        + "\(options(&random)) \(pick(strings, &random))"
                }
                arguments.append(pick(Self.words, &random))
                return "\(quantifier) \(path).\(key) \(pick(["==", "!=", "<", "BEGINSWITH", "LIKE", "CONTAINS"], &random))"
                    + "\(options(&random)) %@"
            }
            let numeric = Schema.numbers(target).filter { !$0.contains(".") }
            guard !numeric.isEmpty else { return "\(quantifier) \(path).user == nil" }
            return "\(quantifier) \(path).\(pick(numeric, &random)) \(pick(["==", "!=", "<", ">="], &random)) "
                + number(&arguments, &random)
        case 9:
            // Counts and aggregates.
            let (path, target) = pick(Schema.toMany(entity), &random)
            let numeric = Schema.numbers(target).filter { !$0.contains(".") }
            let op = pick(["==", "!=", "<", "<=", ">", ">="], &random)
            switch numeric.isEmpty ? Int.random(in: 0...1, using: &random) : Int.random(in: 0..<5, using: &random) {
            case 0: return "\(path).@count \(op) \(Int.random(in: 0...3, using: &random))"
            case 1:
                let key = Schema.strings(target)[0]
                arguments.append(pick(Self.words, &random))
                return "\(path).\(pick(["@min", "@max"], &random)).\(key) \(op)\(options(&random)) %@"
            case 2: return "\(path).\(pick(["@min", "@max", "@sum", "@avg"], &random)).\(pick(numeric, &random)) \(op) "
                + number(&arguments, &random)
            case 3: return "\(path).\(pick(["@sum", "@avg", "@max"], &random)).\(pick(numeric, &random)) \(op) \(pick(numbers, &random))"
            default: return "\(path).@avg.\(pick(numeric, &random)) \(pick(["==", "!="], &random)) nil"
            }
        case 10:
            // A subquery over a to-many relationship.
            let (path, target) = pick(Schema.toMany(entity), &random)
            var inner: [Any?] = []
            let body = depth < 2 ? text(for: target, depth: 2, arguments: &inner, using: &random) : "TRUEPREDICATE"
            arguments.append(contentsOf: inner)
            let renamed = body.replacingOccurrences(of: "SELF", with: "$x")
            let op = pick(["==", "!=", ">", ">=", "<"], &random)
            return "SUBQUERY(\(path), $x, \(renamed)).@count \(op) \(Int.random(in: 0...2, using: &random))"
        case 11:
            // Membership: a value in a to-many key path.
            let (path, target) = pick(Schema.toMany(entity), &random)
            arguments.append(pick(Self.words, &random))
            return "%@ IN\(options(&random)) \(path).\(Schema.strings(target)[0])"
        case 12:
            // Objects: SELF, to-one relationships, members of to-many ones.
            namesObjects = true
            let count = Int.random(in: 0...3, using: &random)
            switch Int.random(in: 0..<3, using: &random) {
            case 0:
                arguments.append(objects(of: entity, count, &random))
                return pick(["SELF IN %@", "NOT SELF IN %@"], &random)
            case 1:
                if let (path, target) = Schema.toOne(entity).first {
                    arguments.append(objects(of: target, count, &random))
                    return "\(path) IN %@"
                }
                arguments.append(objects(of: entity, 1, &random).first ?? nil)
                return "SELF \(pick(["==", "!="], &random)) %@"
            default:
                let (path, target) = pick(Schema.toMany(entity), &random)
                arguments.append(objects(of: target, count, &random))
                return "\(pick(["ANY", "ALL", "NONE"], &random)) \(path) IN %@"
            }
        default:
            // To-one relationships and nil.
            if let (path, _) = Schema.toOne(entity).first { return "\(path) \(pick(["==", "!="], &random)) nil" }
            return "TRUEPREDICATE"
        }
    }

    private func objects(of entity: Schema.Entity, _ count: Int, _ random: inout SeededGenerator) -> [ManagedObject] {
        let all: [ManagedObject] = switch entity {
        case .user: saved.users
        case .post: saved.posts
        case .writer: saved.writers
        case .article: saved.articles
        }
        return (0..<count).map { _ in pick(all, &random) }
    }
}

/// Random rows for the four entities, made once and inserted twice (saved and as
/// unsaved copies).
struct RandomData {
    static let dates: [Date?] = [
        nil, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 961_070_400.123456),
        Date(timeIntervalSince1970: 961_070_400.123457), Date(timeIntervalSince1970: -86_400.5),
        Date(timeIntervalSince1970: 1_700_000_000),
    ]

    var users: [(name: String?, age: Int?)] = []
    var posts: [(title: String?, user: Int?)] = []
    var writers: [(name: String?, nickname: String?, age: Int?, rating: Double?, born: Date?)] = []
    var articles: [(title: String?, score: Int?, pages: Int32?, weight: Double?, price: Decimal?, writer: Int?)] = []

    init(using random: inout SeededGenerator) {
        func maybe<T>(_ value: T, _ random: inout SeededGenerator) -> T? {
            Int.random(in: 0..<5, using: &random) == 0 ? nil : value
        }
        let words = PredicateGenerator.words
        let patterns = PredicateGenerator.patterns
        for _ in 0..<12 {
            users.append((maybe(words.randomElement(using: &random) ?? "", &random), maybe(Int.random(in: 0...45, using: &random), &random)))
        }
        for _ in 0..<26 {
            posts.append((maybe(words.randomElement(using: &random) ?? "", &random), maybe(Int.random(in: 0..<12, using: &random), &random)))
        }
        for _ in 0..<10 {
            writers.append((
                maybe(words.randomElement(using: &random) ?? "", &random),
                maybe((words + patterns).randomElement(using: &random) ?? "", &random),
                maybe(Int.random(in: 0...45, using: &random), &random),
                maybe(Double(Int.random(in: 0...180, using: &random)) / 4, &random),
                Self.dates.randomElement(using: &random) ?? nil))
        }
        for _ in 0..<26 {
            articles.append((
                maybe(words.randomElement(using: &random) ?? "", &random),
                maybe(Int.random(in: -3...12, using: &random), &random),
                maybe(Int32.random(in: 0...20, using: &random), &random),
                maybe(Double(Int.random(in: 0...40, using: &random)) / 4, &random),
                maybe(Decimal(Int.random(in: 0...2000, using: &random)) / 100, &random),
                maybe(Int.random(in: 0..<10, using: &random), &random)))
        }
    }

    /// Inserts the rows with keys starting with `prefix` (`s:`, `m:`).
    func insert(prefix: String, into context: ManagedObjectContext) {
        let userObjects = users.enumerated().map { index, row in
            let user = User(context: context)
            user.userID = prefix + "u\(index)"
            user.name = row.name
            user.age = row.age
            return user
        }
        for (index, row) in posts.enumerated() {
            let post = Post(context: context)
            post.postID = prefix + "p\(index)"
            post.title = row.title
            post.user = row.user.map { userObjects[$0] }
        }
        let writerObjects = writers.enumerated().map { index, row in
            let writer = Writer(context: context)
            writer.code = prefix + "w\(index)"
            writer.name = row.name
            writer.nickname = row.nickname
            writer.age = row.age
            writer.rating = row.rating
            writer.born = row.born
            return writer
        }
        for (index, row) in articles.enumerated() {
            let article = Article(context: context)
            article.code = prefix + "a\(index)"
            article.title = row.title
            article.score = row.score
            article.pages = row.pages
            article.weight = row.weight
            article.price = row.price
            article.writer = row.writer.map { writerObjects[$0] }
        }
    }
}
