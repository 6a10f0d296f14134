import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

private final class Essay: ManagedObject {
    override class var tableName: String { "essays" }
    @Attribute var title: String = ""
    @Relationship(inverse: "essays") var keywords: Set<Keyword>
    @Relationship(inverse: "reviewed", joinTable: "reviews", column: "reviewer") var reviewers: Set<Critic>
}

private final class Keyword: ManagedObject {
    override class var tableName: String { "keywords" }
    @Attribute var word: String = ""
    @Relationship(inverse: "keywords") var essays: Set<Essay>
}

private final class Critic: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "reviewers", column: "essay") var reviewed: Set<Essay>
}

private final class Citizen: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "holder", deleteRule: .cascade) var card: Card?
    @Relationship(inverse: "followers", joinTable: "follows", column: "followed_id") var following: Set<Citizen>
    @Relationship(inverse: "following", column: "follower_id") var followers: Set<Citizen>
}

private final class Card: ManagedObject {
    @Attribute var number: String = ""
    @Relationship(inverse: "card", column: "citizen_id") var holder: Citizen?
}

// Mistakes, one family each.

private final class Twin: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "left") var right: Twin?  // neither side names a column
    @Relationship(inverse: "right") var left: Twin?
}

private final class Greedy: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "greedy", column: "other_id") var other: Other?
}

private final class Other: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "other", column: "greedy_id") var greedy: Greedy?
}

private final class Clone: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "copiedBy") var copies: Set<Clone>  // both columns would be clone_id
    @Relationship(inverse: "copies") var copiedBy: Set<Clone>
}

private final class Left: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "lefts") var rights: Set<Right>  // left_right by convention
    @Relationship(inverse: "otherLefts") var otherRights: Set<Right>
}

private final class Right: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "rights") var lefts: Set<Left>
    @Relationship(inverse: "otherRights", joinTable: "left_right") var otherLefts: Set<Left>
}

private final class Pro: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "pros", joinTable: "one") var cons: Set<Con>
}

private final class Con: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "cons", joinTable: "two") var pros: Set<Pro>
}

private final class Shelf: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "shelf", joinTable: "shelf_volumes") var volumes: Set<Volume>
}

private final class Volume: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "volumes") var shelf: Shelf?
}

private final class Narcissus: ManagedObject {
    @Attribute var name: String = ""
    @Relationship(inverse: "admirers") var admirers: Set<Narcissus>
}

@Suite("Model: many-to-many and one-to-one relationships")
struct RelationshipModelTests {
    /// The Model layer reads classes through `EntityObject` (it names no Context type):
    /// the classes it hands back are the declared subclasses, and the objects the context
    /// makes of an entity are instances of them.
    @Test func entitiesAndDestinationsAreTheDeclaredClasses() throws {
        let model = try Model(entities: [Citizen.self, Card.self])
        let citizen = try #require(model.entity(for: Citizen.self))
        let card = try #require(model.entity(for: Card.self))
        func id(_ type: (any EntityObject.Type)?) -> ObjectIdentifier? { type.map { ObjectIdentifier($0) } }
        #expect(id(citizen.objectClass) == ObjectIdentifier(Citizen.self))
        #expect(id(citizen.relationship(named: "card")?.destinationType) == ObjectIdentifier(Card.self))
        #expect(id(citizen.relationship(named: "following")?.destinationType) == ObjectIdentifier(Citizen.self))
        #expect(id(card.relationship(named: "holder")?.destinationType) == ObjectIdentifier(Citizen.self))
        #expect(model.entity(for: Essay.self) == nil)
        #expect(citizen.makeObject() is Citizen)
        #expect(card.makeObject() is Card)
    }

    @Test func manyToManyByConventionAndExplicitly() throws {
        let model = try Model(entities: [Essay.self, Keyword.self, Critic.self])
        let keywords = try #require(model.entity(named: "Essay")?.relationship(named: "keywords"))
        #expect(keywords.isManyToMany)
        #expect(keywords.columnName == nil)
        #expect(keywords.joinTable == JoinTableDescription(tableName: "essays_keywords", sourceColumn: "essay_id", destinationColumn: "keyword_id"))
        let essays = try #require(model.entity(named: "Keyword")?.relationship(named: "essays"))
        #expect(essays.joinTable == JoinTableDescription(tableName: "essays_keywords", sourceColumn: "keyword_id", destinationColumn: "essay_id"))
        let reviewers = try #require(model.entity(named: "Essay")?.relationship(named: "reviewers"))
        #expect(reviewers.joinTable == JoinTableDescription(tableName: "reviews", sourceColumn: "essay", destinationColumn: "reviewer"))
        #expect(reviewers.description == "reviewers <<->> Critic (inverse reviewed) via reviews")
        #expect(model.joinTables.map(\.table.tableName) == ["essays_keywords", "reviews"])
        #expect(model.joinTables.map(\.relationships) == ["Essay.keywords ↔ Keyword.essays", "Essay.reviewers ↔ Critic.reviewed"])
        // No join-table relationship adds a column to its entity's rows.
        #expect(model.entity(named: "Essay")?.selectColumns == ["id", "version", "title"])
        #expect(Model.conventionalJoinTableName("tags", "posts") == "posts_tags")
        #expect(Model.conventionalJoinColumnName(forEntityNamed: "BlogPost") == "blog_post_id")
    }

