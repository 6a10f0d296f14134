import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The operator families of issue 13, each case with the objects it selects written
/// out, each run in SQL (saved rows) and in memory (the same objects, and unsaved
/// copies) — see `PredicateFixture.check`.
@Suite("Predicate operator families in SQL and in memory")
struct PredicateFamilyTests {
    enum Family: String, CaseIterable, Sendable {
        case membership, toOneAndSelf, keyPathsOnTheRight, numbersAcrossTypes, specifiersAndValues
        case aggregates, subqueries, likeEscapes, orderingWithOptions
    }

    @Test(arguments: Family.allCases)
    func family(_ family: Family) throws {
        try PredicateFixture.with { fixture in
            switch family {
            case .membership: try membership(fixture)
            case .toOneAndSelf: try toOneAndSelf(fixture)
            case .keyPathsOnTheRight: try keyPathsOnTheRight(fixture)
            case .numbersAcrossTypes: try numbersAcrossTypes(fixture)
            case .specifiersAndValues: try specifiersAndValues(fixture)
            case .aggregates: try aggregates(fixture)
            case .subqueries: try subqueries(fixture)
            case .likeEscapes: try likeEscapes(fixture)
            case .orderingWithOptions: try orderingWithOptions(fixture)
            }
        }
    }

    // Users: ada {p1 "apple pie", p2 "Zebra"}, bob {p3 "about", p4 "b*x", p9 "a\b",
    // p10 "box"}, ce {}, anon {p5 "a?c"}, ada2 {p6 "Ada", p7 nil}; p8 "orphan" and
    // p11 "abc" have no user.

    func membership(_ f: PredicateFixture) throws {
        let p1 = try f.saved(Post.self, "p1"), p2 = try f.saved(Post.self, "p2"), p3 = try f.saved(Post.self, "p3")
        let p4 = try f.saved(Post.self, "p4"), p5 = try f.saved(Post.self, "p5"), p6 = try f.saved(Post.self, "p6")
        try f.check(User.self, "ANY posts IN %@", [[p1, p3]], ["ada", "bob"], copies: false)
        try f.check(User.self, "SOME posts IN %@", [[p1, p3]], ["ada", "bob"], copies: false)
        try f.check(User.self, "NONE posts IN %@", [[p1, p3]], ["ce", "anon", "ada2"], copies: false)
        try f.check(User.self, "ALL posts IN %@", [[p1, p2, p5]], ["ada", "ce", "anon"], copies: false)
        try f.check(User.self, "NOT (ANY posts IN %@)", [[p1, p3]], ["ce", "anon", "ada2"], copies: false)
        try f.check(User.self, "%@ IN posts", [p3], ["bob"], copies: false)
        try f.check(User.self, "%@ IN posts", [p4.objectID], ["bob"], copies: false)
        try f.check(User.self, "posts CONTAINS %@", [p6], ["ada2"], copies: false)
        try f.check(User.self, "ANY posts == %@", [p5], ["anon"], copies: false)
        try f.check(User.self, "ANY posts != %@", [p6], ["ada", "bob", "anon", "ada2"], copies: false)
        // Values: `%@ IN toManyKeyPath`.
        try f.check(User.self, "%@ IN posts.title", ["Zebra"], ["ada"])
        try f.check(User.self, "'ZEBRA' IN[c] posts.title", [], ["ada"])
        try f.check(User.self, "NOT ('about' IN posts.title)", [], ["ada", "ce", "anon", "ada2"])
        try f.check(User.self, "ANY posts.title IN %@", [["Ada", "a?c"]], ["anon", "ada2"])
        try f.check(User.self, "NONE posts.title IN {'Ada', 'a?c'}", [], ["ada", "bob", "ce"])
        // A string on the right of IN is a substring test, as in NSPredicate.
        try f.check(User.self, "name IN 'Ada Lovelace'", [], ["ada"])
        try f.check(User.self, "name IN[c] 'Ada Lovelace'", [], ["ada", "ada2"])
        try f.check(User.self, "ANY posts.title IN[c] name", [], ["ada2"])
        try f.check(User.self, "ANY posts.title IN 'Zebra and apple pie'", [], ["ada"])
        try f.check(User.self, "ALL posts.title IN 'Zebra and apple pie'", [], ["ada", "ce"])
        try f.check(Post.self, "title IN user.name", [], [])
        try f.check(Post.self, "title IN[c] user.name", [], ["p6"])
    }

