import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// `#Predicate` over to-many relationships: `contains(where:)`, `allSatisfy`,
/// `filter(_:).count` and `isEmpty` become the format string's `SUBQUERY` and `@count`,
/// so they run as the same SQL and in memory with the same answers.
@Suite("Foundation #Predicate over to-many relationships")
struct FoundationCollectionPredicateTests {
    @Test func translatesToTheFormatStringsPredicate() throws {
        #expect(try FetchPredicate(#Predicate<User> { $0.posts.contains { $0.title == "Zebra" } })
            == FetchPredicate(format: "SUBQUERY(posts, $x, title == 'Zebra').@count > 0"))
        #expect(try FetchPredicate(#Predicate<User> { $0.posts.allSatisfy { $0.title != nil } })
            == FetchPredicate(format: "SUBQUERY(posts, $x, NOT title != nil).@count == 0"))
        #expect(try FetchPredicate(#Predicate<User> { user in user.posts.filter { $0.title == nil }.count >= 2 })
            == FetchPredicate(format: "SUBQUERY(posts, $x, title == nil).@count >= 2"))
        #expect(try FetchPredicate(#Predicate<User> { $0.posts.isEmpty }) == FetchPredicate(format: "posts.@count == 0"))
        #expect(try FetchPredicate(#Predicate<User> { $0.posts.filter { $0.title == nil }.isEmpty })
            == FetchPredicate(format: "SUBQUERY(posts, $x, title == nil).@count == 0"))
        #expect(try FetchPredicate(#Predicate<Post> { post in post.user?.posts.contains { $0.title == "a" } ?? false })
            == FetchPredicate(format: "SUBQUERY(user.posts, $x, title == 'a').@count > 0"))
    }

    @Test func runsInSQLAndInMemory() throws {
        try PredicateFixture.with { f in
            try f.check(User.self, try FetchPredicate(#Predicate<User> { $0.posts.contains { $0.title == "Zebra" } }), ["ada"])
            try f.check(User.self, try FetchPredicate(#Predicate<User> { $0.posts.allSatisfy { $0.title != nil } }),
                        ["ada", "anon", "bob", "ce"])
            try f.check(User.self, try FetchPredicate(#Predicate<User> { user in
                user.posts.filter { $0.title?.starts(with: "a") ?? false }.count >= 2
            }), ["bob"])
            try f.check(User.self, try FetchPredicate(#Predicate<User> { $0.posts.isEmpty }), ["ce"])
            try f.check(User.self, try FetchPredicate(#Predicate<User> { !$0.posts.isEmpty && $0.posts.count < 2 }), ["anon"])
            try f.check(Writer.self, try FetchPredicate(#Predicate<Writer> { writer in
                writer.articles.contains { $0.score != nil && $0.score! > 3 }
            }), ["w1", "w4", "w5"])
            try f.check(User.self, try FetchPredicate(#Predicate<User> { user in
                user.posts.contains { post in post.user?.posts.contains { $0.title == "Zebra" } ?? false }
            }), ["ada"])
            let ada = try f.saved(User.self, "ada")
            try f.check(Post.self, FetchPredicate.and([
                try FetchPredicate(#Predicate<Post> { $0.title != nil }),
                try FetchPredicate(format: "user == %@", ada),
            ]), ["p1", "p2"], copies: false)
        }
    }

    @Test func whatCannotBeTranslatedIsANamedError() {
        func expectError(_ fragment: String, _ make: () throws -> FetchPredicate, sourceLocation: SourceLocation = #_sourceLocation) {
            do {
                let predicate = try make()
                Issue.record("translated to \(predicate)", sourceLocation: sourceLocation)
            } catch let error as FetchPredicateError {
                #expect(error.message.contains(fragment), "\(error.message)", sourceLocation: sourceLocation)
            } catch {
                Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
            }
        }
        expectError("outside its closure") {
            try FetchPredicate(#Predicate<User> { user in user.posts.contains { $0.title == user.name } })
        }
        expectError("max() and min()") { try FetchPredicate(#Predicate<Writer> { _ in [1, 2].max() == 2 }) }
        expectError("only .count of filter") {
            try FetchPredicate(#Predicate<User> { $0.posts.filter { $0.title == nil }.capacity > 0 })
        }
    }
}
