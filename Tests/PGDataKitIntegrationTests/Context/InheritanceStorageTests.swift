import Foundation
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

// Entity inheritance through every storage and path: inherited many-to-many and
// one-to-one relationships, a sub-entity's own to-one, child contexts, batched fetches,
// batch updates and deletes, keyed imports, controllers and merges between managers.

enum Stock {
    class Item: ManagedObject {
        override class var isAbstract: Bool { true }
        override class var tableName: String { "items" }
        override class var entityColumn: String { "kind" }
        @Attribute var title: String = ""
        @Attribute var rank: Int = 0
        @Relationship(inverse: "items") var labels: Set<Label>
        @Relationship(inverse: "item", column: "cover_id") var cover: Cover?
    }

    final class Book: Item {
        @Attribute(unique: true) var isbn: String?
        @Attribute var pages: Int = 0
    }

    final class Disc: Item {
        @Attribute var seconds: Int = 0
        @Relationship(inverse: "discs") var label: Studio?
    }

    final class Label: ManagedObject {
        override class var tableName: String { "labels" }
        @Attribute(unique: true) var name: String = ""
        @Relationship(inverse: "labels") var items: Set<Item>
    }

    final class Cover: ManagedObject {
        override class var tableName: String { "covers" }
        @Attribute var url: String = ""
        @Relationship(inverse: "cover") var item: Item?
    }

    final class Studio: ManagedObject {
        override class var tableName: String { "studios" }
        @Attribute var name: String = ""
        @Relationship(inverse: "label") var discs: Set<Disc>
    }

    static let entities: [ManagedObject.Type] = [Item.self, Book.self, Disc.self, Label.self, Cover.self, Studio.self]

    /// A manager over a fresh database holding the model's generated schema.
    static func withManager(_ body: (ContextManager, ConnectionConfiguration) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: false) { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            try connection.executeScript(try Model(entities: entities).schemaSQL())
            let manager = try ContextManager(configuration: configuration, entities: entities)
            defer { manager.close() }
            #expect(try manager.coordinator.validateSchema().isEmpty)
            try body(manager, configuration)
        }
    }

    /// Two books (ranks 1, 3) and a disc (rank 2), labelled, the first book with a cover,
    /// the disc with a studio; saved.
    static func fill(_ manager: ContextManager) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            let fiction = Label(context: context)
            fiction.name = "fiction"
            let first = Book(context: context)
            (first.title, first.rank, first.isbn, first.pages) = ("first", 1, "111", 100)
            let second = Book(context: context)
            (second.title, second.rank, second.isbn, second.pages) = ("second", 3, "222", 200)
            let disc = Disc(context: context)
            (disc.title, disc.rank, disc.seconds) = ("disc", 2, 60)
            first.labels = [fiction]
            disc.labels = [fiction]
            let cover = Cover(context: context)
            cover.url = "c1"
            first.cover = cover
            let studio = Studio(context: context)
            studio.name = "s"
            disc.label = studio
            try context.save()
        }
    }
}

@Suite("Entity inheritance: storage and paths")
struct InheritanceStorageTests {
    typealias Item = Stock.Item
    typealias Book = Stock.Book
    typealias Disc = Stock.Disc

    @Test func inheritedRelationshipsOfEveryKindHoldBothKinds() throws {
        try Stock.withManager { manager, _ in
            try Stock.fill(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let label = try #require(try Stock.Label.first(in: context, where: "name == 'fiction'"))
                #expect(label.items.map { String(describing: type(of: $0)) }.sorted() == ["Book", "Disc"])
                let disc = try #require(label.items.first { $0 is Disc } as? Disc)
                #expect(disc.seconds == 60 && disc.label?.name == "s" && disc.labels.map(\.name) == ["fiction"])
                let cover = try #require(try Stock.Cover.first(in: context, where: "url == 'c1'"))
                #expect((cover.item as? Book)?.isbn == "111")
                let studio = try #require(disc.label)
                #expect(studio.discs.map(\.title) == ["disc"])
                #expect(try Item.count(in: context, where: "ANY labels.name == 'fiction'") == 2)
                #expect(try Stock.Label.count(in: context, where: "ANY items.title == 'disc'") == 1)
            }
        }
    }

    @Test func childContextsBatchedFetchesAndObjectsByID() throws {
        try Stock.withManager { manager, _ in
            try Stock.fill(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let child = context.newChildContext()
                try child.performAndWait {
                    let disc = Disc(context: child)
                    (disc.title, disc.rank, disc.seconds) = ("child disc", 4, 30)
                    #expect(try Item.fetch(in: child, where: "rank > 2").map(\.title).sorted() == ["child disc", "second"])
                    try child.save()
                }
                try context.save()
                var kinds: [String] = []
                var request = FetchRequest<Item>(sortDescriptors: [FetchSortDescriptor("rank")])
                request.fetchBatchSize = 2
                try context.fetch(request) { batch in
                    kinds += batch.map { "\(type(of: $0)):\($0.rank)" }
                }
                #expect(kinds == ["Book:1", "Disc:2", "Book:3", "Disc:4"])
            }
            let ids = try context.performAndWait { try Item.fetchAll(in: context).map(\.objectID) }
            #expect(ids.allSatisfy { $0.entityName == "Item" })
            let fresh = manager.newPrivateContext()
            try fresh.performAndWait {
                let objects = try ids.map { try fresh.object(with: $0) }
                #expect(objects.compactMap { ($0 as? Disc)?.seconds }.sorted() == [30, 60])
                #expect(objects.compactMap { ($0 as? Book)?.pages }.sorted() == [100, 200])
            }
        }
    }

