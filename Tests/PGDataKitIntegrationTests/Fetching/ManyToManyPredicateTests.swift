import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Stories s1…s4 with topics, editors curating stories, people following each other
/// with passports:
///
/// | story | score | topics | curators |
/// |---|---|---|---|
/// | s1 | 5 | swift, sql | e1 |
/// | s2 | 8 | swift | e1 |
/// | s3 | 1 | – | – |
/// | s4 | 3 | sql, apple, swift | e2 |
///
/// rust has no stories. ada follows bob and cy; bob follows ada; cy follows nobody; dan
/// follows ada, bob and cy. Passports: ada P1, bob P2, dan X9; cy has none.
private func withData(_ body: (ContextManager) throws -> Void) throws {
    try ManyToManySchema.withManager { manager in
        let context = manager.newPrivateContext()
        try context.performAndWait {
            var topics: [String: Topic] = [:]
            for name in ["swift", "sql", "apple", "rust"] {
                let topic = Topic(context: context)
                topic.name = name
                topics[name] = topic
            }
            var editors: [String: Editor] = [:]
            for name in ["e1", "e2"] {
                let editor = Editor(context: context)
                editor.name = name
                editors[name] = editor
            }
            let stories: [(String, Int, [String], [String])] = [
                ("s1", 5, ["swift", "sql"], ["e1"]), ("s2", 8, ["swift"], ["e1"]), ("s3", 1, [], []),
                ("s4", 3, ["sql", "apple", "swift"], ["e2"]),
            ]
            for (code, score, topicNames, editorNames) in stories {
                let story = Story(context: context)
                story.code = code
                story.score = score
                story.topics = Set(topicNames.compactMap { topics[$0] })
                story.curators = Set(editorNames.compactMap { editors[$0] })
            }
            var people: [String: Person] = [:]
            for name in ["ada", "bob", "cy", "dan"] {
                let person = Person(context: context)
                person.name = name
                people[name] = person
            }
            let follows = ["ada": ["bob", "cy"], "bob": ["ada"], "cy": [], "dan": ["ada", "bob", "cy"]]
            for (name, followed) in follows { people[name]?.following = Set(followed.compactMap { people[$0] }) }
            for (name, number) in [("ada", "P1"), ("bob", "P2"), ("dan", "X9")] {
                let passport = Passport(context: context)
                passport.number = number
                passport.holder = people[name]
            }
            try context.save()
        }
        try body(manager)
    }
}

/// One predicate and the objects it selects.
struct RelationshipCase: Sendable, CustomStringConvertible {
    let entity: String
    let format: String
    let expected: [String]
    /// Names of objects (stories by code, others by name or number) bound to `%@`, in a
    /// list when `list` is set.
    var arguments: [String] = []
    var list = false

    var description: String { "\(entity): \(format)" }
}

