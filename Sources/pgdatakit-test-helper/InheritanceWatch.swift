import Foundation
import PGDataKit

// The tests' entity hierarchy (`InheritanceModel.swift`), declared again in this process:
// same entities, table and attributes.

/// The tests' abstract `Content`.
class HelperContent: ManagedObject {
    override class var entityName: String { "Content" }
    override class var isAbstract: Bool { true }
    override class var tableName: String { "contents" }
    @Attribute var title: String = ""
    @Attribute var rank: Int = 0
    @Relationship(inverse: "items") var folder: HelperFolder?
}

/// The tests' `Article`.
final class HelperArticle: HelperContent {
    override class var entityName: String { "Article" }
    @Attribute var body: String = ""
    @Attribute(unique: true) var slug: String?
}

/// The tests' `Video`.
final class HelperVideo: HelperContent {
    override class var entityName: String { "Video" }
    @Attribute var seconds: Int = 0
}

/// The tests' `Folder`.
final class HelperFolder: ManagedObject {
    override class var entityName: String { "Folder" }
    override class var tableName: String { "folders" }
    @Attribute(unique: true) var name: String = ""
    @Relationship(inverse: "folder", deleteRule: .cascade) var items: Set<HelperContent>
}

/// One content as `Kind:title;rank=…;…` with its kind's own attributes; `Kind?title` when
/// the object's class is not its entity's.
func describeContent(_ content: HelperContent) -> String {
    let folder = "folder=\(content.folder?.name ?? "-")"
    switch content {
    case let article as HelperArticle where content.entity.name == "Article":
        return "Article:\(article.title);rank=\(article.rank);body=\(article.body);slug=\(article.slug ?? "-");\(folder)"
    case let video as HelperVideo where content.entity.name == "Video":
        return "Video:\(video.title);rank=\(video.rank);seconds=\(video.seconds);\(folder)"
    default:
        return "\(content.entity.name)?\(content.title)"
    }
}

/// `content-watch URL`: another worker holding every content and folder in its main
/// context. Prints `contents A | B | …` (see `describeContent`, by title) and
/// `folders NAME=TITLE,…;…` (by name, each folder's items by title) when it starts and
/// after each merge of another process's save: updated objects as the merge refreshed
/// them, inserted ones resolved from the merged IDs (`object(with:)`), deleted ones gone.
func contentWatch(_ url: String) -> Never {
    let watcher: ContextManager
    do {
        watcher = try ContextManager(
            configuration: ConnectionConfiguration(url),
            entities: [HelperContent.self, HelperArticle.self, HelperVideo.self, HelperFolder.self])
    } catch {
        fail("\(error)")
    }
    let main = watcher.mainContext
    let held = HeldContents()
    let token = main.observeObjectsDidChange { changes in
        do {
            for id in changes.deleted { held.objects.removeValue(forKey: id) }
            for id in changes.inserted { held.objects[id] = try main.object(with: id) }
            reportContents(held)
        } catch {
            emit("error \(error)")
        }
    }
    do {
        try main.performAndWait {
            let contents: [ManagedObject] = try main.fetchAll(HelperContent.self)
            for object in try contents + main.fetchAll(HelperFolder.self) { held.objects[object.objectID] = object }
            reportContents(held)
        }
    } catch {
        fail("\(error)")
    }
    emit("ready \(watcher.coordinator.listenerBackendPID.map(String.init) ?? "none")")
    while true {
        withExtendedLifetime((token, watcher)) { _ = sleep(60) }
    }
}

/// Prints the `contents` and `folders` lines of what `held` holds.
private func reportContents(_ held: HeldContents) {
    let contents = held.objects.values.compactMap { $0 as? HelperContent }.sorted { $0.title < $1.title }
    emit("contents " + contents.map(describeContent).joined(separator: " | "))
    let folders = held.objects.values.compactMap { $0 as? HelperFolder }.sorted { $0.name < $1.name }
    emit(
        "folders "
            + folders.map { "\($0.name)=" + $0.items.map(\.title).sorted().joined(separator: ",") }.joined(separator: ";"))
}

/// The objects the watcher holds, by ID; used only on the main context's queue.
final class HeldContents: @unchecked Sendable {
    var objects: [ObjectID: ManagedObject] = [:]
}

/// `content-save URL OP…`: one save, in a private context, of these operations in order:
/// `article TITLE RANK SLUG`, `video TITLE RANK SECONDS`, `rank TITLE RANK`, `delete TITLE`
/// (contents found by title). Prints `saved`.
func contentSave(_ url: String, _ operations: [String]) -> Never {
    do {
        let manager = try ContextManager(
            configuration: ConnectionConfiguration(url),
            entities: [HelperContent.self, HelperArticle.self, HelperVideo.self, HelperFolder.self])
        let context = manager.newPrivateContext()
        try context.performAndWait {
            var rest = operations[...]
            func next() -> String {
                guard let value = rest.popFirst() else { fail("missing operand in \(operations)") }
                return value
            }
            func content(_ title: String) throws -> HelperContent {
                guard let found = try HelperContent.first(in: context, where: "title == %@", title) else { fail("no \(title)") }
                return found
            }
            while let operation = rest.popFirst() {
                switch operation {
                case "article":
                    let article = HelperArticle(context: context)
                    (article.title, article.rank, article.slug) = (next(), Int(next()) ?? 0, next())
                case "video":
                    let video = HelperVideo(context: context)
                    (video.title, video.rank, video.seconds) = (next(), Int(next()) ?? 0, Int(next()) ?? 0)
                case "rank": try content(next()).rank = Int(next()) ?? 0
                case "delete": try content(next()).delete()
                default: fail("unknown operation \(operation)")
                }
            }
            try context.save()
        }
        manager.close()
    } catch {
        fail("\(error)")
    }
    emit("saved")
    exit(0)
}
