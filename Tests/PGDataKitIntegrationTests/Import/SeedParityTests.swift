import Foundation
import PGDataKit
import Synchronization
import Testing

/// The seed helpers' behaviours that ported code still missed (issue 48, item 6).
@Suite("Seed parity: nested export without nil, keeping existing objects, export hook")
struct SeedParityTests {
    /// Vokoder's hierarchical export makes the parent dictionary of every mapped key path
    /// before it looks at the value, so a post without author exports `"author": {}` even
    /// when nil values are left out; only the flat style has no parent to keep.
    @Test func nestedExportWithoutNilKeepsTheEmptyParent() throws {
        try ImportSchema.withManager { manager throws in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                var mapper = ObjectMapper<Post>(
                    uniqueKey: \.postID,
                    maps: [
                        ObjectMap("id", to: \.postID),
                        ObjectMap("meta.headline", to: \.title),
                        .relationship("author.id", to: \.user, matching: \User.userID),
                    ],
                    mapsOtherAttributes: false)
                mapper.exportOmitsNil = true
                let posts = try Post.importRecords(
                    [["id": "p1", "meta": ["headline": "Hi"], "author": ["id": "u1"]], ["id": "p2"]], mapper: mapper,
                    in: context)
                let exported = try mapper.export(posts)
                #expect(exported[0] == ["id": "p1", "meta": ["headline": "Hi"], "author": ["id": "u1"]])
                #expect(exported[1] == ["id": "p2", "meta": .object([:]), "author": .object([:])])
                #expect(try mapper.export(posts[1]) == exported[1])
                #expect(try mapper.export(posts, style: .flat)[1] == ["id": "p2"])
                mapper.exportOmitsNil = false
                #expect(try mapper.export(posts[1]) == ["id": "p2", "meta": ["headline": nil], "author": ["id": nil]])
                // The empty parents import back to what they came from.
                let again = try Post.importRecords(exported, mapper: mapper, in: context)
                #expect(again[1] === posts[1] && again[1].title == nil && again[1].user == nil)
            }
        }
    }
}
