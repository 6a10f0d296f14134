import Foundation
import PGDataKit
import Synchronization
import Testing

@Suite("Many-to-many and one-to-one relationships: memory, save, reload, delete rules")
struct ManyToManyTests {
    @Test func inversesStayInSyncInMemory() throws {
        try ManyToManySchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let first = Story(context: context)
                first.code = "s1"
                let second = Story(context: context)
                second.code = "s2"
                let swift = Topic(context: context)
                swift.name = "swift"
                let sql = Topic(context: context)
                sql.name = "sql"
                first.topics = [swift, sql]
                #expect(swift.stories.codes == ["s1"])
                #expect(sql.stories.codes == ["s1"])
                swift.stories.insert(second)
                #expect(second.topics.names == ["swift"])
                #expect(swift.stories.codes == ["s1", "s2"])
                first.topics.remove(sql)
                #expect(sql.stories.isEmpty)
                #expect(first.topics.names == ["swift"])
                first.topics.insert(sql)
                #expect(sql.stories.codes == ["s1"])

                // An object of no context joins the context with the relationship.
                let fresh = Topic()
                fresh.name = "fresh"
                second.topics.insert(fresh)
                #expect(fresh.managedObjectContext === context)
                #expect(fresh.stories.codes == ["s2"])
                // Both sides set before either is in a context come along together.
                let loose = Story()
                loose.code = "loose"
                let looseTopic = Topic()
                looseTopic.name = "loose"
                loose.topics.insert(looseTopic)
                #expect(looseTopic.stories.codes == ["loose"])
                context.insert(loose)
                #expect(looseTopic.managedObjectContext === context)

                // Within one entity: following and followers are two sides.
                let ada = Person(context: context)
                ada.name = "ada"
                let bob = Person(context: context)
                bob.name = "bob"
                ada.following.insert(bob)
                #expect(bob.followers.names == ["ada"])
                #expect(ada.followers.isEmpty && bob.following.isEmpty)

                // A deleted object leaves the sets it was in (nullify).
                context.delete(second)
                #expect(swift.stories.codes == ["s1"])
                #expect(fresh.stories.isEmpty)
                try context.save()
            }
            #expect(try ManyToManySchema.storyTopics(in: manager) == ["loose-loose", "s1-sql", "s1-swift"])
            #expect(
                try ManyToManySchema.pairs(
                    "SELECT a.name, b.name FROM follows f JOIN people a ON a.id = f.follower_id JOIN people b ON b.id = f.followed_id",
                    in: manager) == ["ada-bob"])
        }
    }

    @Test func oneToOnePartnersStayInSyncAndReassigningReleasesThePreviousOne() throws {
        try ManyToManySchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let ada = Person(context: context)
                ada.name = "ada"
                let bob = Person(context: context)
                bob.name = "bob"
                let p1 = Passport(context: context)
                p1.number = "P1"
                let p2 = Passport(context: context)
                p2.number = "P2"
                ada.passport = p1
                #expect(p1.holder === ada)
                ada.passport = p2  // p1 lets go
                #expect(p1.holder == nil && p2.holder === ada && ada.passport === p2)
                p2.holder = bob  // ada loses it
                #expect(ada.passport == nil && bob.passport === p2)
                p1.holder = bob  // bob's previous passport lets go
                #expect(p2.holder == nil && bob.passport === p1)
                // Set on the side without the key before insertion: stored on the partner.
                let cy = Person()
                cy.name = "cy"
                let p3 = Passport()
                p3.number = "P3"
                cy.passport = p3
                context.insert(cy)
                #expect(p3.managedObjectContext === context && p3.holder === cy && cy.passport === p3)
                try context.save()
            }
            let holders = try ManyToManySchema.pairs(
                "SELECT p.number, COALESCE(h.name, '-') FROM passports p LEFT JOIN people h ON h.id = p.person_id", in: manager)
            #expect(holders == ["P1-bob", "P2--", "P3-cy"])

            // In a new context, with bob's passport not loaded: giving P2 to bob must first
            // take P1 from him (the unique key allows one passport per person).
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let people = try reader.fetch(FetchRequest<Person>(format: "name == 'bob'"))
                let bob = try #require(people.first)
                let p2 = try #require(try reader.fetch(FetchRequest<Passport>(format: "number == 'P2'")).first)
                p2.holder = bob
                #expect(bob.passport === p2)
                try reader.save()
            }
            #expect(try ManyToManySchema.pairs(
                "SELECT p.number, COALESCE(h.name, '-') FROM passports p LEFT JOIN people h ON h.id = p.person_id", in: manager)
                == ["P1--", "P2-bob", "P3-cy"])
            // Two people swap passports, and a new passport replaces a deleted one, in one
            // save: the keys are released first, so no row meets the unique key half-way.
            let swapper = manager.newPrivateContext()
            try swapper.performAndWait {
                let people = Dictionary(uniqueKeysWithValues: try swapper.fetchAll(Person.self).map { ($0.name, $0) })
                let passports = Dictionary(uniqueKeysWithValues: try swapper.fetchAll(Passport.self).map { ($0.number, $0) })
                let bob = try #require(people["bob"]), cy = try #require(people["cy"])
                let p2 = try #require(passports["P2"]), p3 = try #require(passports["P3"])
                p2.holder = cy
                p3.holder = bob
                #expect(bob.passport === p3 && cy.passport === p2)
                swapper.delete(p3)
                let p4 = Passport(context: swapper)
                p4.number = "P4"
                p4.holder = bob
                try swapper.save()
            }
            #expect(try ManyToManySchema.pairs(
                "SELECT p.number, COALESCE(h.name, '-') FROM passports p LEFT JOIN people h ON h.id = p.person_id", in: manager)
                == ["P1--", "P2-cy", "P4-bob"])
            // Reading the side without the key: one query.
            let third = manager.newPrivateContext()
            try third.performAndWait {
                let cy = try #require(try third.fetch(FetchRequest<Person>(format: "name == 'cy'")).first)
                let before = manager.coordinator.statementCount
                #expect(cy.passport?.number == "P2")
                #expect(manager.coordinator.statementCount - before == 1)
                _ = cy.passport
                #expect(manager.coordinator.statementCount - before == 1)
            }
        }
    }

    /// Codes `s0`…`s29`, topic names `t0`…`t9`, editors `e0`…`e4`.
    private func seed(_ manager: ContextManager) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            for index in 0..<30 { Story(context: context).code = "s\(index)" }
            for index in 0..<10 { Topic(context: context).name = "t\(index)" }
            for index in 0..<5 { Editor(context: context).name = "e\(index)" }
            try context.save()
        }
    }

    @Test func aSaveWritesOneStatementPerJoinTableAndKindOfChange() throws {
        try ManyToManySchema.withManager { manager in
            try seed(manager)
            let context = manager.newPrivateContext()
            context.shouldMergeOnSave = false
            let saved = Mutex<[ContextChanges]>([])
            let token = context.observeDidSave { changes in saved.withLock { $0.append(changes) } }
            defer { token.cancel() }
            try context.performAndWait {
                var request = FetchRequest<Story>()
                request.relationshipKeyPathsForPrefetching = ["topics", "curators"]
                let stories = Dictionary(uniqueKeysWithValues: try context.fetch(request).map { ($0.code, $0) })
                let topics = Dictionary(uniqueKeysWithValues: try context.fetchAll(Topic.self).map { ($0.name, $0) })
                let editors = Dictionary(uniqueKeysWithValues: try context.fetchAll(Editor.self).map { ($0.name, $0) })
                for index in 0..<30 {
                    let story = try #require(stories["s\(index)"])
                    story.topics = [try #require(topics["t\(index % 10)"]), try #require(topics["t\((index + 1) % 10)"])]
                    story.curators.insert(try #require(editors["e\(index % 5)"]))
                }
                let before = manager.coordinator.statementCount
                try context.save()
                // One INSERT per join table, the change record, COMMIT (the fetches began
                // the transaction).
                #expect(manager.coordinator.statementCount - before == 4)
            }
            var expected = (0..<30).flatMap { ["s\($0)-t\($0 % 10)", "s\($0)-t\(($0 + 1) % 10)"] }.sorted()
            #expect(try ManyToManySchema.storyTopics(in: manager) == expected)
            #expect(try ExampleSchema.count("SELECT count(*) FROM curation", in: manager) == 30)
            let first = try #require(saved.withLock { $0.first })
            #expect(first.inserted.isEmpty && first.deleted.isEmpty)
            #expect(first.updated.count == 45)  // 30 stories, 10 topics, 5 editors
            #expect(Set(first.changedKeys.values) == [["topics", "curators"], ["stories"], ["curated"]])

            // Removals, additions and a deleted story (whose curation rows have no ON DELETE
            // CASCADE) in one save: one DELETE and one INSERT per join table.
            try context.performAndWait {
                let stories = Dictionary(uniqueKeysWithValues: try context.fetchAll(Story.self).map { ($0.code, $0) })
                let topics = Dictionary(uniqueKeysWithValues: try context.fetchAll(Topic.self).map { ($0.name, $0) })
                for index in 0..<29 {
                    let story = try #require(stories["s\(index)"])
                    story.topics.remove(try #require(topics["t\(index % 10)"]))
                    story.topics.insert(try #require(topics["t\((index + 2) % 10)"]))
                    if index < 10 { story.curators = [] }
                }
                context.delete(try #require(stories["s29"]))
                let before = manager.coordinator.statementCount
                try context.save()
                // The story's row locked (see `lockRows`), DELETE + INSERT on
                // stories_topics, DELETE on curation, DELETE of the story, the change
                // record, COMMIT.
                #expect(manager.coordinator.statementCount - before == 7)
            }
            expected = (0..<29).flatMap { ["s\($0)-t\(($0 + 1) % 10)", "s\($0)-t\(($0 + 2) % 10)"] }.sorted()
            #expect(try ManyToManySchema.storyTopics(in: manager) == expected)
            #expect(try ExampleSchema.count("SELECT count(*) FROM curation", in: manager) == 19)
            #expect(try ExampleSchema.count("SELECT count(*) FROM stories", in: manager) == 29)
            // Nothing left to save; a save without changes sends nothing.
            try context.performAndWait {
                #expect(!context.hasChanges)
                let before = manager.coordinator.statementCount
                try context.save()
                #expect(manager.coordinator.statementCount == before)
            }
        }
    }

    @Test func membersReloadInANewContextWithOneQuery() throws {
        try ManyToManySchema.withManager { manager in
            let writer = manager.newPrivateContext()
            try writer.performAndWait {
                let story = Story(context: writer)
                story.code = "s1"
                for name in ["a", "b", "c"] {
                    let topic = Topic(context: writer)
                    topic.name = name
                    story.topics.insert(topic)
                }
                let other = Story(context: writer)
                other.code = "s2"
                other.topics = story.topics.filter { $0.name == "b" }
                try writer.save()
                // A new object's set is known after its save: reading it needs no query.
                let before = manager.coordinator.statementCount
                #expect(story.topics.names == ["a", "b", "c"])
                #expect(manager.coordinator.statementCount == before)
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait {
                let story = try #require(try reader.fetch(FetchRequest<Story>(format: "code == 's1'")).first)
                let before = manager.coordinator.statementCount
                let topics = story.topics
                #expect(topics.names == ["a", "b", "c"])
                #expect(manager.coordinator.statementCount - before == 1)
                _ = story.topics
                #expect(manager.coordinator.statementCount - before == 1)
                let b = try #require(topics.first { $0.name == "b" })
                #expect(b.stories.codes == ["s1", "s2"])
                #expect(manager.coordinator.statementCount - before == 2)
                // Unsaved changes count on top of the stored set.
                story.topics.remove(b)
                #expect(b.stories.codes == ["s2"])
                #expect(story.isUpdated && b.isUpdated && reader.hasChanges)
                #expect(reader.updatedObjects.count == 2)
                #expect((story.changedValues()["topics"] as? [ManagedObject])?.count == 2)
                reader.rollback()
                #expect(!reader.hasChanges)
                #expect(story.topics.names == ["a", "b", "c"])
                #expect(b.stories.codes == ["s1", "s2"])
            }
        }
    }

    @Test func deleteRulesNullifyCascadeAndDeny() throws {
        try ManyToManySchema.withManager { manager in
            let setup = manager.newPrivateContext()
            try setup.performAndWait {
                let editor = Editor(context: setup)
                editor.name = "e1"
                let topic = Topic(context: setup)
                topic.name = "swift"
                for code in ["s1", "s2", "s3"] {
                    let story = Story(context: setup)
                    story.code = code
                    story.topics.insert(topic)
                    if code != "s3" { story.curators.insert(editor) }
                }
                let ada = Person(context: setup)
                ada.name = "ada"
                let bob = Person(context: setup)
                bob.name = "bob"
                ada.following = [bob]
                bob.following = [ada]
                let passport = Passport(context: setup)
                passport.number = "P1"
                ada.passport = passport
                try setup.save()
            }
            // Deny: a topic with stories stays.
            let denied = manager.newPrivateContext()
            try denied.performAndWait {
                let topic = try #require(try denied.fetchAll(Topic.self).first)
                denied.delete(topic)
                #expect {
                    try denied.save()
                } throws: { error in
                    guard let error = error as? ManagedObjectError, error.code == .deleteDenied else { return false }
                    return error.entity == "Topic" && error.key == "stories" && error.relatedCount == 3
                }
                denied.rollback()
            }
            // Cascade: deleting the editor deletes the stories it curated; their join rows
            // go first (curation has no ON DELETE CASCADE). Nullify: the topic keeps s3.
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let editor = try #require(try context.fetchAll(Editor.self).first)
                let topic = try #require(try context.fetchAll(Topic.self).first)
                #expect(topic.stories.codes == ["s1", "s2", "s3"])
                context.delete(editor)
                #expect(topic.stories.codes == ["s3"])
                #expect(context.deletedObjects.count == 3)
                try context.save()
            }
            #expect(try ManyToManySchema.storyTopics(in: manager) == ["s3-swift"])
            #expect(try ExampleSchema.count("SELECT count(*) FROM curation", in: manager) == 0)
            #expect(try ExampleSchema.count("SELECT count(*) FROM stories", in: manager) == 1)
            // A person's follows rows (no ON DELETE CASCADE either) go with the person,
            // loaded or not, and the passport cascades (one-to-one).
            let people = manager.newPrivateContext()
            try people.performAndWait {
                let ada = try #require(try people.fetch(FetchRequest<Person>(format: "name == 'ada'")).first)
                people.delete(ada)
                try people.save()
                let bob = try #require(try people.fetchAll(Person.self).first)
                #expect(bob.following.isEmpty && bob.followers.isEmpty)
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM follows", in: manager) == 0)
            #expect(try ExampleSchema.count("SELECT count(*) FROM passports", in: manager) == 0)
            // Deny lets go once the topic has no stories.
            let last = manager.newPrivateContext()
            try last.performAndWait {
                let topic = try #require(try last.fetchAll(Topic.self).first)
                topic.stories = []
                last.delete(topic)
                try last.save()
            }
            #expect(try ExampleSchema.count("SELECT count(*) FROM topics", in: manager) == 0)
            #expect(try ExampleSchema.count("SELECT count(*) FROM stories_topics", in: manager) == 0)
        }
    }

    @Test func twoContextsAddingAndRemovingTheSamePairDoNotConflict() throws {
        try ManyToManySchema.withManager { manager in
            let setup = manager.newPrivateContext()
            try setup.performAndWait {
                Story(context: setup).code = "s1"
                Topic(context: setup).name = "swift"
                try setup.save()
            }
            // Both read (their snapshots start) before either saves.
            let first = manager.newPrivateContext()
            let second = manager.newPrivateContext()
            func tag(_ context: ManagedObjectContext) throws {
                let story = try #require(try context.fetchAll(Story.self).first)
                let topic = try #require(try context.fetchAll(Topic.self).first)
                #expect(story.topics.isEmpty)
                story.topics.insert(topic)
            }
            try first.performAndWait { try tag(first) }
            try second.performAndWait { try tag(second) }
            try first.performAndWait { try first.save() }
            // The pair is stored already, by a transaction this snapshot does not see.
            try second.performAndWait {
                try second.save()
                #expect(second.resolvedConflicts.isEmpty)
            }
            #expect(try ManyToManySchema.storyTopics(in: manager) == ["s1-swift"])
            // Both remove it: the second removal finds nothing to delete, which is fine.
            func untag(_ context: ManagedObjectContext) throws {
                let story = try #require(try context.fetchAll(Story.self).first)
                #expect(story.topics.names == ["swift"])
                story.topics = []
            }
            try first.performAndWait { try untag(first) }
            try second.performAndWait { try untag(second) }
            try first.performAndWait { try first.save() }
            try second.performAndWait { try second.save() }
            #expect(try ManyToManySchema.storyTopics(in: manager).isEmpty)
        }
    }

    @Test func aFailedSaveKeepsTheChangesForARetry() throws {
        try ManyToManySchema.withManager { manager in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                let story = Story(context: context)
                story.code = "s1"
                let topic = Topic(context: context)
                topic.name = "swift"
                try context.save()
                story.topics.insert(topic)
                let duplicate = Story(context: context)
                duplicate.code = "s1"  // unique violation: the whole save fails
                #expect(throws: PostgresError.self) { try context.save() }
                #expect(story.topics.names == ["swift"] && topic.stories.codes == ["s1"])
                context.delete(duplicate)
                try context.save()
            }
            #expect(try ManyToManySchema.storyTopics(in: manager) == ["s1-swift"])
        }
    }
}
