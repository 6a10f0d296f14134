import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Fetching an entity hierarchy (issue 48): the root returns both kinds as their classes,
/// a sub-entity only its own kind (the statement filters the discriminator), predicates,
/// sorts and paging across kinds, counts, aggregates, batch updates and deletes.
/// The data is `InheritanceSchema.seed`: articles Alpha (3) and Beta (1), videos Apex (2)
/// and Bravo (4).
@Suite("Entity inheritance: fetching")
struct EntityInheritanceFetchTests {
    typealias S = InheritanceSchema

    /// Runs `body` in a fresh private context of a manager over the seeded data.
    private func withSeededContext(_ body: (ContextManager, ManagedObjectContext) throws -> Void) throws {
        try S.withManager { manager in
            try S.seed(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait { try body(manager, context) }
        }
    }

    @Test func theRootReturnsBothKindsAsTheirClassesWithTheirOwnAttributes() throws {
        try withSeededContext { _, context in
            let contents = try context.fetch(FetchRequest<FeedContent>(sortDescriptors: [FetchSortDescriptor("rank")]))
            #expect(S.kinds(contents) == ["Article:Beta", "Video:Apex", "Article:Alpha", "Video:Bravo"])
            let beta = try #require(contents[0] as? FeedArticle)
            #expect(beta.body == "beta body" && beta.slug == "beta" && beta.folder?.name == "archive")
            let bravo = try #require(contents[3] as? FeedVideo)
            #expect(bravo.seconds == 90 && bravo.folder == nil)
            #expect(Set(contents.map(\.objectID.entityName)) == ["Content"])
            // fetchAll and the one-liners agree.
            #expect(S.kinds(try context.fetchAll(FeedContent.self)).sorted() == S.kinds(contents).sorted())
            #expect(S.kinds(try FeedContent.fetchAll(in: context)).count == 4)
            // The rows come as objects once: a second fetch gives the same instances.
            #expect(try context.fetchAll(FeedContent.self).contains { $0 === beta })
            #expect(try context.fetchAll(FeedArticle.self).contains { $0 === beta })
        }
    }

    @Test func predicatesSortsAndPagingOnInheritedAttributesWorkAcrossKinds() throws {
        try withSeededContext { _, context in
            let startingWithA = try FeedContent.fetch(in: context, where: "title BEGINSWITH 'A'", sortedBy: [FetchSortDescriptor("title")])
            #expect(S.kinds(startingWithA) == ["Article:Alpha", "Video:Apex"])
            let ranked = [FetchSortDescriptor("rank", ascending: false)]
            var request = FetchRequest<FeedContent>(sortDescriptors: ranked, fetchLimit: 2, fetchOffset: 1)
            #expect(S.kinds(try context.fetch(request)) == ["Article:Alpha", "Video:Apex"])
            request.predicate = try FetchPredicate(format: "rank >= %d", 2)
            request.fetchOffset = 2
            #expect(S.kinds(try context.fetch(request)) == ["Video:Apex"])
            // Sort on two keys, one of them the relationship's attribute.
            let byFolder = try context.fetch(
                FetchRequest<FeedContent>(
                    predicate: try FetchPredicate(format: "folder != nil"),
                    sortDescriptors: [FetchSortDescriptor("folder.name"), FetchSortDescriptor("title", ascending: false)]))
            #expect(S.kinds(byFolder) == ["Article:Beta", "Video:Apex", "Article:Alpha"])
            #expect(S.kinds(try FeedContent.fetch(in: context, where: "folder.name == 'inbox'", sortedBy: [FetchSortDescriptor("rank")])) == ["Video:Apex", "Article:Alpha"])
            #expect(try context.fetchObjectIDs(FetchRequest<FeedContent>(format: "rank > 2")).count == 2)
            // Prefetching the relationship of both kinds.
            var prefetching = FetchRequest<FeedContent>(sortDescriptors: [FetchSortDescriptor("title")])
            prefetching.relationshipKeyPathsForPrefetching = ["folder"]
            #expect(try context.fetch(prefetching).map { $0.folder?.name ?? "-" } == ["inbox", "inbox", "archive", "-"])
        }
    }

    @Test func aSubEntityReturnsOnlyItsKindEvenWhenThePredicateMatchesBoth() throws {
        try withSeededContext { _, context in
            // A fresh context: what comes back is what the statement returned.
            let articles = try FeedArticle.fetch(in: context, where: "title BEGINSWITH 'A' OR rank > 0", sortedBy: [FetchSortDescriptor("rank")])
            #expect(S.kinds(articles) == ["Article:Beta", "Article:Alpha"])
            #expect(articles.map(\.body) == ["beta body", "alpha body"])
            let videos = try context.fetch(FetchRequest<FeedVideo>(format: "title BEGINSWITH 'A'"))
            #expect(S.kinds(videos) == ["Video:Apex"])
            #expect(try FeedVideo.first(in: context, sortedBy: [FetchSortDescriptor("rank", ascending: false)])?.title == "Bravo")
            // Their own attributes in predicates and sorts.
            #expect(try FeedVideo.fetch(in: context, where: "seconds > 70").map(\.title) == ["Bravo"])
            #expect(try FeedArticle.fetch(in: context, where: "body CONTAINS 'alp'").map(\.title) == ["Alpha"])
            #expect(try FeedArticle.fetch(in: context, sortedBy: [FetchSortDescriptor("slug", ascending: false)]).map(\.title) == ["Beta", "Alpha"])
            // Now every row is registered: a fetch of one kind still leaves the other out.
            #expect(try context.fetchAll(FeedContent.self).count == 4)
            #expect(S.kinds(try context.fetchAll(FeedVideo.self)).sorted() == ["Video:Apex", "Video:Bravo"])
            #expect(try context.fetchObjectIDs(FetchRequest<FeedArticle>(format: "rank > 0")).count == 2)
            var limited = FetchRequest<FeedVideo>(sortDescriptors: [FetchSortDescriptor("title")], fetchLimit: 1, fetchOffset: 1)
            #expect(try context.fetch(limited).map(\.title) == ["Bravo"])
            limited.fetchOffset = 2
            #expect(try context.fetch(limited).isEmpty)
        }
    }

    @Test func dictionariesAndBatchesFollowTheKind() throws {
        try withSeededContext { _, context throws in
            let articles = try context.fetchDictionaries(FetchRequest<FeedArticle>(sortDescriptors: [FetchSortDescriptor("title")]))
            #expect(articles.map { $0["title"] as? String } == ["Alpha", "Beta"])
            #expect(articles.map { $0["body"] as? String } == ["alpha body", "beta body"])
            var all = FetchRequest<FeedContent>(sortDescriptors: [FetchSortDescriptor("rank")])
            all.propertiesToFetch = ["title", "folder.name"]
            let contents = try context.fetchDictionaries(all)
            #expect(contents.map { $0["title"] as? String } == ["Beta", "Apex", "Alpha", "Bravo"])
            #expect(contents.map { $0["folder.name"] as? String } == ["archive", "inbox", "inbox", nil])
            // Batches of one: each row as its class, with its own attributes.
            all.fetchBatchSize = 1
            var batches: [[String]] = []
            var seconds: [Int] = []
            try context.fetch(all) { batch in
                batches.append(S.kinds(batch))
                seconds += batch.compactMap { ($0 as? FeedVideo)?.seconds }
            }
            #expect(batches == [["Article:Beta"], ["Video:Apex"], ["Article:Alpha"], ["Video:Bravo"]])
            #expect(seconds == [60, 90])
        }
    }

    @Test func countsExistsAggregatesAndDistinctValuesFollowTheKind() throws {
        try withSeededContext { _, context in
            #expect(try FeedContent.count(in: context) == 4)
            #expect(try FeedVideo.count(in: context) == 2 && FeedArticle.count(in: context) == 2)
            #expect(try FeedArticle.count(in: context, where: "title BEGINSWITH 'A'") == 1)
            #expect(try FeedContent.count(in: context, where: "title BEGINSWITH 'A'") == 2)
            #expect(try context.count(for: FetchRequest<FeedVideo>(format: "rank < 3")) == 1)
            #expect(try FeedVideo.exists(in: context, where: "title == 'Apex'"))
            #expect(try !FeedVideo.exists(in: context, where: "title == 'Alpha'"))
            let allRanks: Int? = try FeedContent.aggregate(.sum, of: "rank", in: context)
            let videoRanks: Int? = try FeedVideo.aggregate(.sum, of: "rank", in: context)
            let articleMax: Int? = try FeedArticle.aggregate(.max, of: "rank", in: context)
            #expect(allRanks == 10 && videoRanks == 6 && articleMax == 3)
            #expect(try FeedVideo.distinctValues(of: "title", as: String.self, in: context) == ["Apex", "Bravo"])
            let bySlug: [String: FeedArticle] = try FeedArticle.fetchAsDictionary(keyedBy: "slug", in: context)
            #expect(bySlug.keys.sorted() == ["alpha", "beta"])
        }
    }

    @Test func pendingObjectsOfEachKindCountWhereTheyBelong() throws {
        try withSeededContext { _, context in
            S.article("Aardvark", rank: 0, slug: "aardvark", folder: nil, in: context)
            S.video("Abyss", rank: 9, seconds: 5, folder: nil, in: context)
            let deleted = try #require(try FeedVideo.first(in: context, where: "title == 'Apex'"))
            deleted.delete()
            let startingWithA = try FeedContent.fetch(in: context, where: "title BEGINSWITH 'A'", sortedBy: [FetchSortDescriptor("title")])
            #expect(S.kinds(startingWithA) == ["Article:Aardvark", "Video:Abyss", "Article:Alpha"])
            #expect(S.kinds(try FeedArticle.fetch(in: context, where: "title BEGINSWITH 'A'", sortedBy: [FetchSortDescriptor("title")])) == ["Article:Aardvark", "Article:Alpha"])
            #expect(S.kinds(try context.fetchAll(FeedVideo.self)).sorted() == ["Video:Abyss", "Video:Bravo"])
            #expect(try FeedContent.count(in: context) == 5)
            #expect(try FeedVideo.count(in: context) == 2)
            #expect(try FeedArticle.count(in: context) == 3)
            var top = FetchRequest<FeedContent>(sortDescriptors: [FetchSortDescriptor("rank", ascending: false)], fetchLimit: 2)
            #expect(S.kinds(try context.fetch(top)) == ["Video:Abyss", "Video:Bravo"])
            top.includesPendingChanges = false
            #expect(S.kinds(try context.fetch(top)) == ["Video:Bravo", "Article:Alpha"])
            // An unsaved change that makes a stored video match, evaluated in memory.
            try #require(try FeedVideo.first(in: context, where: "title == 'Bravo'")).title = "Azure"
            #expect(S.kinds(try FeedContent.fetch(in: context, where: "title BEGINSWITH 'Az'")) == ["Video:Azure"])
            #expect(try FeedArticle.fetch(in: context, where: "title BEGINSWITH 'Az'").isEmpty)
            #expect(try FeedContent.count(in: context, where: "title BEGINSWITH 'Az'") == 1)
        }
    }

    @Test func batchUpdatesAndDeletesOfASubEntityTouchOnlyItsRows() throws {
        try withSeededContext { manager, context throws in
            // Apex matches too, but is a video.
            #expect(try FeedArticle.updateAll(in: context, set: ["rank": 10], where: "title BEGINSWITH 'A'") == 1)
            // Both kinds through the root.
            #expect(try FeedContent.updateAll(in: context, set: ["rank": 0], where: "title BEGINSWITH 'B'") == 2)
            // No predicate: the articles' rows only (a video's body would be set too).
            #expect(try FeedArticle.updateAll(in: context, set: ["body": "all"]) == 2)
            try S.expectRows(manager, [
                    "Article:Alpha:10:all:alpha:inbox", "Video:Apex:2:60:inbox", "Article:Beta:0:all:beta:archive",
                    "Video:Bravo:0:90:-",
                ])
            // Every row matches the predicate; only videos go.
            #expect(try FeedVideo.deleteAll(in: context, where: "rank >= 0") == 2)
            try S.expectRows(manager, ["Article:Alpha:10:all:alpha:inbox", "Article:Beta:0:all:beta:archive"])
            #expect(try FeedContent.deleteAll(in: context, where: "rank == 10") == 1)
            try S.expectRows(manager, ["Article:Beta:0:all:beta:archive"])
            // An attribute of another kind is not one of this kind's.
            #expect(throws: (any Error).self) { try FeedVideo.updateAll(in: context, set: ["body": "no"]) }
        }
    }
}
