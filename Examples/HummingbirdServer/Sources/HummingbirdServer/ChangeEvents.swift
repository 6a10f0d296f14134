import Foundation
import Hummingbird
import PGDataKit
import ServiceLifecycle

/// `GET /events`: other processes' saves as server-sent events, one `change` event per
/// change record, read by this process's change listener:
///
///     event: change
///     data: {"id":42,"deleted":[],"inserted":["User/7"],"updated":[]}
///
/// The stream ends when the server shuts down gracefully (so that a shutdown does not
/// wait for clients to hang up) or when the manager closes.
struct ChangeEvents: Sendable {
    let manager: ContextManager

    func add(to router: Router<BasicRequestContext>) {
        router.get("events") { _, _ in
            let changes = manager.coordinator.remoteChanges()
            return Response(
                status: .ok,
                headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
                body: ResponseBody { writer in
                    // A comment first: the client knows the stream is open.
                    try await writer.write(ByteBuffer(string: ": listening\n\n"))
                    for await record in changes.cancelOnGracefulShutdown() {
                        try await writer.write(ByteBuffer(string: Self.event(for: record)))
                    }
                    try await writer.finish(nil)
                })
        }
    }

    /// The event for one change record: its id and the objects it inserted, updated and
    /// deleted, as `Entity/primaryKey`.
    static func event(for record: ChangeRecord) -> String {
        func names(_ ids: Set<ObjectID>) -> [String] {
            ids.map { "\($0.entityName)/\($0.primaryKey.map(String.init) ?? "?")" }.sorted()
        }
        let payload: [String: [String]] = [
            "inserted": names(record.changes.inserted), "updated": names(record.changes.updated),
            "deleted": names(record.changes.deleted),
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let lists = (try? encoder.encode(payload)).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
        return "event: change\ndata: {\"id\":\(record.id),\(lists.dropFirst())\n\n"
    }
}
