import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// A ticket's state: stored as `text`.
enum TicketStatus: String, AttributeEnum { case draft, published, archived }
/// A ticket's priority: stored as `bigint`.
enum TicketPriority: Int, AttributeEnum { case low = 1, high = 2 }
/// A ticket's size: stored as `smallint`.
enum TicketSize: Int16, AttributeEnum { case small = 1, large = 2 }
/// An address: stored as `jsonb`.
struct TicketAddress: Codable, Equatable, AttributeCodable {
    var city: String
    var zip: String
}

/// An entity with an attribute of each new kind, optional and not.
final class Ticket: ManagedObject {
    override class var tableName: String { "tickets" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var status: TicketStatus = .draft
    @Attribute var priority: TicketPriority?
    @Attribute var size: TicketSize = .small
    @Attribute var address: TicketAddress?
    @Attribute var home: TicketAddress = TicketAddress(city: "", zip: "")
}

/// A fresh database holding the tickets' table, made by `Model.schemaSQL()`.
enum TicketSchema {
    static func withDatabase(_ body: (ConnectionConfiguration, Connection) throws -> Void) throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript(try Model(entities: [Ticket.self]).schemaSQL())
            try body(connection.configuration, connection)
        }
    }

    static func withManager(_ body: (ContextManager, Connection) throws -> Void) throws {
        try withDatabase { configuration, connection in
            let manager = try ContextManager(configuration: configuration, entities: [Ticket.self])
            defer { manager.close() }
            try body(manager, connection)
        }
    }

    /// Inserts tickets with these codes, each changed by `body`, and saves.
    static func insert(_ codes: [String], in manager: ContextManager, _ body: (Ticket) -> Void = { _ in }) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            for code in codes {
                let ticket = Ticket(context: context)
                ticket.code = code
                body(ticket)
            }
            try context.save()
        }
    }

    /// The ticket with a code, fetched in `context` (on its queue).
    static func ticket(_ code: String, in context: ManagedObjectContext) throws -> Ticket {
        try #require(try Ticket.fetch(in: context, where: "code == %@", code).first)
    }
}

