import Foundation
import PGDataKit
import Testing

@Suite("Foundation #Predicate translated to SQL")
struct FoundationPredicateTests {
    @Test func comparisonsLogicAndOptionals() throws {
        let minimum = 30
        let translated = try FetchPredicate(#Predicate<User> { user in
            user.age != nil && user.age! > minimum && !(user.name == nil)
        })
        #expect(translated == .and([
            .and([
                .comparison(.init(.keyPath(.init(["age"])), .notEqual, .value(.null))),
                .comparison(.init(.keyPath(.init(["age"])), .greaterThan, .value(.integer(30)))),
            ]),
            .not(.comparison(.init(.keyPath(.init(["name"])), .equal, .value(.null)))),
        ]))
    }

    @Test func stringsListsAndRelationships() throws {
        #expect(try FetchPredicate(#Predicate<User> { $0.userID.contains("x") })
            == .comparison(.init(.keyPath(.init(["userID"])), .contains, .value(.string("x")))))
        #expect(try FetchPredicate(#Predicate<User> { $0.userID.starts(with: "u") })
            == .comparison(.init(.keyPath(.init(["userID"])), .beginsWith, .value(.string("u")))))
        #expect(try FetchPredicate(#Predicate<User> { ["a", "b"].contains($0.userID) })
            == .comparison(.init(.keyPath(.init(["userID"])), .in, .list([.value(.string("a")), .value(.string("b"))]))))
        #expect(try FetchPredicate(#Predicate<Post> { $0.user?.name == "Ada" })
            == .comparison(.init(.keyPath(.init(["user", "name"])), .equal, .value(.string("Ada")))))
        #expect(try FetchPredicate(#Predicate<Post> { ($0.title?.starts(with: "A") ?? false) })
            == .comparison(.init(.keyPath(.init(["title"])), .beginsWith, .value(.string("A")))))
        #expect(try FetchPredicate(#Predicate<User> { $0.posts.count > 2 })
            == .comparison(.init(.count(.init(["posts"])), .greaterThan, .value(.integer(2)))))
    }

    @Test func unsupportedExpressionsAreNamedErrors() {
        do {
            _ = try FetchPredicate(#Predicate<User> { ($0.name ?? "") == "x" })
            Issue.record("expected an error")
        } catch let error as FetchPredicateError {
            #expect(error.description.contains("NilCoalesce"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(throws: FetchPredicateError.self) {
            try FetchPredicate(#Predicate<User> { $0.userID.count > 3 })
        }
    }

    @Test func translatedPredicatesRunInTheDatabase() throws {
        try ExampleSchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                for (index, name) in ["Ada", "Bob", nil].enumerated() {
                    let user = User(context: context)
                    user.userID = "u\(index)"
                    user.name = name
                    user.age = 20 + index * 10
                    let post = Post(context: context)
                    post.postID = "p\(index)"
                    post.user = user
                }
                try context.save()
                let limit = 25
                let users = try context.fetch(FetchRequest<User>(
                    predicate: try FetchPredicate(#Predicate<User> { $0.age != nil && $0.age! > limit && $0.name != nil })))
                #expect(users.map(\.userID) == ["u1"])
                let posts = try context.fetch(FetchRequest<Post>(
                    predicate: try FetchPredicate(#Predicate<Post> { $0.user?.name == "Ada" })))
                #expect(posts.map(\.postID) == ["p0"])
            }
        }
    }
}
