import Foundation
import PGDataKit
import Synchronization
import Testing

// Entity inheritance (issue 48): an abstract root with two sub-entities in one table with
// a discriminator column, and a relationship to the root. The entity names are the plain
// ones (`Content`, `Article`, `Video`, `Folder`); the classes carry a prefix because the
// test target has an `Article` already. The test helper declares the same model again
// (`InheritanceWatch.swift`) for the process that merges it.

/// The abstract root: every content is an article or a video.
class FeedContent: ManagedObject {
    override class var entityName: String { "Content" }
    override class var isAbstract: Bool { true }
    override class var tableName: String { "contents" }
    @Attribute var title: String = ""
    @Attribute var rank: Int = 0
    @Relationship(inverse: "items") var folder: FeedFolder?
}

/// A content with a body and a unique slug.
final class FeedArticle: FeedContent {
    override class var entityName: String { "Article" }
    @Attribute var body: String = ""
    @Attribute(unique: true) var slug: String?
}

/// A content with a length.
final class FeedVideo: FeedContent {
    override class var entityName: String { "Video" }
    @Attribute var seconds: Int = 0
}

/// A folder of contents of both kinds; deleting it deletes them.
final class FeedFolder: ManagedObject {
    override class var entityName: String { "Folder" }
    override class var tableName: String { "folders" }
    @Attribute(unique: true) var name: String = ""
    @Relationship(inverse: "folder", deleteRule: .cascade) var items: Set<FeedContent>
}

// A second hierarchy: a concrete root whose table names its discriminator `kind`, and a
// relationship to a sub-entity (its foreign key is a column only rows of that kind use).

/// A concrete root: plain shapes are stored too.
class KindShape: ManagedObject {
    override class var entityName: String { "Shape" }
    override class var tableName: String { "shapes" }
    override class var entityColumn: String { "kind" }
    @Attribute var label: String = ""
}

/// A shape with a radius and a unique code (with a default), in a palette.
final class KindCircle: KindShape {
    override class var entityName: String { "Circle" }
    @Attribute var radius: Double = 0
    @Attribute(unique: true) var code: String = ""
    @Relationship(inverse: "circles") var palette: KindPalette?
}

/// Circles only (a to-many relationship to a sub-entity); deleting it leaves them
/// without palette.
final class KindPalette: ManagedObject {
    override class var entityName: String { "Palette" }
    override class var tableName: String { "palettes" }
    @Attribute var name: String = ""
    @Relationship(inverse: "palette", deleteRule: .nullify) var circles: Set<KindCircle>
}

enum InheritanceSchema {
    static let entities: [ManagedObject.Type] = [FeedContent.self, FeedArticle.self, FeedVideo.self, FeedFolder.self]
    static let shapeEntities: [ManagedObject.Type] = [KindShape.self, KindCircle.self, KindPalette.self]

