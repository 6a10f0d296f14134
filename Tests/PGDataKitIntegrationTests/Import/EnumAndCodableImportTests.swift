import Foundation
import PGDataKit
import Testing

/// Imports, exports and dynamic access of enum and `Codable` attributes: records carry
/// raw values and JSON, as the columns do.
@Suite("Enum and Codable attributes: import, export, setValue")
struct EnumAndCodableImportTests {
    static let records: [JSONValue] = [
        ["code": "t1", "status": "published", "priority": 2, "size": 2, "home": ["city": "Oslo", "zip": "0150"]],
        ["code": "t2", "status": "draft", "priority": nil, "address": ["city": "Bergen", "zip": "5003"]],
    ]

    /// A mapper imports raw values and JSON, a save stores them, and export writes them
    /// back as they came.
    @Test func aMapperImportsRawValuesAndJSONAndExportsThem() throws {
        try TicketSchema.withManager { manager, _ in
            let mapper = ObjectMapper<Ticket>(uniqueKey: \.code)
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let tickets = try Ticket.importRecords(Self.records, mapper: mapper, in: context)
                #expect(tickets.map(\.status) == [.published, .draft])
                #expect(tickets.map(\.priority) == [.high, nil])
                #expect(tickets.map(\.size) == [.large, .small])
                #expect(tickets[0].home == TicketAddress(city: "Oslo", zip: "0150"))
                #expect(tickets[1].address == TicketAddress(city: "Bergen", zip: "5003"))
                try context.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait { () throws in
                let first = try TicketSchema.ticket("t1", in: reader)
                let exported = try mapper.export(first)
                #expect(exported["status"] == "published")
                #expect(exported["priority"] == 2)
                #expect(exported["size"] == 2)
                #expect(exported["home"] == ["city": "Oslo", "zip": "0150"])
                #expect(exported["address"] == .null)
                // Imported again, the export changes nothing.
                _ = try Ticket.importRecords([exported], mapper: mapper, in: reader)
                #expect(!reader.hasChanges)
            }
        }
    }

    /// An update by `insertOrUpdate` matches on the key and takes raw values through a
    /// map of its own name.
    @Test func insertOrUpdateAndRenamedMapsTakeRawValues() throws {
        try TicketSchema.withManager { manager, _ in
            try TicketSchema.insert(["t1"], in: manager)
            let mapper = ObjectMapper<Ticket>(
                uniqueKey: \.code, maps: [ObjectMap("state", to: \.status), ObjectMap("place", to: \.address)],
                mapsOtherAttributes: false)
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let records: [JSONValue] = [["code": "t1", "state": "archived", "place": ["city": "Bodø", "zip": "8006"]]]
                let updated = try Ticket.importRecords(records, mapper: mapper, in: context)
                #expect(updated.first?.status == .archived)
                #expect(updated.first?.address == TicketAddress(city: "Bodø", zip: "8006"))
                let stubs = try Ticket.insertOrUpdate(
                    [["code": "t1", "priority": 1], ["code": "t2", "priority": 2]], uniqueModelKey: \.code,
                    uniqueRemoteKey: "code", in: context
                ) { record, ticket in
                    try ticket.setValue(record["priority"]?.intValue, forKey: "priority")
                }
                #expect(stubs.map(\.priority) == [.low, .high])
                try context.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait { () throws in
                let first = try TicketSchema.ticket("t1", in: reader)
                #expect(first.status == .archived && first.priority == .low)
            }
        }
    }

    /// A raw value no case has, or JSON that does not decode, is a typed import error
    /// naming the record and the attribute; nothing of the import stays.
    @Test(arguments: [
        (["code": "t9", "status": "secret"] as JSONValue, "status", "TicketStatus (the raw value of one of its cases)"),
        (["code": "t9", "priority": 7] as JSONValue, "priority", "TicketPriority? (the raw value of one of its cases)"),
        (["code": "t9", "home": ["city": "secret"]] as JSONValue, "home", "TicketAddress (JSON that decodes into it)"),
        (["code": "t9", "status": 1] as JSONValue, "status", "TicketStatus (the raw value of one of its cases)"),
    ])
    func valuesTheTypeCannotHoldAreImportErrors(record: JSONValue, attribute: String, expected: String) throws {
        try TicketSchema.withManager { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                do {
                    _ = try Ticket.importRecords([["code": "t0"], record], mapper: ObjectMapper(uniqueKey: \.code), in: context)
                    Issue.record("the import took a value \(attribute) cannot hold")
                } catch let error as ImportError {
                    #expect(error.code == .typeMismatch, "\(error)")
                    #expect(error.recordIndex == 1 && error.entity == "Ticket" && error.attribute == attribute, "\(error)")
                    #expect(error.expected == expected, "\(error)")
                    #expect(!"\(error)".contains("secret"), "\(error)")
                }
                #expect(!context.hasChanges)
            }
        }
    }

    /// `setValue(_:forKey:)` takes the type itself and its stored forms; `value(forKey:)`
    /// gives the stored form.
    @Test func setValueTakesTheTypeAndItsStoredForms() throws {
        try TicketSchema.withManager { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let ticket = Ticket(context: context)
                try ticket.setValue(TicketStatus.published, forKey: "status")
                #expect(ticket.status == .published)
                try ticket.setValue("archived", forKey: "status")
                #expect(ticket.status == .archived)
                try ticket.setValue(2, forKey: "priority")
                #expect(ticket.priority == .high)
                try ticket.setValue(Optional(TicketPriority.low), forKey: "priority")
                #expect(ticket.priority == .low)
                try ticket.setValue(nil, forKey: "priority")
                #expect(ticket.priority == nil)
                try ticket.setValue(TicketSize.large, forKey: "size")
                #expect(ticket.size == .large)
                try ticket.setValue(TicketAddress(city: "Oslo", zip: "0150"), forKey: "home")
                #expect(ticket.home == TicketAddress(city: "Oslo", zip: "0150"))
                try ticket.setValue(["city": "Bergen", "zip": "5003"] as JSONValue, forKey: "address")
                #expect(ticket.address == TicketAddress(city: "Bergen", zip: "5003"))
                try ticket.setValue(["city": "Bodø", "zip": "8006"] as [String: Any], forKey: "address")
                #expect(ticket.address == TicketAddress(city: "Bodø", zip: "8006"))
                #expect(try ticket.value(forKey: "status") as? String == "archived")
                #expect(try ticket.value(forKey: "address") as? JSONValue == ["city": "Bodø", "zip": "8006"])

                for (value, key, expected) in [
                    ("bogus", "status", "TicketStatus"), (5, "priority", "TicketPriority?"), (nil, "status", "TicketStatus"),
                    (["city": "x"] as JSONValue, "home", "TicketAddress"), (nil, "home", "TicketAddress"),
                    (TicketStatus.draft, "priority", "TicketPriority?"),
                ] as [(Any?, String, String)] {
                    #expect {
                        try ticket.setValue(value, forKey: key)
                    } throws: { error in
                        guard let error = error as? ManagedObjectError, error.code == .typeMismatch else { return false }
                        return error.entity == "Ticket" && error.key == key && error.expected == expected
                    }
                }
                #expect(ticket.status == .archived && ticket.priority == nil && ticket.home.city == "Oslo")
            }
        }
    }
}