private let cases: [RelationshipCase] = [
    RelationshipCase(entity: "Story", format: "ANY topics.name == 'swift'", expected: ["s1", "s2", "s4"]),
    RelationshipCase(entity: "Story", format: "ANY topics.name == 'rust'", expected: []),
    RelationshipCase(entity: "Story", format: "topics.@count > 2", expected: ["s4"]),
    RelationshipCase(entity: "Story", format: "topics.@count == 0", expected: ["s3"]),
    RelationshipCase(entity: "Story", format: "%@ IN topics", expected: ["s1", "s2", "s4"], arguments: ["swift"]),
    RelationshipCase(entity: "Story", format: "topics CONTAINS %@", expected: ["s1", "s4"], arguments: ["sql"]),
    RelationshipCase(entity: "Story", format: "ANY topics IN %@", expected: ["s1", "s4"], arguments: ["sql", "apple"], list: true),
    RelationshipCase(entity: "Story", format: "NONE topics.name BEGINSWITH 's'", expected: ["s3"]),
    RelationshipCase(entity: "Story", format: "ALL topics.name BEGINSWITH 's'", expected: ["s1", "s2", "s3"]),
    RelationshipCase(entity: "Story", format: "SUBQUERY(topics, $t, $t.name CONTAINS 'q').@count > 0", expected: ["s1", "s4"]),
    RelationshipCase(entity: "Story", format: "SUBQUERY(topics, $t, $t.name != 'apple').@count == 2", expected: ["s1", "s4"]),
    RelationshipCase(entity: "Story", format: "topics.@min.name == 'apple'", expected: ["s4"]),
    RelationshipCase(entity: "Story", format: "ANY curators.name == 'e1' AND score > 5", expected: ["s2"]),
    RelationshipCase(entity: "Story", format: "'swift' IN topics.name", expected: ["s1", "s2", "s4"]),
    RelationshipCase(entity: "Topic", format: "ANY stories.score > 6", expected: ["swift"]),
    RelationshipCase(entity: "Topic", format: "stories.@sum.score >= 8", expected: ["sql", "swift"]),
    RelationshipCase(entity: "Topic", format: "stories.@avg.score > 4", expected: ["swift"]),
    RelationshipCase(entity: "Topic", format: "stories.@count == 0", expected: ["rust"]),
    RelationshipCase(entity: "Topic", format: "ANY stories.code IN {'s2', 's3'}", expected: ["swift"]),
    RelationshipCase(entity: "Editor", format: "curated.@max.score == 8", expected: ["e1"]),
    RelationshipCase(entity: "Person", format: "followers.@count >= 2", expected: ["ada", "bob", "cy"]),
    RelationshipCase(entity: "Person", format: "ANY following.name == 'cy'", expected: ["ada", "dan"]),
    RelationshipCase(entity: "Person", format: "following.@count == 0", expected: ["cy"]),
    RelationshipCase(entity: "Person", format: "ANY followers.passport.number BEGINSWITH 'X'", expected: ["ada", "bob", "cy"]),
    RelationshipCase(entity: "Person", format: "passport.number == 'P1'", expected: ["ada"]),
    RelationshipCase(entity: "Person", format: "passport == nil", expected: ["cy"]),
    RelationshipCase(entity: "Person", format: "passport != nil", expected: ["ada", "bob", "dan"]),
    RelationshipCase(entity: "Person", format: "passport == %@", expected: ["bob"], arguments: ["P2"]),
    RelationshipCase(entity: "Person", format: "SELF IN %@", expected: ["ada", "cy"], arguments: ["ada", "cy"], list: true),
    RelationshipCase(entity: "Passport", format: "holder.name == 'ada'", expected: ["P1"]),
    RelationshipCase(entity: "Passport", format: "ANY holder.following.name == 'cy'", expected: ["P1", "X9"]),
    RelationshipCase(entity: "Passport", format: "holder.passport.number == number", expected: ["P1", "P2", "X9"]),
    // Across more than one to-many relationship: every object the whole path reaches.
    RelationshipCase(entity: "Person", format: "ANY following.following.name == 'cy'", expected: ["bob", "dan"]),
    RelationshipCase(entity: "Person", format: "ALL following.following.name != 'bob'", expected: ["ada", "cy"]),
    RelationshipCase(entity: "Person", format: "NONE following.following.name == 'ada'", expected: ["bob", "cy"]),
    RelationshipCase(entity: "Person", format: "ANY followers.following.passport.number == 'X9'", expected: []),
    RelationshipCase(entity: "Story", format: "ANY topics.stories.code == 's2'", expected: ["s1", "s2", "s4"]),
    RelationshipCase(entity: "Story", format: "ANY curators.curated.topics.name == 'apple'", expected: ["s4"]),
    RelationshipCase(entity: "Editor", format: "ANY curated.topics.name == 'apple'", expected: ["e2"]),
    RelationshipCase(entity: "Passport", format: "ANY holder.following.following.name == 'cy'", expected: ["P2", "X9"]),
    RelationshipCase(entity: "Topic", format: "%@ IN stories.curators", expected: ["apple", "sql", "swift"], arguments: ["e2"]),
]

