import Foundation
import PGDataKit

/// The tests' stories (`ManyToManyModel.swift`), with only their topics.
final class HelperStory: ManagedObject {
    override class var entityName: String { "Story" }
    override class var tableName: String { "stories" }
    @Attribute var code: String = ""
    @Relationship(inverse: "stories") var topics: Set<HelperTopic>
}

/// The tests' topics.
final class HelperTopic: ManagedObject {
    override class var entityName: String { "Topic" }
    override class var tableName: String { "topics" }
    @Attribute var name: String = ""
    @Relationship(inverse: "topics") var stories: Set<HelperStory>
}

/// Another worker holding every topic in its main context: prints
/// `topics <name>=<story codes>…` when it starts and after each merge of another
/// process's save, reading each topic's (many-to-many) stories.
func topicsWatch(_ url: String) -> Never {
    let watcher: ContextManager
    do {
        watcher = try ContextManager(configuration: ConnectionConfiguration(url), entities: [HelperStory.self, HelperTopic.self])
    } catch {
        fail("\(error)")
    }
    let main = watcher.mainContext
    let held = HeldTopics()
    @Sendable func report() throws {
        if held.topics.isEmpty { held.topics = try main.fetchAll(HelperTopic.self) }
        let line = held.topics.sorted { $0.name < $1.name }.map { topic in
            "\(topic.name)=" + topic.stories.map(\.code).sorted().joined(separator: ",")
        }
        emit("topics " + line.joined(separator: " "))
    }
    watchMainContext(of: watcher, report)
}

/// The topics the watcher holds; used only on the main context's queue.
final class HeldTopics: @unchecked Sendable {
    var topics: [HelperTopic] = []
}

/// Runs `report` on `watcher`'s main context now and after each change the context
/// merges (an error is printed as `error …` and the watch goes on); never returns.
func watchMainContext(of watcher: ContextManager, _ report: @escaping @Sendable () throws -> Void) -> Never {
    let main = watcher.mainContext
    let token = main.observeObjectsDidChange { _ in
        do {
            try report()
        } catch {
            emit("error \(error)")
        }
    }
    do {
        try main.performAndWait { try report() }
    } catch {
        fail("\(error)")
    }
    while true {
        withExtendedLifetime((token, watcher)) { _ = sleep(60) }
    }
}