    @Test func batchUpdatesDeletesAndKeyedImportsStayWithinTheirKind() throws {
        try Stock.withManager { manager, configuration in
            try Stock.fill(manager)
            let context = manager.newPrivateContext()
            try context.performAndWait {
                #expect(try Book.updateAll(in: context, set: ["rank": 9], where: "rank >= 1") == 2)
                try context.save()
                #expect(try Item.fetch(in: context, sortedBy: [FetchSortDescriptor("title")]).map(\.rank) == [2, 9, 9])
                let records: [JSONValue] = [["isbn": "222", "pages": 222], ["isbn": "333", "pages": 333]]
                let books = try Book.insertOrUpdate(records, uniqueModelKey: \.isbn, uniqueRemoteKey: "isbn", in: context) {
                    record, book in book.pages = record["pages"]?.intValue ?? 0
                }
                try context.save()
                #expect(books.count == 2 && Set(books.map(\.pages)) == [222, 333])
                #expect(try Book.count(in: context) == 3 && Disc.count(in: context) == 1)
                #expect(try Disc.deleteAll(in: context) == 1)
                try context.save()
            }
            let connection = try Connection(configuration)
            defer { connection.close() }
            let rows = try connection.query("SELECT kind, count(*) FROM items GROUP BY kind ORDER BY kind")
            #expect(try rows.map { "\(try $0.decode(String.self, at: 0))=\(try $0.decode(Int.self, at: 1))" } == ["Book=3"])
        }
    }

    @Test func controllersAndAnotherManagersMainContextFollowBothKinds() throws {
        try Stock.withManager { manager, configuration in
            try Stock.fill(manager)
            let other = try ContextManager(configuration: configuration, entities: Stock.entities)
            defer { other.close() }
            let main = other.mainContext
            let all = ManagedObjectController(
                fetchRequest: FetchRequest<Item>(sortDescriptors: [FetchSortDescriptor("rank")]), context: main)
            let books = ManagedObjectController(
                fetchRequest: FetchRequest<Book>(sortDescriptors: [FetchSortDescriptor("rank")]), context: main)
            let disc = try main.performAndWait { () throws -> Disc in
                try all.performFetch()
                try books.performFetch()
                return try #require(try Disc.first(in: main, where: "title == 'disc'"))
            }
            #expect(main.performAndWait { all.objects.map(\.title) } == ["first", "disc", "second"])
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let video = Disc(context: context)
                (video.title, video.rank, video.seconds) = ("new disc", 0, 5)
                let stored = try #require(try Disc.first(in: context, where: "title == 'disc'"))
                stored.seconds = 61
                stored.rank = 4
                try #require(try Book.first(in: context, where: "title == 'first'")).delete()
                try context.save()
            }
            try eventually("the other manager's controllers follow") {
                main.performAndWait { all.objects.map(\.title) == ["new disc", "second", "disc"] }
            }
            #expect(main.performAndWait { books.objects.map(\.title) } == ["second"])
            #expect(main.performAndWait { disc.seconds == 61 && disc.rank == 4 })
            #expect(main.performAndWait { all.objects.first is Disc })
        }
    }
}

@Suite("Entity inheritance: rows the model does not know")
struct InheritanceBadRowTests {
    @Test func aRowOfAnUnknownKindFailsTheFetchWithATypedErrorNamingIt() throws {
        try Stock.withManager { manager, configuration in
            try Stock.fill(manager)
            let connection = try Connection(configuration)
            defer { connection.close() }
            // (Another program's row: a kind this model does not declare.)
            try connection.execute("ALTER TABLE items DROP CONSTRAINT items_kind_check")
            try connection.execute("INSERT INTO items (kind, title, rank) VALUES ('Podcast', 'p', 0)")
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws -> Void in
                #expect {
                    try Stock.Item.fetchAll(in: context)
                } throws: { error in
                    let error = error as? ManagedObjectError
                    return error?.code == .invalidStoredValue && error?.key == "kind" && error?.reason?.contains("Podcast") == true
                }
                // A fetch of a kind the model knows filters the row out.
                #expect(try Stock.Book.count(in: context) == 2)
                #expect(try Stock.Disc.fetchAll(in: context).count == 1)
            }
        }
    }

    @Test func aRowWhoseKindChangedUnderARegisteredObjectFailsWithATypedError() throws {
        try Stock.withManager { manager, configuration in
            try Stock.fill(manager)
            let connection = try Connection(configuration)
            defer { connection.close() }
            let context = manager.mainContext  // (reads at each statement: it sees the change below)
            let disc = try context.performAndWait { try #require(try Stock.Disc.first(in: context, where: "title == 'disc'")) }
            // (Another program turns the disc's row into a book.)
            try connection.execute("UPDATE items SET kind = 'Book', isbn = '999', pages = 5 WHERE title = 'disc'")
            try context.performAndWait { () throws -> Void in
                #expect {
                    try Stock.Item.fetchAll(in: context)
                } throws: { error in
                    let error = error as? ManagedObjectError
                    return error?.code == .invalidStoredValue && error?.reason?.contains("now a Book") == true
                }
                #expect(disc.seconds == 60)  // the registered object kept its values
            }
        }
    }
}

