import Foundation
import PGDataKit
import Synchronization
import Testing

/// An entity keyed by a UUID: its keys come back from an upsert in PostgreSQL's spelling
/// (lower case), not in the text they were sent as.
private final class Device: ManagedObject {
    override class var tableName: String { "devices" }
    @Attribute(unique: true) var token: UUID = UUID()
    @Attribute var label: String?
}

/// Keyed inserts whose unique key is not text or an integer: the upsert's rows are matched
/// back to their objects by the key read and written again.
@Suite("Imports keyed by a UUID")
struct UUIDKeyImportTests {
    private func withManager(_ body: (ContextManager) throws -> Void) throws {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let connection = try Connection(configuration)
            try connection.executeScript(try Model(entities: [Device.self]).schemaSQL())
            connection.close()
            let manager = try ContextManager(configuration: configuration, entities: [Device.self])
            defer { manager.close() }
            try body(manager)
        }
    }

    private static func set(_ record: JSONValue, _ device: Device) {
        device.label = record["label"]?.stringValue
    }

    @Test func newKeysAreClaimedAndEachObjectTakesItsOwnRow() throws {
        try withManager { manager in
            let tokens = (0..<40).map { _ in UUID() }
            // Upper case, as Foundation writes them; the server answers in lower case.
            let records: [JSONValue] = tokens.enumerated().map { index, token in
                ["token": .string(token.uuidString), "label": .string("device \(index)")]
            }
            let context = manager.newPrivateContext()
            let saved = Mutex<ContextChanges?>(nil)
            let token = context.observeDidSave { changes in saved.withLock { $0 = changes } }
            defer { token.cancel() }
            let devices = try context.performAndWait {
                let devices = try Device.insertOrUpdate(
                    records, uniqueModelKey: \.token, uniqueRemoteKey: "token", in: context, batchSize: 40, Self.set)
                try context.save()
                return devices
            }
            // Each row was matched to its object as inserted (a row not matched would be
            // looked up again and reported as existing, not inserted).
            let changes = try #require(saved.withLock { $0 })
            #expect(changes.inserted.count == 40)
            #expect(changes.updated.isEmpty)
            #expect(try ExampleSchema.count("SELECT count(*) FROM devices", in: manager) == 40)
            for (index, device) in devices.enumerated() {
                let (key, token) = context.performAndWait { (device.objectID.primaryKey, device.token) }
                #expect(token == tokens[index])
                let stored = try #require(key)
                #expect(
                    try ExampleSchema.count(
                        "SELECT count(*) FROM devices WHERE id = \(stored) AND token = '\(tokens[index].uuidString.lowercased())' "
                            + "AND label = 'device \(index)'", in: manager) == 1)
            }
        }
    }

    @Test func aKeyInsertedMeanwhileIsMergedIntoItsRow() throws {
        try withManager { manager in
            let shared = UUID()
            let fresh = UUID()
            let first = manager.newPrivateContext()
            let second = manager.newPrivateContext()
            let firstDevices = try first.performAndWait {
                try Device.insertOrUpdate(
                    [["token": .string(shared.uuidString), "label": "first"], ["token": .string(fresh.uuidString), "label": "fresh"]],
                    uniqueModelKey: \.token, uniqueRemoteKey: "token", in: first, Self.set)
            }
            try second.performAndWait {
                _ = try Device.insertOrUpdate(
                    [["token": .string(shared.uuidString), "label": "second"]], uniqueModelKey: \.token, uniqueRemoteKey: "token",
                    in: second, Self.set)
                try second.save()
            }
            try first.performAndWait { try first.save() }
            #expect(try ExampleSchema.count("SELECT count(*) FROM devices", in: manager) == 2)
            let secondKey = try ExampleSchema.count(
                "SELECT id FROM devices WHERE token = '\(shared.uuidString.lowercased())'", in: manager)
            first.performAndWait {
                #expect(firstDevices[0].objectID.primaryKey == Int64(secondKey))
                #expect(firstDevices[0].label == "first")
                #expect(firstDevices[1].objectID.primaryKey != nil)
                #expect(!first.hasChanges)
            }
            #expect(
                try ExampleSchema.count(
                    "SELECT count(*) FROM devices WHERE token = '\(shared.uuidString.lowercased())' AND label = 'first' AND version = 2",
                    in: manager) == 1)
        }
    }
}
