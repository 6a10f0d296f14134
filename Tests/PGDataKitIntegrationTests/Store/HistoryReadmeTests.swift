import Foundation
import Logging
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// The examples of DurableHistory.md ("Feeding another service") compile and run: each
/// Swift block of the article appears below, line for line.
@Suite("Docs: history examples")
struct HistoryReadmeTests {
    @Test func everySwiftBlockOfTheArticleIsInThisFile() throws {
        let file = "\(DocSnippets.catalog)/DurableHistory.md"
        #expect(try DocSnippets.swiftBlocks(in: file).count == 5)
        for block in try DocSnippets.blocksMissing(from: #filePath, in: file) {
            Issue.record("DurableHistory.md block not in this file:\n\(block)")
        }
    }

    /// What the examples feed: it notes each call.
    final class SearchIndex: Sendable {
        let calls = Mutex<[String]>([])
        func remove(_ url: URL) throws { calls.withLock { $0.append("remove \(url.absoluteString)") } }
        func reindex(_ id: ObjectID) throws { calls.withLock { $0.append("reindex \(id.uriRepresentation.absoluteString)") } }
        func apply(_ record: ChangeRecord) throws { calls.withLock { $0.append("apply \(record.id)") } }
        func rebuildFromScratch() throws { calls.withLock { $0.append("rebuild") } }
        var count: Int { calls.withLock { $0.count } }
    }

    /// Waits (politely, for an async test) until `condition` holds. Generous: in a full
    /// parallel run, blocking synchronous tests can keep the cooperative threads the
    /// examples' tasks need busy for a long while.
    func eventually(_ what: String, _ condition: () throws -> Bool) async throws {
        let start = ContinuousClock.now
        while try !condition() {
            if start.duration(to: .now) > .seconds(120) { throw TestFailure("timed out waiting until \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test(.onItsOwnThread) func theExamplesRun() async throws {
        let (configuration, cleanup) = try TestDatabase.makeFreshDatabase(migrations: true)
        defer { cleanup() }
        let databaseURL = try #require(configuration.renderedConnectionString())
        let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self])
        defer { manager.close() }
        let context = manager.newPrivateContext()
        try context.performAndWait {
            for id in ["a", "b"] {
                User(context: context).userID = id
                try context.save()
            }
            try User.deleteAll(in: context, where: "userID == 'a'")
            try context.save()
        }
        let searchIndex = SearchIndex()

        // The reader loop, stopped (cancelled) once it has fed the three saves.
        let loop = Task(executorPreference: OwnThreadExecutor.current) {
            let coordinator = try StoreCoordinator(
                model: try Model(entities: []), configuration: ConnectionConfiguration(databaseURL))
            defer { coordinator.close() }
            let reader = try coordinator.historyReader(named: "search-index")   // registered once, then resumed
            for try await record in reader.records() {      // every save after where it stopped, then live
                for id in record.changes.deleted { try searchIndex.remove(id.uriRepresentation) }
                for id in record.changes.inserted.union(record.changes.updated) { try searchIndex.reindex(id) }
                try await reader.acknowledge(record)        // a restart goes on after this record
            }
        }
        try await eventually("the loop fed three saves") { searchIndex.count == 3 }
        loop.cancel()
        try await loop.value
        #expect(searchIndex.calls.withLock { $0 }.sorted() == [
            "reindex x-pgdatakit://User/1", "reindex x-pgdatakit://User/2", "remove x-pgdatakit://User/1",
        ])

        let coordinator = manager.coordinator
        do {
            var token = try coordinator.oldestHistoryToken()    // or HistoryToken(parsing: saved)
            while true {
                let page = try coordinator.history(after: token, limit: 1_000)
                for record in page.records { try searchIndex.apply(record) }
                token = page.token                               // after the page, or after the read
                if !page.hasMore { break }
            }
            #expect(searchIndex.count == 6)
        }

        let connection = try Connection(configuration)
        defer { connection.close() }
        try connection.execute("CREATE TABLE audit (record_id bigint PRIMARY KEY)")
        let reader = try coordinator.historyReader(named: "audit", startingAt: .oldest)
        let audit = Task(executorPreference: OwnThreadExecutor.current) {
            for try await record in reader.records() {
                guard let token = record.historyToken else { continue }
                try connection.transaction { connection in
                    try connection.execute("INSERT INTO audit (record_id) VALUES ($1)", [record.id])
                    try reader.acknowledge(token, on: connection)   // committed together: exactly once
                }
            }
        }
        let admin = try Connection(configuration)
        defer { admin.close() }
        try await eventually("the audit table has the three records") {
            try admin.query("SELECT count(*) FROM audit")[0].decode(Int.self, at: 0) == 3
        }
        audit.cancel()
        try await audit.value

        do {
            let coordinator = try StoreCoordinator(
                model: try Model(entities: []), configuration: ConnectionConfiguration(databaseURL),
                changeLog: ChangeLogOptions(retention: .seconds(86_400), maximumHistoryReaderAge: .seconds(3 * 86_400)))
            for status in try coordinator.historyReaders() {
                print(status.name, status.acknowledgedAt, status.acknowledgedToken)
            }
            try coordinator.dropHistoryReader(named: "search-index")   // it holds nothing any more
            #expect(try coordinator.historyReaders().map(\.name) == ["audit"])
            coordinator.close()
        }

        // A reader whose unread records were pruned: the error, the rebuild, going on.
        try admin.execute("UPDATE pgdatakit_history_readers SET acknowledged_at = now() - interval '30 days'")
        try context.performAndWait {
            User(context: context).userID = "c"
            try context.save()
        }
        try await eventually("a pruning ran") {
            try ChangeLog.prune(olderThan: .zero, maximumReaderAge: .seconds(60), on: admin, logger: Logger(label: "t")) != nil
        }
        do {
            for try await record in reader.records() {
                try searchIndex.apply(record)
                try await reader.acknowledge(record)
            }
        } catch let error as HistoryError where error.code == .historyExpired {
            try searchIndex.rebuildFromScratch()   // records it needed were pruned unread
            if let oldest = error.oldestAvailable { try await reader.acknowledge(oldest) }   // go on from what is left
        }
        #expect(searchIndex.calls.withLock { $0.last } == "rebuild")
        let acknowledged = try await reader.acknowledgedToken()
        #expect(try coordinator.history(after: acknowledged, limit: 10).records.isEmpty)
    }
}
