import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A small deterministic random generator (SplitMix64), so failures can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("The same predicate in SQL and in memory")
struct PredicateConsistencyTests {
    static let words = ["", "a", "A", "ab", "Ab", "été", "Été", "ete", "über", "Über", "zoë", "日本", "🚀x", "x🚀", "a_b", "a%b", "O'Hara", "nul"]

    @Test func randomPredicatesAgreeWithSQL() throws {
        try ExampleSchema.withManager { manager in
            var random = SeededGenerator(state: 20_261_122)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                var users: [User] = []
                for index in 0..<40 {
                    let user = User(context: context)
                    user.userID = "u\(index)"
                    user.name = Bool.random(using: &random) && index % 5 != 0 ? Self.words.randomElement(using: &random) : nil
                    user.age = index % 6 == 0 ? nil : Int.random(in: 0...60, using: &random)
                    users.append(user)
                }
                for index in 0..<70 {
                    let post = Post(context: context)
                    post.postID = "p\(index)"
                    post.title = index % 4 == 0 ? nil : Self.words.randomElement(using: &random)
                    post.user = index % 9 == 0 ? nil : users.randomElement(using: &random)
                }
                try context.save()
            }
            let evaluator = PredicateEvaluator(model: manager.coordinator.model)
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let allUsers = try reader.fetchAll(User.self)
                let allPosts = try reader.fetchAll(Post.self)
                for round in 0..<400 {
                    let userPredicate = Self.randomPredicate(for: "User", depth: 0, using: &random)
                    var request = FetchRequest<User>(predicate: userPredicate)
                    request.includesPendingChanges = false
                    let fromSQL = Set(try reader.fetch(request).map(\.objectID))
                    let inMemory = Set(try allUsers.filter { try evaluator.evaluate(userPredicate, on: $0) }.map(\.objectID))
                    #expect(fromSQL == inMemory, "round \(round): \(userPredicate)")
                    if fromSQL != inMemory { return }

                    let postPredicate = Self.randomPredicate(for: "Post", depth: 0, using: &random)
                    var postRequest = FetchRequest<Post>(predicate: postPredicate)
                    postRequest.includesPendingChanges = false
                    let postsSQL = Set(try reader.fetch(postRequest).map(\.objectID))
                    let postsMemory = Set(try allPosts.filter { try evaluator.evaluate(postPredicate, on: $0) }.map(\.objectID))
                    #expect(postsSQL == postsMemory, "round \(round): \(postPredicate)")
                    if postsSQL != postsMemory { return }
                }
                // Sorting agrees too.
                for descriptors in [
                    [FetchSortDescriptor("name")], [FetchSortDescriptor("name", ascending: false)],
                    [FetchSortDescriptor("name", caseInsensitive: true), FetchSortDescriptor("age", ascending: false)],
                    [FetchSortDescriptor("age"), FetchSortDescriptor("name")],
                ] {
                    var request = FetchRequest<User>(sortDescriptors: descriptors)
                    request.includesPendingChanges = false
                    let sql = try reader.fetch(request).map(\.objectID)
                    let memory = try reader.sortInMemory(allUsers, by: descriptors, entity: allUsers[0].entity).map(\.objectID)
                    #expect(sql == memory, "\(descriptors)")
                }
            }
        }
    }

    typealias P = FetchPredicate

    static func randomPredicate(for entity: String, depth: Int, using random: inout SeededGenerator) -> FetchPredicate {
        let roll = Int.random(in: 0..<10, using: &random)
        if depth < 2 && roll < 3 {
            let parts = (0..<Int.random(in: 2...3, using: &random)).map { _ in randomPredicate(for: entity, depth: depth + 1, using: &random) }
            return roll == 0 ? .and(parts) : roll == 1 ? .or(parts) : .not(parts[0])
        }
        return .comparison(entity == "User" ? randomUserComparison(using: &random) : randomPostComparison(using: &random))
    }

    static func stringComparison(_ key: [String], using random: inout SeededGenerator) -> FetchPredicate.Comparison {
        let operators: [FetchPredicate.Operator] = [
            .equal, .notEqual, .lessThan, .greaterThanOrEqual, .contains, .beginsWith, .endsWith, .like, .in, .between,
        ]
        let op = operators.randomElement(using: &random) ?? .equal
        let options: FetchPredicate.StringOptions = [[], [.caseInsensitive], [.diacriticInsensitive], [.caseInsensitive, .diacriticInsensitive]]
            .randomElement(using: &random) ?? []
        let word = words.randomElement(using: &random) ?? ""
        let right: FetchPredicate.Expression
        switch op {
        case .in:
            var items = (0..<3).map { _ in FetchPredicate.Expression.value(.string(words.randomElement(using: &random) ?? "")) }
            if Bool.random(using: &random) { items.append(.value(.null)) }
            right = .list(items)
        case .between:
            let pair = [words.randomElement(using: &random) ?? "", words.randomElement(using: &random) ?? ""].sorted {
                ValueComparison.compareScalars(Array($0.unicodeScalars), Array($1.unicodeScalars)) < 0
            }
            right = .list(pair.map { .value(.string($0)) })
        case .like:
            right = .value(.string(["a*", "*b", "?", "*", "é*", "*ü*", "a?b", "O'*"].randomElement(using: &random) ?? "*"))
        case .equal, .notEqual:
            right = Int.random(in: 0..<6, using: &random) == 0 ? .value(.null) : .value(.string(word))
        default:
            right = .value(.string(word))
        }
        let usesOptions = [.equal, .notEqual, .contains, .beginsWith, .endsWith, .like, .in].contains(op)
        return FetchPredicate.Comparison(.keyPath(FetchPredicate.KeyPath(key)), op, right, options: usesOptions ? options : [])
    }

    static func numberComparison(_ key: FetchPredicate.Expression, using random: inout SeededGenerator) -> FetchPredicate.Comparison {
        let operators: [FetchPredicate.Operator] = [.equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual, .in, .between]
        let op = operators.randomElement(using: &random) ?? .equal
        let number = Int64.random(in: -1...61, using: &random)
        let right: FetchPredicate.Expression
        switch op {
        case .in: right = .list((0..<4).map { _ in .value(.integer(Int64.random(in: 0...60, using: &random))) })
        case .between: right = .list([.value(.integer(number)), .value(.integer(number + Int64.random(in: 0...20, using: &random)))])
        case .equal, .notEqual: right = Int.random(in: 0..<5, using: &random) == 0 ? .value(.null) : .value(.integer(number))
        default: right = .value(.integer(number))
        }
        if Int.random(in: 0..<8, using: &random) == 0, [.lessThan, .greaterThan, .equal].contains(op), case .keyPath = key {
            // The constant on the left.
            return FetchPredicate.Comparison(right, op, key)
        }
        return FetchPredicate.Comparison(key, op, right)
    }

    static func randomUserComparison(using random: inout SeededGenerator) -> FetchPredicate.Comparison {
        switch Int.random(in: 0..<6, using: &random) {
        case 0, 1: return stringComparison(["name"], using: &random)
        case 2: return numberComparison(.keyPath(FetchPredicate.KeyPath(["age"])), using: &random)
        case 3: return numberComparison(.count(FetchPredicate.KeyPath(["posts"])), using: &random)
        default:
            var comparison = stringComparison(["posts", "title"], using: &random)
            comparison.quantifier = [FetchPredicate.Quantifier.any, .all, .noneOf].randomElement(using: &random)
            return comparison
        }
    }

    static func randomPostComparison(using random: inout SeededGenerator) -> FetchPredicate.Comparison {
        switch Int.random(in: 0..<5, using: &random) {
        case 0, 1: return stringComparison(["title"], using: &random)
        case 2: return stringComparison(["user", "name"], using: &random)
        case 3: return numberComparison(.keyPath(FetchPredicate.KeyPath(["user", "age"])), using: &random)
        default:
            return FetchPredicate.Comparison(.keyPath(FetchPredicate.KeyPath(["user"])), Bool.random(using: &random) ? .equal : .notEqual, .value(.null))
        }
    }
}
