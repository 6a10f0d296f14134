import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Predicates both engines refuse with the same `FetchPredicateError`, before any SQL
/// reaches the server.
@Suite("Predicate errors in SQL and in memory")
struct PredicateErrorTests {
    @Test func unquantifiedToManyKeyPathsNameTheKeyPathAndSuggestANY() throws {
        try PredicateFixture.with { f in
            let p1 = try f.saved(Post.self, "p1")
            for (format, arguments, path) in [
                ("posts.title == 'x'", [], "posts.title"), ("posts.title CONTAINS 'x'", [], "posts.title"),
                ("name == posts.title", [], "posts.title"), ("posts == %@", [p1], "posts"),
                ("NOT posts.title BEGINSWITH 'a'", [], "posts.title"),
            ] as [(String, [Any?], String)] {
                let predicate = try FetchPredicate(format: format, argumentArray: arguments)
                try f.expectError(User.self, predicate, "\(path) goes through the to-many relationship User.posts")
                try f.expectError(User.self, predicate, "ANY")
            }
            try f.expectError(Post.self, try FetchPredicate(format: "user.posts.title == 'x'"), "ANY user.posts.title")
            try f.expectError(Writer.self, try FetchPredicate(format: "articles.writer.articles.@count > 1"),
                              "crosses more than one to-many relationship")
        }
    }

    /// Where a string with NUL cannot simply match nothing (an order, a pattern, a
    /// substring of it), it is a typed error, never a server error; where it can
    /// (`==`, `CONTAINS`…) it matches nothing (`PredicateInputTests`).
    @Test func stringsWithNULAreTypedErrorsNeverServerErrors() throws {
        try PredicateFixture.with { f in
            for (format, argument) in [
                ("name MATCHES %@", "a\0?"), ("name BETWEEN %@", ["a", "b\0"]), ("%@ IN posts.title", "\0"),
                ("name < %@", "\0"), ("%@ CONTAINS name", "a\0"), ("name IN %@", "a\0b"),
                ("SUBQUERY(posts, $p, $p.title >= %@).@count > 0", "\0"),
            ] as [(String, Any)] {
                try f.expectError(User.self, try FetchPredicate(format: format, argument), "NUL")
            }
            try f.expectError(User.self, try FetchPredicate(format: "name > $N").substituting(["N": "\0"]), "NUL")
            try f.expectError(Writer.self, try FetchPredicate(format: "rating > %@", Double.nan), "NaN")
        }
    }

    @Test func typeMismatchesAreTheSameErrorInBothEngines() throws {
        try PredicateFixture.with { f in
            try f.expectError(Writer.self, try FetchPredicate(format: "age == name"), "cannot compare age (Int?) with name (String?)")
            try f.expectError(Writer.self, try FetchPredicate(format: "name CONTAINS age"), "CONTAINS applies to strings only; age (Int?)")
            try f.expectError(Writer.self, try FetchPredicate(format: "age == 'x'"), "cannot compare age (Int?)")
            // An argument is a bound value: the message names its kind, not the value.
            try f.expectError(Writer.self, try FetchPredicate(format: "age == %@", "s3cret"), "cannot compare age (Int?) with a string")
            try f.expectError(Post.self, try FetchPredicate(format: "user < %@", 3), "cannot compare the relationship")
            try f.expectError(Post.self, try FetchPredicate(format: "SELF == user"), "cannot compare Post objects with User objects")
            try f.expectError(User.self, try FetchPredicate(format: "name IN age"), "IN needs a list, a to-many key path or a string")
            try f.expectError(User.self, try FetchPredicate(format: "age IN name"), "applies to strings only; age (Int?)")
            try f.expectError(User.self, try FetchPredicate(format: "SUBQUERY(posts, $p, $p.nosuchkey == 1).@count > 0"),
                              "Post has no key \"nosuchkey\"")
            try f.expectError(User.self, try FetchPredicate(format: "SUBQUERY(name, $p, $p == 1).@count > 0"),
                              "SUBQUERY needs a to-many key path")
            try f.expectError(Writer.self, try FetchPredicate(format: "articles.@avg.title > 1"), "it needs numbers")
            try f.expectError(Writer.self, try FetchPredicate(format: "articles.@max.tag != nil"), "strings, numbers or dates")
            try f.expectError(User.self, try FetchPredicate(format: "name MATCHES %@", "(a"), "MATCHES pattern")
            try f.expectError(User.self, try FetchPredicate(format: "ANY posts IN %@", [1.5]), "compare it with an object")
        }
    }
}
