import Logging
import Synchronization
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Keeps every message logged through it.
final class RecordingLogHandler: LogHandler, Sendable {
    let entries = Mutex<[String]>([])
    var metadata: Logger.Metadata {
        get { [:] }
        set {}  // metadata is not recorded
    }
    var logLevel: Logger.Level {
        get { .trace }
        set {}  // every level is recorded
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}  // metadata is not recorded
    }

    func log(event: LogEvent) {
        entries.withLock { $0.append("\(event.message)") }
    }

    var messages: [String] { entries.withLock { $0 } }
}

@Suite("One logger for coordinator, manager, contexts and listener")
struct LoggerInjectionTests {
    @Test func theListenerAndContextsLogThroughTheLoggerGiven() throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let handler = RecordingLogHandler()
            let logger = Logger(label: "app.data") { _ in handler }
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self], logger: logger)
            defer { manager.close() }
            #expect(manager.newPrivateContext().logger.label == "app.data")
            #expect(manager.mainContext.logger.label == "app.data")
            #expect(manager.coordinator.logger.label == "app.data")

            // Break the listener's connection: it says so through the logger it was given.
            let pid = try #require(manager.coordinator.listener.backendPID)
            let admin = try Connection(configuration)
            defer { admin.close() }
            try admin.execute("SELECT pg_terminate_backend($1)", [pid])
            let start = ContinuousClock.now
            while !handler.messages.contains(where: { $0.contains("change listener lost its connection") }) {
                if start.duration(to: .now) > patience { throw TestFailure("the listener logged nothing") }
                try admin.execute("SELECT pg_sleep(0.01)")
            }
        }
    }
}