@Suite("Predicates through many-to-many and one-to-one relationships, in SQL and in memory")
struct ManyToManyPredicateTests {
    /// Fetches in SQL (a fresh context, nothing pending), evaluates the same predicate on
    /// every object in memory, and compares both with the expected objects.
    func check<T: ManagedObject>(
        _ type: T.Type, _ test: RelationshipCase, in manager: ContextManager, label: (T) -> String
    ) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            let predicate = try FetchPredicate(format: test.format, argumentArray: try arguments(test, in: context))
            let stored = try context.fetch(FetchRequest<T>(predicate: predicate)).map(label).sorted()
            #expect(stored == test.expected, "SQL: \(test)")
            let evaluator = PredicateEvaluator(model: manager.coordinator.model)
            let inMemory = try context.fetchAll(T.self).filter { try evaluator.evaluate(predicate, on: $0) }.map(label).sorted()
            #expect(inMemory == test.expected, "memory: \(test)")
        }
    }

    private func arguments(_ test: RelationshipCase, in context: ManagedObjectContext) throws -> [Any?] {
        var objects: [ManagedObject] = []
        for name in test.arguments {
            let found: ManagedObject?
            switch name.first {
            case "P", "X": found = try context.fetch(FetchRequest<Passport>(format: "number == %@", name)).first
            case "e": found = try context.fetch(FetchRequest<Editor>(format: "name == %@", name)).first
            default:
                found = try context.fetch(FetchRequest<Topic>(format: "name == %@", name)).first
                    ?? context.fetch(FetchRequest<Person>(format: "name == %@", name)).first
            }
            objects.append(try #require(found, "no object \(name)"))
        }
        return test.list ? [objects] : objects
    }

    @Test(arguments: cases)
    func sqlAndMemoryAgree(_ test: RelationshipCase) throws {
        try withData { manager in
            switch test.entity {
            case "Story": try check(Story.self, test, in: manager) { $0.code }
            case "Topic": try check(Topic.self, test, in: manager) { $0.name }
            case "Editor": try check(Editor.self, test, in: manager) { $0.name }
            case "Person": try check(Person.self, test, in: manager) { $0.name }
            default: try check(Passport.self, test, in: manager) { $0.number }
            }
        }
    }

    @Test func unsavedChangesCountThroughTheJoinTable() throws {
        try withData { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let stories = Dictionary(uniqueKeysWithValues: try context.fetchAll(Story.self).map { ($0.code, $0) })
                let topics = Dictionary(uniqueKeysWithValues: try context.fetchAll(Topic.self).map { ($0.name, $0) })
                try #require(stories["s3"]).topics.insert(try #require(topics["rust"]))
                try #require(stories["s2"]).topics.remove(try #require(topics["swift"]))
                let fresh = Story(context: context)
                fresh.code = "s5"
                fresh.topics = [try #require(topics["swift"]), try #require(topics["rust"])]
                func codes(_ format: String) throws -> [String] {
                    try context.fetch(FetchRequest<Story>(format: format)).map(\.code).sorted()
                }
                #expect(try codes("ANY topics.name == 'rust'") == ["s3", "s5"])
                #expect(try codes("ANY topics.name == 'swift'") == ["s1", "s4", "s5"])
                #expect(try codes("topics.@count == 0") == ["s2"])
                #expect(try context.count(for: FetchRequest<Story>(format: "topics.@count >= 2")) == 3)
                let pairs = try context.fetch(FetchRequest<Topic>(format: "stories.@count == 2")).map(\.name).sorted()
                #expect(pairs == ["rust", "sql"])  // rust: s3, s5 (unsaved); sql: s1, s4
            }
        }
    }

    /// A quantifier over a path through two to-many relationships counts every object
    /// the whole path reaches (it used to be refused); `@count`, aggregates and a path
    /// without a quantifier still say which one relationship they need, in both engines.
    @Test func crossingTwoToManyRelationshipsNeedsAQuantifier() throws {
        try withData { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let evaluator = PredicateEvaluator(model: manager.coordinator.model)
                let topics = try context.fetchAll(Topic.self)
                let predicate = try FetchPredicate(format: "ANY stories.curators.name == 'e1'")
                #expect(try context.fetch(FetchRequest<Topic>(predicate: predicate)).map(\.name).sorted() == ["sql", "swift"])
                #expect(try topics.filter { try evaluator.evaluate(predicate, on: $0) }.map(\.name).sorted() == ["sql", "swift"])
                for format in ["stories.curators.@count > 0", "stories.curators.name == 'e1'", "stories.curators.@max.name == 'e1'"] {
                    let refused = try FetchPredicate(format: format)
                    #expect(throws: FetchPredicateError.self, "\(format)") {
                        _ = try context.fetch(FetchRequest<Topic>(predicate: refused))
                    }
                    let topic = try #require(topics.first)
                    #expect(throws: FetchPredicateError.self, "\(format)") { _ = try evaluator.evaluate(refused, on: topic) }
                }
            }
        }
    }

    @Test func prefetchingLoadsEachLevelWithOneQuery() throws {
        try withData { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                _ = try context.count(for: FetchRequest<Editor>())  // begins the transaction
                var request = FetchRequest<Story>(sortDescriptors: [FetchSortDescriptor("code")])
                request.relationshipKeyPathsForPrefetching = ["topics", "topics.stories", "curators"]
                var before = manager.coordinator.statementCount
                let stories = try context.fetch(request)
                // The stories, their topics, those topics' stories, their curators.
                #expect(manager.coordinator.statementCount - before == 4)
                before = manager.coordinator.statementCount
                #expect(stories.map { $0.topics.names } == [["sql", "swift"], ["swift"], [], ["apple", "sql", "swift"]])
                #expect(stories.flatMap(\.topics).map { $0.stories.codes }.contains(["s1", "s2", "s4"]))
                #expect(stories.map { $0.curators.map(\.name) } == [["e1"], ["e1"], [], ["e2"]])
                #expect(manager.coordinator.statementCount == before)

                var people = FetchRequest<Person>()
                people.relationshipKeyPathsForPrefetching = ["passport", "followers"]
                before = manager.coordinator.statementCount
                let everyone = try context.fetch(people)
                #expect(manager.coordinator.statementCount - before == 3)
                before = manager.coordinator.statementCount
                let numbers = Dictionary(uniqueKeysWithValues: everyone.map { ($0.name, $0.passport?.number ?? "-") })
                #expect(numbers == ["ada": "P1", "bob": "P2", "cy": "-", "dan": "X9"])
                #expect(everyone.first { $0.name == "cy" }?.followers.names == ["ada", "dan"])
                #expect(manager.coordinator.statementCount == before)
            }
        }
    }

    @Test func sortingAndDictionariesReadTheSideWithoutTheKey() throws {
        try withData { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                var request = FetchRequest<Person>(sortDescriptors: [FetchSortDescriptor("passport.number", ascending: false)])
                #expect(try context.fetch(request).map(\.name) == ["dan", "bob", "ada", "cy"])
                request.propertiesToFetch = ["name", "passport.number"]
                let rows = try context.fetchDictionaries(request)
                #expect(rows.map { $0["passport.number"] as? String } == ["X9", "P2", "P1", nil])
            }
        }
    }
}