    func toOneAndSelf(_ f: PredicateFixture) throws {
        let ada = try f.saved(User.self, "ada"), bob = try f.saved(User.self, "bob"), ce = try f.saved(User.self, "ce")
        let anon = try f.saved(User.self, "anon")
        let p6 = try f.saved(Post.self, "p6"), p7 = try f.saved(Post.self, "p7"), p8 = try f.saved(Post.self, "p8")
        try f.check(Post.self, "user IN %@", [[ada, anon]], ["p1", "p2", "p5"], copies: false)
        try f.check(Post.self, "user == %@", [bob], ["p3", "p4", "p9", "p10"], copies: false)
        try f.check(Post.self, "NOT user IN %@", [[ada]], ["p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11"], copies: false)
        try f.check(Post.self, "user == nil", [], ["p8", "p11"])
        try f.check(User.self, "SELF IN %@", [[ada, ce]], ["ada", "ce"], copies: false)
        try f.check(User.self, "SELF == %@", [bob], ["bob"], copies: false)
        try f.check(User.self, "SELF != %@", [bob], ["ada", "ce", "anon", "ada2"], copies: false)
        try f.check(User.self, "NOT SELF IN %@", [[ada.objectID]], ["bob", "ce", "anon", "ada2"], copies: false)
        try f.check(User.self, "%@ == SELF", [ce], ["ce"], copies: false)
        try f.check(Post.self, "SELF IN %@ AND title != nil", [[p7, p8]], ["p8"], copies: false)
        try f.check(User.self, "SUBQUERY(posts, $p, $p IN %@).@count > 0", [[p6]], ["ada2"], copies: false)
        try f.check(User.self, "SUBQUERY(posts, $p, SELF == %@).@count == 1", [p6], ["ada2"], copies: false)
        try f.check(User.self, "SELF.name == 'bob'", [], ["bob"])
    }