    @Test func oneToOneAndSelfReferentialManyToMany() throws {
        let model = try Model(entities: [Citizen.self, Card.self])
        let citizen = try #require(model.entity(named: "Citizen"))
        let card = try #require(citizen.relationship(named: "card"))
        #expect(!card.isToMany && !card.hasForeignKey && card.columnName == nil)
        let holder = try #require(model.entity(named: "Card")?.relationship(named: "holder"))
        #expect(holder.columnName == "citizen_id")
        #expect(citizen.toOneRelationships.isEmpty)
        #expect(citizen.selectColumns == ["id", "version", "name"])
        #expect(model.entity(named: "Card")?.selectColumns == ["id", "version", "number", "citizen_id"])
        let following = try #require(citizen.relationship(named: "following"))
        #expect(following.joinTable == JoinTableDescription(tableName: "follows", sourceColumn: "follower_id", destinationColumn: "followed_id"))
        #expect(citizen.relationship(named: "followers")?.joinTable?.sourceColumn == "followed_id")
        // Citizens are inserted before the cards that point at them.
        #expect(model.insertOrder.map(\.name) == ["Citizen", "Card"])
    }

    @Test(arguments: [
        ([Twin.self], [ModelError.Problem.oneToOneForeignKeyUnspecified(entity: "Twin", relationship: "right", inverse: "Twin.left")]),
        ([Greedy.self, Other.self], [.oneToOneForeignKeyOnBothSides(entity: "Greedy", relationship: "other", inverse: "Other.greedy")]),
        ([Clone.self], [.joinColumnsCollide(entity: "Clone", relationship: "copies", table: "clone_clone", column: "clone_id")]),
        ([Left.self, Right.self], [.joinTableShared(table: "left_right", relationships: ["Left.rights", "Left.otherRights"])]),
        ([Pro.self, Con.self], [.joinTableDisagreement(entity: "Pro", relationship: "cons", inverse: "Con.pros", tables: ["one", "two"])]),
        ([Shelf.self, Volume.self], [.joinTableWithoutManyToMany(entity: "Shelf", relationship: "volumes")]),
        ([Narcissus.self], [.ownInverse(entity: "Narcissus", relationship: "admirers")]),
    ] as [([ManagedObject.Type], [ModelError.Problem])])
    func badDeclarationsAreNamed(classes: [ManagedObject.Type], expected: [ModelError.Problem]) {
        do {
            _ = try Model(entities: classes)
            Issue.record("expected a model error")
        } catch let error as ModelError {
            for problem in expected {
                #expect(error.problems.contains(problem), "\(error)")
                #expect(error.description.contains(problem.description))
            }
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func messagesSayWhatToDo() {
        #expect(ModelError.Problem.oneToOneForeignKeyUnspecified(entity: "A", relationship: "b", inverse: "B.a").description
            .contains("give column: on the side whose table holds the foreign key"))
        #expect(ModelError.Problem.joinColumnsCollide(entity: "A", relationship: "b", table: "a_a", column: "a_id").description
            .contains("name them with column: on both sides"))
    }

    /// Problems and schema mismatches are structs with codes (no public error enums):
    /// matched by code, their names read from fields, equal when code and names are.
    @Test func problemsAndMismatchesCarryACodeAndTheirNames() {
        let problem = ModelError.Problem.missingInverse(entity: "Post", relationship: "author", inverse: "writings")
        #expect(problem.code == .missingInverse && problem.code != .ownInverse)
        #expect(problem.entity == "Post" && problem.relationship == "author" && problem.inverse == "writings")
        #expect(problem.column == nil && problem.tables.isEmpty)
        #expect(problem == .missingInverse(entity: "Post", relationship: "author", inverse: "writings"))
        #expect(problem != .missingInverse(entity: "Post", relationship: "author", inverse: "posts"))
        #expect(problem.description == "Post.author: inverse writings does not exist")
        #expect("\(problem.code)" == "missingInverse")
        let shared = ModelError.Problem.joinTableShared(table: "tagging", relationships: ["A.tags", "B.tags"])
        #expect(shared.entity == nil && shared.table == "tagging" && shared.relationships == ["A.tags", "B.tags"])

        let mismatch = SchemaMismatchError.Mismatch.wrongType(entity: "User", column: "age", expected: "int8", actual: "text")
        #expect(mismatch.code == .wrongType)
        #expect(mismatch.entity == "User" && mismatch.column == "age" && mismatch.expected == "int8" && mismatch.actual == "text")
        #expect(mismatch.description == "column age of entity User is text, expected int8")
        let join = SchemaMismatchError.Mismatch.missingJoinTable(relationship: "Post.tags ↔ Tag.posts", table: "post_tags", columns: ["post_id", "tag_id"])
        #expect(join.relationship == "Post.tags ↔ Tag.posts" && join.columns == ["post_id", "tag_id"])
        #expect(join.description.hasSuffix("CREATE TABLE post_tags (post_id bigint NOT NULL, tag_id bigint NOT NULL, PRIMARY KEY (post_id, tag_id))"))
    }
}
