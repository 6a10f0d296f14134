import Foundation
import PGDataKit
import Testing

/// Reads `body` on a context's queue until it returns true, or fails after `timeout`.
private func eventually(
    _ what: String, in context: ManagedObjectContext, timeout: Duration = patience, _ body: () throws -> Bool
) throws {
    let start = ContinuousClock.now
    while true {
        if try context.performAndWait(body) { return }
        if start.duration(to: .now) > timeout { throw TestFailure("timed out waiting until \(what)") }
        usleep(10_000)
    }
}

@Suite("Many-to-many changes reach other contexts and processes")
struct ManyToManyMergeTests {
    @Test func aPrivateSaveReachesTheMainContextsLoadedSets() throws {
        try ManyToManySchema.withManager { manager in
            let setup = manager.newPrivateContext()
            try setup.performAndWait {
                let topic = Topic(context: setup)
                topic.name = "swift"
                for code in ["s1", "s2"] { Story(context: setup).code = code }
                try setup.save()
            }
            let main = manager.mainContext
            let topic = try main.performAndWait { try #require(try main.fetchAll(Topic.self).first) }
            main.performAndWait { #expect(topic.stories.isEmpty) }

            let writer = manager.newPrivateContext()
            try writer.performAndWait {
                let stories = try writer.fetchAll(Story.self)
                let swift = try #require(try writer.fetchAll(Topic.self).first)
                swift.stories = Set(stories)
                try writer.save()
            }
            try eventually("the main context sees both stories", in: main) { topic.stories.codes == ["s1", "s2"] }
            try main.performAndWait {
                let first = try #require(topic.stories.first { $0.code == "s1" })
                #expect(first.topics.names == ["swift"])
            }
        }
    }

    @Test func anotherManagersMainContextMergesAdditionsRemovalsAndDeletions() throws {
        try ManyToManySchema.withDatabase { configuration in
            let writerManager = try ContextManager(configuration: configuration, entities: ManyToManySchema.entities)
            defer { writerManager.close() }
            let watcherManager = try ContextManager(configuration: configuration, entities: ManyToManySchema.entities)
            defer { watcherManager.close() }

            let setup = writerManager.newPrivateContext()
            try setup.performAndWait {
                let swift = Topic(context: setup)
                swift.name = "swift"
                let first = Story(context: setup)
                first.code = "s1"
                first.topics = [swift]
                Story(context: setup).code = "s2"
                let ada = Person(context: setup)
                ada.name = "ada"
                Person(context: setup).name = "bob"
                try setup.save()
            }
            let main = watcherManager.mainContext
            let (topic, stories, ada) = try main.performAndWait { () throws -> (Topic, [String: Story], Person) in
                let topic = try #require(try main.fetchAll(Topic.self).first)
                let stories = Dictionary(uniqueKeysWithValues: try main.fetchAll(Story.self).map { ($0.code, $0) })
                let ada = try #require(try main.fetch(FetchRequest<Person>(format: "name == 'ada'")).first)
                #expect(topic.stories.codes == ["s1"])
                #expect(stories["s2"]?.topics.isEmpty == true)
                #expect(ada.following.isEmpty && ada.passport == nil)
                return (topic, stories, ada)
            }

            // s2 gains the topic, s1 loses it; ada follows bob and gets a passport.
            let writer = writerManager.newPrivateContext()
            try writer.performAndWait {
                let stories = Dictionary(uniqueKeysWithValues: try writer.fetchAll(Story.self).map { ($0.code, $0) })
                let swift = try #require(try writer.fetchAll(Topic.self).first)
                try #require(stories["s2"]).topics.insert(swift)
                try #require(stories["s1"]).topics.remove(swift)
                let people = Dictionary(uniqueKeysWithValues: try writer.fetchAll(Person.self).map { ($0.name, $0) })
                try #require(people["ada"]).following.insert(try #require(people["bob"]))
                let passport = Passport(context: writer)
                passport.number = "P1"
                passport.holder = people["ada"]
                try writer.save()
            }
            try eventually("the other manager's main context sees the moves", in: main) {
                topic.stories.codes == ["s2"] && stories["s1"]?.topics.isEmpty == true
                    && stories["s2"]?.topics.names == ["swift"] && ada.following.names == ["bob"]
                    && ada.passport?.number == "P1"
            }

            // A deleted story leaves the loaded set without a failing read.
            try writer.performAndWait {
                let story = try #require(try writer.fetch(FetchRequest<Story>(format: "code == 's2'")).first)
                writer.delete(story)
                try writer.save()
            }
            try eventually("the deletion is merged", in: main) { topic.stories.isEmpty }
            main.performAndWait { #expect(stories["s2"]?.isDeleted == true) }
        }
    }

    @Test func anotherProcessSeesTheSetsChange() throws {
        try ManyToManySchema.withDatabase { configuration in
            let manager = try ContextManager(configuration: configuration, entities: ManyToManySchema.entities)
            defer { manager.close() }
            let setup = manager.newPrivateContext()
            try setup.performAndWait {
                for name in ["swift", "sql"] { Topic(context: setup).name = name }
                for code in ["s1", "s2"] { Story(context: setup).code = code }
                try setup.save()
            }
            let watcher = try HelperProcess.start("topics-watch", configuration)
            defer { watcher.stop() }
            try watcher.waitUntil("the watcher is ready") { $0.contains("topics sql= swift=") }

            let context = manager.newPrivateContext()
            try context.performAndWait {
                let stories = try context.fetchAll(Story.self)
                let topics = Dictionary(uniqueKeysWithValues: try context.fetchAll(Topic.self).map { ($0.name, $0) })
                try #require(topics["swift"]).stories = Set(stories)
                try #require(topics["sql"]).stories = Set(stories.filter { $0.code == "s2" })
                try context.save()
            }
            try watcher.waitUntil("the watcher sees the pairs") { $0.contains("topics sql=s2 swift=s1,s2") }
            try context.performAndWait {
                let s2 = try #require(try context.fetch(FetchRequest<Story>(format: "code == 's2'")).first)
                s2.topics = []
                try context.save()
            }
            try watcher.waitUntil("the watcher sees s2 leave both topics") { $0.contains("topics sql= swift=s1") }
        }
    }
}