    func keyPathsOnTheRight(_ f: PredicateFixture) throws {
        try f.check(Post.self, "title ==[c] user.name", [], ["p6"])
        try f.check(Post.self, "title == user.name", [], [])
        try f.check(Post.self, "title != user.name", [], ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11"])
        try f.check(Post.self, "title CONTAINS[c] user.name", [], ["p6"])
        try f.check(Post.self, "title BEGINSWITH[cd] user.name", [], ["p6"])
        try f.check(Post.self, "user.name ENDSWITH[c] title", [], ["p6"])
        try f.check(Post.self, "title LIKE[c] user.name", [], ["p6"])
        try f.check(Post.self, "title < user.name", [], ["p3", "p4", "p6", "p9"])
        try f.check(Post.self, "title <[c] user.name", [], ["p3", "p4", "p9"])
        try f.check(Post.self, "user.name >= title", [], ["p3", "p4", "p6", "p9"])
        try f.check(Post.self, "'apple pie and more' BEGINSWITH title", [], ["p1"])
        try f.check(Post.self, "'xx Zebra xx' CONTAINS[c] title", [], ["p2"])
        try f.check(Writer.self, "name LIKE nickname", [], ["w5"])
        try f.check(Writer.self, "name LIKE[cd] nickname", [], ["w3", "w5"])
        try f.check(Writer.self, "name CONTAINS[c] nickname", [], ["w1"])
        try f.check(Writer.self, "name BEGINSWITH nickname", [], [])
        try f.check(Article.self, "title LIKE writer.nickname", [], ["a4"])
        try f.check(Article.self, "title MATCHES writer.nickname", [], ["a4"])
        try f.check(Article.self, "title MATCHES[c] writer.name", [], ["a6"])
        try f.check(Writer.self, "age == rating", [], ["w3"])
        try f.check(Writer.self, "age < rating", [], ["w5"])
        try f.check(Writer.self, "rating >= age", [], ["w3", "w5"])
        try f.check(Article.self, "score == pages", [], ["a4", "a5", "a7", "a8"])  // nil == nil, as in NSPredicate
        try f.check(Article.self, "weight <= price", [], ["a1", "a2", "a3", "a5", "a6", "a7", "a8"])
        try f.check(Article.self, "weight > price", [], [])
        try f.check(Article.self, "score < writer.age", [], ["a1", "a2", "a3", "a6", "a7"])
        try f.check(Article.self, "score BETWEEN {pages, 10}", [], ["a5", "a7", "a8"])
    }

    // Writers: w1 Ada 36 rating 4.5; w2 bob 25 nil; w3 Cé 40 40.0; w4 nil nil 2.0;
    // w5 ada 41 41.5. Articles (score, pages, weight, price): a1 5 100 1.5 9.99, a2 1
    // 20 0.25 1.01, a3 3 300 2.0 5, a4 nil…, a5 7 7 3.5 7.5, a6 2 40000 0.5 2, a7 4 4
    // 4.0 4.25, a8 9 9 9.0 9.

    func numbersAcrossTypes(_ f: PredicateFixture) throws {
        try f.check(Writer.self, "age > 40.5", [], ["w5"])
        try f.check(Writer.self, "age > %f", [40.5], ["w5"])
        try f.check(Writer.self, "age == 40.0", [], ["w3"])
        try f.check(Writer.self, "age == 40.5", [], [])
        try f.check(Writer.self, "age != 40.5", [], ["w1", "w2", "w3", "w4", "w5"])
        try f.check(Writer.self, "age < 36.5", [], ["w1", "w2"])
        try f.check(Writer.self, "age >= %@", [Decimal(string: "40.5")], ["w5"])
        try f.check(Writer.self, "age BETWEEN {25.5, 40}", [], ["w1", "w3"])
        try f.check(Writer.self, "age IN {36, 40.5, 41.0}", [], ["w1", "w5"])
        try f.check(Writer.self, "rating > 4", [], ["w1", "w3", "w5"])
        try f.check(Writer.self, "rating == %@", [Decimal(string: "4.5")], ["w1"])
        try f.check(Article.self, "pages > 35000.5", [], ["a6"])
        try f.check(Article.self, "pages < 7.5", [], ["a5", "a7"])
        try f.check(Article.self, "pages == 100000", [], [])
        try f.check(Article.self, "pages < 10000000000", [], ["a1", "a2", "a3", "a5", "a6", "a7", "a8"])
        try f.check(Article.self, "price > 5", [], ["a1", "a5", "a8"])
        try f.check(Article.self, "price > 4.5", [], ["a1", "a3", "a5", "a8"])
        try f.check(Article.self, "price == 9.99", [], ["a1"])
        try f.check(Article.self, "weight == 0.25", [], ["a2"])
        try f.check(Article.self, "weight > %@", [2], ["a5", "a7", "a8"])
        // [c] on a non-string comparison is ignored, as in NSPredicate.
        try f.check(Writer.self, "age ==[c] 36", [], ["w1"])
        try f.check(Article.self, "score IN[cd] {1, 2}", [], ["a2", "a6"])
        try f.check(Writer.self, "age >[c] 40", [], ["w5"])
    }

    func specifiersAndValues(_ f: PredicateFixture) throws {
        try f.check(Article.self, "score == %hi", [Int16(5)], ["a1"])
        try f.check(Article.self, "score == %lu", [UInt(3)], ["a3"])
        try f.check(Article.self, "score == %lld", [Int64(7)], ["a5"])
        try f.check(Article.self, "score == %u", [UInt32(9)], ["a8"])
        try f.check(Article.self, "weight == %e", [1.5], ["a1"])
        try f.check(Article.self, "weight == %g", [0.25], ["a2"])
        try f.check(Article.self, "pages > %le", [Float(299.5)], ["a3", "a6"])
        try f.check(Article.self, "price == %@", [Decimal(string: "7.5")], ["a5"])
        try f.check(Article.self, "price == %@", [NSDecimalNumber(string: "4.25")], ["a7"])
        try f.check(Article.self, "tag == %@", [PredicateFixture.tags[0]], ["a1"])
        try f.check(Article.self, "tag IN %@", [PredicateFixture.tags], ["a1", "a2"])
        try f.check(Article.self, "tag != %@", [PredicateFixture.tags[0]], ["a2", "a3", "a4", "a5", "a6", "a7", "a8"])
        try f.check(Article.self, "blob == %@", [Data([0, 255])], ["a2"])
        try f.check(Article.self, "blob > %@", [Data([1])], ["a1"])
        // Dates compare at the microsecond they are stored with.
        let early = Date(timeIntervalSince1970: 961_070_400.123456)
        try f.check(Writer.self, "born > %@", [early], ["w5"])
        try f.check(Writer.self, "born == %@", [early], ["w2"])
        try f.check(Writer.self, "born == %@", [Date(timeIntervalSince1970: 961_070_400.1234561)], ["w2"])
        try f.check(Writer.self, "born BETWEEN %@", [[Date(timeIntervalSince1970: -1), early]], ["w1", "w2", "w4"])
        try f.check(Writer.self, "born < %@", [NSDate(timeIntervalSince1970: 1)], ["w4"])
    }

    func aggregates(_ f: PredicateFixture) throws {
        // Scores: w1 {5, 1}, w2 {3, nil}, w3 {}, w4 {7}, w5 {2, 4}.
        try f.check(Writer.self, "articles.@max.score > 4", [], ["w1", "w4"])
        try f.check(Writer.self, "articles.@min.score < 2", [], ["w1"])
        try f.check(Writer.self, "articles.@sum.score == 6", [], ["w1", "w5"])
        try f.check(Writer.self, "articles.@sum.score == 0", [], ["w3"])
        try f.check(Writer.self, "articles.@avg.score > 3", [], ["w4"])
        try f.check(Writer.self, "articles.@avg.score == 3", [], ["w1", "w2", "w5"])
        try f.check(Writer.self, "articles.@avg.score == nil", [], ["w3"])
        try f.check(Writer.self, "articles.@max.score == nil", [], ["w3"])
        try f.check(Writer.self, "articles.@avg.weight >= 1", [], ["w2", "w4", "w5"])
        try f.check(Writer.self, "articles.@sum.weight == 1.75", [], ["w1"])
        try f.check(Writer.self, "articles.@sum.price > 10", [], ["w1"])
        try f.check(Writer.self, "articles.@sum.price == 11", [], ["w1"])
        try f.check(Writer.self, "articles.@avg.price == 5.5", [], ["w1"])
        try f.check(Writer.self, "articles.@max.pages >= 300", [], ["w2", "w5"])
        try f.check(Writer.self, "articles.@max.title == 'apple pie'", [], ["w1"])
        try f.check(Writer.self, "articles.@min.title BEGINSWITH 'A'", [], ["w5"])
        try f.check(Writer.self, "articles.@sum.score < age", [], ["w1", "w2", "w3", "w5"])
        try f.check(Writer.self, "articles.@avg.score < rating", [], ["w1", "w5"])
        try f.check(Writer.self, "%K > 4", ["articles.@max.score"], ["w1", "w4"])
        try f.check(Article.self, "writer.articles.@max.score == score", [], ["a1", "a3", "a5", "a7"])
        try f.check(Article.self, "writer.articles.@count == 2", [], ["a1", "a2", "a3", "a4", "a6", "a7"])
        try f.check(User.self, "posts.@min.title == 'Zebra'", [], ["ada"])
        try f.check(User.self, "posts.@max.title < 'b'", [], ["ada", "anon", "ada2"])
        try f.expectError(Writer.self, try FetchPredicate(format: "articles.@sum.title > 1"), "@sum cannot be taken")
        try f.expectError(Writer.self, try FetchPredicate(format: "name.@max.score > 1"), "to-many")
    }

    func subqueries(_ f: PredicateFixture) throws {
        try f.check(Writer.self, "SUBQUERY(articles, $a, $a.title BEGINSWITH 'a' AND $a.score > 3).@count > 0", [], ["w1", "w4"])
        try f.check(Writer.self, "SUBQUERY(articles, $a, $a.score > 2).@count == 1", [], ["w1", "w2", "w4", "w5"])
        try f.check(Writer.self, "SUBQUERY(articles, $a, $a.score > 2).@count == 0", [], ["w3"])
        try f.check(Writer.self, "SUBQUERY(articles, $a, $a.score != nil).@count >= 2", [], ["w1", "w5"])
        try f.check(Writer.self, "SUBQUERY(articles, $a, score > 2 AND NOT title BEGINSWITH 'a').@count > 0", [], ["w5"])
        try f.check(Writer.self, "SUBQUERY(articles, $a, $a.price < 5).@count < SUBQUERY(articles, $b, $b.price >= 5).@count", [], ["w2", "w4"])
        try f.check(Writer.self, "NOT SUBQUERY(articles, $a, ANY $a.writer.articles.score == 7).@count > 0", [],
                    ["w1", "w2", "w3", "w5"])
        try f.check(User.self, "SUBQUERY(posts, $p, SUBQUERY($p.user.posts, $q, $q.title == 'Zebra').@count > 0).@count > 0", [], ["ada"])
        try f.check(User.self, "SUBQUERY(posts, $p, ANY $p.user.posts.title == 'Zebra').@count > 0", [], ["ada"])
        try f.check(Post.self, "SUBQUERY(user.posts, $q, $q.title BEGINSWITH 'a').@count >= 2", [], ["p3", "p4", "p9", "p10"])
        try f.check(User.self, "SUBQUERY(posts, $p, $p.title LIKE[c] 'A*').@count == posts.@count", [], ["ce", "anon"])
    }

    func likeEscapes(_ f: PredicateFixture) throws {
        try f.check(Post.self, "title LIKE 'b*x'", [], ["p4", "p10"])
        try f.check(Post.self, #"title LIKE 'b\\*x'"#, [], ["p4"])
        try f.check(Post.self, "title LIKE %@", [#"b\*x"#], ["p4"])
        try f.check(Post.self, "title LIKE 'a?c'", [], ["p5", "p11"])
        try f.check(Post.self, #"title LIKE 'a\\?c'"#, [], ["p5"])
        try f.check(Post.self, #"title LIKE[c] 'A\\?C'"#, [], ["p5"])
        try f.check(Post.self, #"title LIKE 'a\\\\b'"#, [], ["p9"])
        try f.check(Post.self, "title LIKE %@", [#"a\\*"#], ["p9"])
        try f.check(Post.self, "title LIKE %@", [#"a\"#], [])
        try f.check(Post.self, "title LIKE %@", [#"\a\b\o\u\t"#], ["p3"])
        try f.check(Post.self, "title LIKE %@", ["%"], [])
        try f.check(Post.self, "title LIKE %@", ["_bc"], [])
    }

    func orderingWithOptions(_ f: PredicateFixture) throws {
        try f.check(User.self, "name < 'b'", [], ["ada", "ada2", "ce"])
        try f.check(User.self, "name <[c] 'b'", [], ["ada", "ada2"])
        try f.check(User.self, "name >=[cd] 'ce'", [], ["ce"])
        try f.check(User.self, "name BETWEEN[c] {'a', 'az'}", [], ["ada", "ada2"])
        try f.check(User.self, "name >[d] 'Ce'", [], ["ada2", "bob"])
        try f.check(User.self, "name <=[cd] 'CE'", [], ["ada", "ada2", "bob", "ce"])
    }
}
