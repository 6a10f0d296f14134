import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class Author: ManagedObject {
    override class var tableName: String { "authors" }
    @Attribute(unique: true) var remoteID: String = ""
    @Attribute(column: "display_name") var name: String?
    @Attribute var createdAt: Date = Date(timeIntervalSince1970: 0)
    @Attribute var URLString: String?
    @Relationship(inverse: "author", deleteRule: .cascade) var books: Set<Book>
}

private final class Book: ManagedObject {
    override class var uniqueKeys: [[String]] { [["title", "edition"]] }
    @Attribute var title: String = ""
    @Attribute var edition: Int32 = 1
    @Relationship(inverse: "books") var author: Author?
}

private final class Orphan: ManagedObject {
    @Relationship(inverse: "nobody") var friends: Set<Book>
}

private final class Stranger: ManagedObject {
    @Attribute var name: String = ""
}

private final class Lonely: ManagedObject {
    @Relationship var stranger: Stranger?
}

@Suite("Model descriptions without a server")
struct ModelTests {
    @Test func entitiesAreDescribedFromDeclarations() throws {
        let model = try Model(entities: [Author.self, Book.self])
        let author = try #require(model.entity(for: Author.self))
        #expect(author.name == "Author")
        #expect(author.tableName == "authors")
        #expect(author.attributes.map(\.name) == ["remoteID", "name", "createdAt", "URLString"])
        #expect(author.attributes.map(\.columnName) == ["remote_id", "display_name", "created_at", "url_string"])
        #expect(author.attributes.map(\.type) == [.string, .string, .date, .string])
        #expect(author.attributes.map(\.isOptional) == [false, true, false, true])
        #expect(author.uniqueKeys == [["remoteID"]])
        let books = try #require(author.relationship(named: "books"))
        #expect(books.isToMany)
        #expect(books.deleteRule == .cascade)
        #expect(books.destinationEntityName == "Book")
        #expect(books.columnName == nil)

        let book = try #require(model.entity(named: "Book"))
        #expect(book.tableName == "book")
        #expect(book.uniqueKeys == [["title", "edition"]])
        let owner = try #require(book.relationship(named: "author"))
        #expect(!owner.isToMany)
        #expect(owner.columnName == "author_id")
        #expect(owner.inverseName == "books")
        // Authors are inserted before the books that point at them.
        #expect(model.insertOrder.map(\.name) == ["Author", "Book"])
    }

    @Test func problemsAreReportedTogether() {
        do {
            _ = try Model(entities: [Orphan.self, Lonely.self])
            Issue.record("expected a model error")
        } catch let error as ModelError {
            #expect(error.problems.count >= 2)
            #expect(error.problems.contains(.unknownDestination(entity: "Orphan", relationship: "friends", destination: "Book")))
            #expect(error.problems.contains(.unknownDestination(entity: "Lonely", relationship: "stranger", destination: "Stranger")))
            #expect(error.description.contains("Orphan.friends points at Book"))
            #expect(error.description.contains("Lonely.stranger points at Stranger"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func snakeCase() {
        #expect(Naming.snakeCase("userID") == "user_id")
        #expect(Naming.snakeCase("createdAt") == "created_at")
        #expect(Naming.snakeCase("URLString") == "url_string")
        #expect(Naming.snakeCase("name") == "name")
        #expect(Naming.snakeCase("Post") == "post")
        #expect(Naming.snakeCase("value2Go") == "value2_go")
    }

    @Test func objectsWorkBeforeTheyJoinAContext() throws {
        let author = Author()
        author.remoteID = "a1"
        author.name = "Ursula"
        #expect(author.remoteID == "a1")
        #expect(author.objectID.isTemporaryID)
        #expect(author.managedObjectContext == nil)
        try author.setValue("Le Guin", forKey: "name")
        #expect(author.name == "Le Guin")
        #expect(throws: ManagedObjectError.typeMismatch(entity: "Author", key: "createdAt", expected: "Date", actual: "String")) {
            try author.setValue("yesterday", forKey: "createdAt")
        }
        let book = Book()
        book.title = "The Dispossessed"
        book.author = author
        #expect(book.author === author)
        #expect(try book.value(forKey: "title") as? String == "The Dispossessed")
    }

    @Test("Temporary IDs are version 4 UUIDs of the RFC 4122 variant, all different, and read back from their URIs")
    func temporaryIDsAreDistinctVersion4UUIDs() throws {
        let ids = (0..<1_000).map { _ in ObjectID(temporaryFor: "Stranger") }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(50) {
            guard let uuid = id.temporaryUUID else {
                Issue.record("not temporary: \(id)")
                continue
            }
            #expect(uuid.uuid.6 >> 4 == 4, "\(uuid)")
            #expect(uuid.uuid.8 >> 6 == 0b10, "\(uuid)")
            #expect(UUID(uuidString: uuid.uuidString) == uuid)
            let parsed = ObjectID(uriRepresentation: id.uriRepresentation)
            #expect(parsed == id)
            // Read back from its URI, the ID hashes as the one made in this process, and
            // its description shows its UUID's beginning.
            #expect(parsed.map { Set([id]).contains($0) } == true)
            #expect(id.description == "Stranger/temporary-\(uuid.uuidString.prefix(8))")
        }
    }

    @Test func sameObjectsAreEqualOnlyToThemselves() {
        let first = Stranger()
        let second = Stranger()
        first.name = "same"
        second.name = "same"
        #expect(first != second)
        #expect(Set([first, second, first]).count == 2)
    }
}