@Suite("Entity inheritance: the schema as the hierarchy grows")
struct InheritanceSchemaTests {
    @Test func aNewSubentityIsAMismatchUntilTheDiffAddsItsColumnsAndWidensTheCheck() throws {
        try TestDatabase.withFreshDatabase(migrations: false) { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            let before: [ManagedObject.Type] = [Stock.Item.self, Stock.Book.self, Stock.Label.self, Stock.Cover.self]
            try connection.executeScript(try Model(entities: before).schemaSQL())
            let after = try Model(entities: Stock.entities)
            let coordinator = try StoreCoordinator(model: after, configuration: configuration, validatesSchema: false)
            defer { coordinator.close() }
            #expect {
                try coordinator.validateSchema()
            } throws: { error in
                let mismatches = (error as? SchemaMismatchError)?.mismatches ?? []
                return mismatches.contains { $0.code == .discriminatorRejectsEntity && $0.columns == ["Disc"] && $0.table == "items" }
                    && mismatches.contains { $0.code == .missingColumn && $0.column == "seconds" }
            }
            let diff = try SchemaDiff(model: after, on: connection)
            #expect(diff.changes.contains { $0.sql.contains("ADD CONSTRAINT items_kind_check CHECK (kind IN ('Book', 'Disc'))") })
            try connection.executeScript(diff.migrationSQL())
            #expect(try SchemaDiff(model: after, on: connection).isEmpty)
            #expect(try coordinator.validateSchema().isEmpty)
            let manager = try ContextManager(configuration: configuration, entities: Stock.entities)
            defer { manager.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let disc = Stock.Disc(context: context)
                disc.seconds = 3
                try context.save()
                #expect(try Stock.Item.fetchAll(in: context).compactMap { ($0 as? Stock.Disc)?.seconds } == [3])
            }
        }
    }
}

@Suite("Entity inheritance: change sets name each object's kind")
struct InheritanceChangeSetTests {
    @Test func savesBatchStatementsAndTheHistoryNameTheKindOfEachObject() throws {
        try Stock.withManager { manager, configuration in
            let start = try manager.coordinator.currentHistoryToken()
            try Stock.fill(manager)
            let context = manager.newPrivateContext()
            let saved = try context.performAndWait { () throws -> ContextChanges in
                let disc = try #require(try Stock.Disc.first(in: context, where: "title == 'disc'"))
                disc.seconds = 1
                try #require(try Stock.Book.first(in: context, where: "title == 'first'")).delete()
                let changes = Mutex(ContextChanges())
                let token = context.observeDidSave { saved in changes.withLock { $0 = saved } }
                defer { token.cancel() }
                try context.save()
                return changes.withLock { $0 }
            }
            // (The label is updated too: the book left its items.)
            #expect(saved.updated.map { saved.entityName(of: $0) }.sorted() == ["Disc", "Label"])
            #expect(saved.deleted.map { saved.entityName(of: $0) } == ["Book"])
            let batch = try context.performAndWait { () throws -> (ContextChanges, Int) in
                let changes = Mutex(ContextChanges())
                let token = context.observeDidSave { saved in changes.withLock { $0 = saved } }
                defer { token.cancel() }
                let count = try Stock.Item.updateAll(in: context, set: ["rank": 7])
                return (changes.withLock { $0 }, count)
            }
            #expect(batch.1 == 2 && batch.0.updated.map { batch.0.entityName(of: $0) }.sorted() == ["Book", "Disc"])
            let page = try manager.coordinator.history(after: start, limit: 10)
            let kinds = page.records.map { record in
                record.changes.inserted.union(record.changes.updated).union(record.changes.deleted)
                    .filter { $0.entityName == "Item" }.map { record.changes.entityName(of: $0) }.sorted()
            }
            #expect(kinds == [["Book", "Book", "Disc"], ["Book", "Disc"], ["Book", "Disc"]])
            #expect(page.records.allSatisfy { $0.changes.inserted.union($0.changes.updated).allSatisfy { $0.entityName != "Book" } })
            let other = try ContextManager(configuration: configuration, entities: Stock.entities)
            defer { other.close() }
            let heard = Mutex<[String]>([])
            let token = other.coordinator.observeRemoteChanges { record in
                heard.withLock { $0 += record.changes.inserted.map { record.changes.entityName(of: $0) } }
            }
            defer { token.cancel() }
            try context.performAndWait {
                let disc = Stock.Disc(context: context)
                disc.title = "remote"
                try context.save()
            }
            try eventually("another coordinator hears the insert with its kind") { heard.withLock { $0 } == ["Disc"] }
        }
    }
}
