import Foundation
import Logging
import Synchronization
import Testing

@testable import PGDataKit

/// A log handler that keeps every line with its metadata (the handler of
/// `LoggerInjectionTests` keeps messages only).
final class MetadataRecordingLogHandler: LogHandler, @unchecked Sendable {
    // Safe to share: `lines` is behind its own lock; the rest is set before use.
    let lines = Mutex<[(message: String, metadata: Logger.Metadata)]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        for (key, value) in event.metadata ?? [:] { merged[key] = value }
        lines.withLock { $0.append((event.message.description, merged)) }
    }
}

@Suite("A context's logger")
struct ContextLoggerTests {
    /// A request's logger given to `newPrivateContext` carries its metadata into the
    /// context's own log lines (here: a save redone after a serialization failure).
    @Test func aPrivateContextLogsWithTheRequestsMetadata() throws {
        try ExampleSchema.withManager { manager in
            let recorder = MetadataRecordingLogHandler()
            let logger = Logger(label: "request") { _ in recorder }
            let requestID = 42
            var requestLogger = logger
            requestLogger[metadataKey: "request"] = "\(requestID)"
            let context = manager.newPrivateContext(name: "POST /users", logger: requestLogger)
            context.mergePolicy = .mergeByPropertyObjectTrump
            let seed = manager.newPrivateContext()
            try seed.performAndWait {
                ExampleSchema.insertUsers(1, prefix: "logged", in: seed)
                try seed.save()
            }
            try context.performAndWait {
                for user in try User.fetch(in: context, where: "userID == %@", "logged0") { user.name = "request" }
            }
            let other = manager.newPrivateContext()
            try other.performAndWait {
                for user in try User.fetch(in: other, where: "userID == %@", "logged0") { user.name = "other" }
                try other.save()
            }
            try context.performAndWait { try context.save() }
            let redone = recorder.lines.withLock { $0.filter { $0.message.contains("save redone") } }
            #expect(!redone.isEmpty)
            let tagged = redone.filter { $0.metadata["request"] == "42" }
            #expect(tagged.count == redone.count)
            #expect(context.logger[metadataKey: "request"] == "42")
        }
    }
}