    /// Runs `body` with a fresh database holding the tables the model generates.
    static func withDatabase<T>(
        _ entities: [ManagedObject.Type] = entities, _ body: (ConnectionConfiguration) throws -> T
    ) throws -> T {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.executeScript(try Model(entities: entities).schemaSQL())
            return try body(configuration)
        }
    }

    /// Runs `body` with a manager over a fresh database holding the model's tables.
    static func withManager<T>(
        _ entities: [ManagedObject.Type] = entities, _ body: (ContextManager) throws -> T
    ) throws -> T {
        try withDatabase(entities) { configuration in
            let manager = try ContextManager(configuration: configuration, entities: entities)
            defer { manager.close() }
            return try body(manager)
        }
    }

    /// Saves two folders, two articles and two videos in one save:
    ///
    /// | title | kind | rank | folder | |
    /// |---|---|---|---|---|
    /// | Alpha | Article | 3 | inbox | body "alpha body", slug "alpha" |
    /// | Beta | Article | 1 | archive | body "beta body", slug "beta" |
    /// | Apex | Video | 2 | inbox | 60 seconds |
    /// | Bravo | Video | 4 | — | 90 seconds |
    static func seed(_ manager: ContextManager) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            let inbox = folder("inbox", in: context)
            let archive = folder("archive", in: context)
            article("Alpha", rank: 3, slug: "alpha", folder: inbox, in: context)
            article("Beta", rank: 1, slug: "beta", folder: archive, in: context)
            video("Apex", rank: 2, seconds: 60, folder: inbox, in: context)
            video("Bravo", rank: 4, seconds: 90, folder: nil, in: context)
            try context.save()
        }
    }

    @discardableResult
    static func folder(_ name: String, in context: ManagedObjectContext) -> FeedFolder {
        let folder = FeedFolder(context: context)
        folder.name = name
        return folder
    }

    /// A new article whose body is "<title lowercased> body".
    @discardableResult
    static func article(
        _ title: String, rank: Int, slug: String?, folder: FeedFolder?, in context: ManagedObjectContext
    ) -> FeedArticle {
        let article = FeedArticle(context: context)
        article.title = title
        article.rank = rank
        article.slug = slug
        article.body = "\(title.lowercased()) body"
        article.folder = folder
        return article
    }

    @discardableResult
    static func video(
        _ title: String, rank: Int, seconds: Int, folder: FeedFolder?, in context: ManagedObjectContext
    ) -> FeedVideo {
        let video = FeedVideo(context: context)
        video.title = title
        video.rank = rank
        video.seconds = seconds
        video.folder = folder
        return video
    }

    /// Each content as `Kind:title` (the entity's name and the class agree, else
    /// `Kind?title`), in the order given.
    static func kinds(_ contents: [FeedContent]) -> [String] {
        contents.map { content in
            let matches =
                switch content.entity.name {
                case "Article": content is FeedArticle
                case "Video": content is FeedVideo
                default: false
                }
            return "\(content.entity.name)\(matches ? ":" : "?")\(content.title)"
        }
    }

    /// The rows of `contents` by title, each with its kind's own columns:
    /// `Article:title:rank:body:slug:folder` and `Video:title:rank:seconds:folder` (NULL as
    /// `-`). (Whether a row leaves the other kind's columns NULL is
    /// `EntityInheritanceTests.rowsLeaveTheOtherKindsColumnsNull`.)
    static func rows(_ manager: ContextManager) throws -> [String] {
        try manager.coordinator.pool.withConnection { connection in
            try connection.query(
                """
                SELECT c.entity || ':' || c.title || ':' || c.rank::text || ':'
                    || CASE c.entity WHEN 'Article' THEN coalesce(c.body, '-') || ':' || coalesce(c.slug, '-')
                        WHEN 'Video' THEN coalesce(c.seconds::text, '-') ELSE '?' END
                    || ':' || coalesce(f.name, '-')
                FROM contents c LEFT JOIN folders f ON f.id = c.folder_id ORDER BY c.title
                """
            ).map { try $0.decode(String.self, at: 0) }
        }
    }

    /// Checks `rows(manager)` against `expected`, showing both when they differ.
    static func expectRows(
        _ manager: ContextManager, _ expected: [String], _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let actual = try rows(manager)
        #expect(actual == expected, comment, sourceLocation: sourceLocation)
    }

    /// One number the SQL returns.
    static func integer(_ sql: String, in manager: ContextManager) throws -> Int {
        try manager.coordinator.pool.withConnection { try $0.query(sql)[0].decode(Int.self, at: 0) }
    }
}

/// Values collected on one queue and read on another.
final class Collected<Element: Sendable>: Sendable {
    private let values = Mutex<[Element]>([])

    func append(contentsOf elements: some Sequence<Element>) {
        values.withLock { $0.append(contentsOf: elements) }
    }

    var all: [Element] { values.withLock { $0 } }
}