@Suite("Enum and Codable attributes: saves, fetches, merges, stored values they cannot hold")
struct EnumAndCodableAttributeTests {
    /// Values go in as raw values and JSON and come back as the Swift values; rows other
    /// SQL inserts take the generated defaults.
    @Test func valuesRoundTripThroughSaveAndFetch() throws {
        try TicketSchema.withManager { manager, connection in
            // The generated schema passes the check: no mismatch, no warning.
            #expect(try manager.coordinator.validateSchema() == [])
            try TicketSchema.insert(["full"], in: manager) { ticket in
                ticket.status = .published
                ticket.priority = .high
                ticket.size = .large
                ticket.address = TicketAddress(city: "Bergen", zip: "5003")
                ticket.home = TicketAddress(city: "Oslo", zip: "0150")
            }
            try TicketSchema.insert(["plain"], in: manager)
            let row = try #require(
                try connection.query(
                    "SELECT status, priority, size, address->>'city', home->>'zip' FROM tickets WHERE code = 'full'"
                ).first)
            #expect(try row.decode(String.self, at: 0) == "published")
            #expect(try row.decode(Int.self, at: 1) == 2)
            #expect(try row.decode(Int16.self, at: 2) == 2)
            #expect(try row.decode(String.self, at: 3) == "Bergen")
            #expect(try row.decode(String.self, at: 4) == "0150")
            try connection.execute("INSERT INTO tickets (code) VALUES ('sql')")

            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let full = try TicketSchema.ticket("full", in: context)
                #expect(full.status == .published && full.priority == .high && full.size == .large)
                #expect(full.address == TicketAddress(city: "Bergen", zip: "5003"))
                #expect(full.home == TicketAddress(city: "Oslo", zip: "0150"))
                for code in ["plain", "sql"] {
                    let ticket = try TicketSchema.ticket(code, in: context)
                    #expect(ticket.status == .draft && ticket.priority == nil && ticket.size == .small, "\(code)")
                    #expect(ticket.address == nil && ticket.home == TicketAddress(city: "", zip: ""), "\(code)")
                }
                // Dynamic access gives the stored forms.
                #expect(try full.value(forKey: "status") as? String == "published")
                #expect(try full.value(forKey: "priority") as? Int == 2)
                #expect(try full.value(forKey: "home") as? JSONValue == ["city": "Oslo", "zip": "0150"])
            }
        }
    }

    /// Setting a value is a change, setting an equal one is not; a struct changed in
    /// place is set again, so it is a change, and the save writes it.
    @Test func changesAreTrackedAndInPlaceMutationsSaved() throws {
        try TicketSchema.withManager { manager, connection in
            try TicketSchema.insert(["t1"], in: manager) { $0.home = TicketAddress(city: "Oslo", zip: "0150") }
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let ticket = try TicketSchema.ticket("t1", in: context)
                ticket.status = .draft
                ticket.home = TicketAddress(city: "Oslo", zip: "0150")
                ticket.priority = nil
                ticket.home.zip = "0150"
                #expect(!ticket.hasChanges && !context.hasChanges)

                ticket.home.city = "Bergen"
                #expect(ticket.hasChanges)
                #expect(Set(ticket.changedValues().keys) == ["home"])
                #expect(ticket.changedValues()["home"] as? JSONValue == ["city": "Bergen", "zip": "0150"])
                ticket.status = .archived
                ticket.priority = .low
                #expect(Set(ticket.changedValues().keys) == ["home", "status", "priority"])
                try context.save()
            }
            let row = try #require(try connection.query("SELECT home->>'city', status, priority FROM tickets").first)
            #expect(try row.decode(String.self, at: 0) == "Bergen")
            #expect(try row.decode(String.self, at: 1) == "archived")
            #expect(try row.decode(Int.self, at: 2) == 1)
            let fresh = manager.newPrivateContext()
            try fresh.performAndWait { () throws in
                let ticket = try TicketSchema.ticket("t1", in: fresh)
                #expect(ticket.home == TicketAddress(city: "Bergen", zip: "0150"))
                #expect(ticket.status == .archived && ticket.priority == .low)
            }
        }
    }

    /// A save in one manager reaches another manager's main context.
    @Test func anotherManagersMainContextMergesTheChange() throws {
        try TicketSchema.withDatabase { configuration, _ in
            let writerManager = try ContextManager(configuration: configuration, entities: [Ticket.self])
            defer { writerManager.close() }
            let watcherManager = try ContextManager(configuration: configuration, entities: [Ticket.self])
            defer { watcherManager.close() }
            try TicketSchema.insert(["t1"], in: writerManager)
            let main = watcherManager.mainContext
            let watched = try main.performAndWait { try TicketSchema.ticket("t1", in: main) }
            main.performAndWait { #expect(watched.status == .draft && watched.address == nil) }

            let writer = writerManager.newPrivateContext()
            try writer.performAndWait {
                let ticket = try TicketSchema.ticket("t1", in: writer)
                ticket.status = .published
                ticket.priority = .high
                ticket.address = TicketAddress(city: "Tromsø", zip: "9008")
                ticket.home.city = "Oslo"
                try writer.save()
            }
            let start = ContinuousClock.now
            while !main.performAndWait({ watched.status == .published }) {
                if start.duration(to: .now) > patience { throw TestFailure("timed out waiting for the merge") }
                usleep(10_000)
            }
            main.performAndWait {
                #expect(watched.priority == .high)
                #expect(watched.address == TicketAddress(city: "Tromsø", zip: "9008"))
                #expect(watched.home == TicketAddress(city: "Oslo", zip: ""))
            }
        }
    }

    /// A raw value no case has and JSON that does not decode, written by plain SQL: the
    /// fetches that read those rows throw `invalidStoredValue` naming entity, attribute
    /// and row (never the value); other rows fetch on, and nothing crashes.
    @Test(arguments: [
        ("status", "'secret-state'"), ("priority", "9"), ("size", "3"), ("address", #"'{"city": "secret-city"}'"#),
        ("home", #"'["secret-list"]'"#), ("home", #"'{"city": 5, "zip": "secret-zip"}'"#),
    ])
    func storedValuesTheTypeCannotHoldFailTheFetch(column: String, literal: String) throws {
        try TicketSchema.withManager { manager, connection in
            try TicketSchema.insert(["good", "bad"], in: manager)
            let key = try #require(try connection.query("SELECT id FROM tickets WHERE code = 'bad'").first).decode(Int64.self, at: 0)
            try connection.execute("UPDATE tickets SET \(column) = \(literal) WHERE code = 'bad'")
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                #expect(try Ticket.fetch(in: context, where: "code == 'good'").count == 1)
                do {
                    _ = try context.fetchAll(Ticket.self)
                    Issue.record("the fetch read a value \(column) cannot hold")
                } catch let error as ManagedObjectError {
                    #expect(error.code == .invalidStoredValue, "\(error)")
                    #expect(error.entity == "Ticket" && error.key == column && error.primaryKey == key, "\(error)")
                    #expect(!"\(error)".contains("secret"), "\(error)")
                }
                #expect(!context.registeredObjects.contains { ($0 as? Ticket)?.code == "bad" })
            }
        }
    }

    /// A registered object re-read after other SQL changed its row to a value the type
    /// cannot hold keeps the values it had; a save meeting such a row in a conflict
    /// throws instead of taking it.
    @Test func refreshesAndConflictsRefuseValuesTheTypeCannotHold() throws {
        try TicketSchema.withManager { manager, connection in
            try TicketSchema.insert(["t1"], in: manager) { $0.status = .published }
            let key = try #require(try connection.query("SELECT id FROM tickets").first).decode(Int64.self, at: 0)
            // (The main context reads each time afresh; a private one within its snapshot.)
            let context = manager.mainContext
            try context.performAndWait { () throws in
                context.mergePolicy = .mergeByPropertyStoreTrump
                let ticket = try TicketSchema.ticket("t1", in: context)
                try connection.execute("UPDATE tickets SET status = 'gone', version = version + 1")
                do {
                    try context.refresh(ticket, mergeChanges: false)
                    Issue.record("the refresh took a value TicketStatus cannot hold")
                } catch let error as ManagedObjectError {
                    #expect(error.code == .invalidStoredValue && error.key == "status" && error.primaryKey == key, "\(error)")
                }
                #expect(ticket.status == .published)

                ticket.size = .large
                do {
                    try context.save()
                    Issue.record("the save took a value TicketStatus cannot hold")
                } catch let error as ManagedObjectError {
                    #expect(error.code == .invalidStoredValue && error.key == "status" && error.primaryKey == key, "\(error)")
                }
                #expect(ticket.status == .published && ticket.size == .large)
            }
            #expect(try #require(try connection.query("SELECT size FROM tickets").first).decode(Int16.self, at: 0) == 1)
        }
    }

    /// A value that does not encode is not kept: the save throws (naming the attribute)
    /// until the property is set again.
    @Test func aValueThatDoesNotEncodeRefusesTheSave() throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript(try Model(entities: [Sticker.self]).schemaSQL())
            let manager = try ContextManager(configuration: connection.configuration, entities: [Sticker.self])
            defer { manager.close() }
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let sticker = Sticker(context: context)
                sticker.label = StickerLabel(text: "kept")
                try context.save()
                sticker.label = StickerLabel(text: "refused", refuses: true)
                #expect(sticker.label == nil)
                do {
                    try context.save()
                    Issue.record("a value that does not encode was saved")
                } catch let error as PostgresValueError {
                    #expect(error.column == "Sticker.label", "\(error)")
                }
                sticker.label = StickerLabel(text: "again")
                try context.save()
            }
            #expect(try connection.query("SELECT label #>> '{}' FROM stickers").first?.decode(String.self, at: 0) == "again")
        }
    }
}

/// A sticker's label, whose encoding fails when it says so.
struct StickerLabel: Codable, Equatable, AttributeCodable {
    struct Refused: Error {}
    var text: String
    var refuses = false

    init(text: String, refuses: Bool = false) {
        self.text = text
        self.refuses = refuses
    }

    init(from decoder: any Decoder) throws {
        text = try decoder.singleValueContainer().decode(String.self)
    }

    func encode(to encoder: any Encoder) throws {
        if refuses { throw Refused() }
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}

/// An entity with a label that may not encode.
final class Sticker: ManagedObject {
    override class var tableName: String { "stickers" }
    @Attribute var label: StickerLabel?
}
