import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Predicates over enum attributes compare raw values, in SQL and in memory alike;
/// `Codable` attributes compare with `nil` only.
@Suite("Predicates over enum and Codable attributes")
struct EnumPredicateTests {
    /// The tickets: code, status, priority, size, address city.
    static let rows: [(String, TicketStatus, TicketPriority?, TicketSize, String?)] = [
        ("t1", .published, .high, .large, "Oslo"), ("t2", .draft, .low, .small, nil),
        ("t3", .archived, nil, .small, "Bergen"), ("t4", .draft, .high, .large, nil),
    ]

    static func insert(prefix: String, into context: ManagedObjectContext) {
        for (code, status, priority, size, city) in rows {
            let ticket = Ticket(context: context)
            ticket.code = prefix + code
            ticket.status = status
            ticket.priority = priority
            ticket.size = size
            ticket.address = city.map { TicketAddress(city: $0, zip: "0000") }
        }
    }

    /// Checks that `predicate` selects the tickets `expected` in SQL over saved rows, in
    /// memory over the same objects, and in one fetch over saved rows and unsaved copies.
    static func check(
        _ predicate: FetchPredicate, _ expected: [String], in manager: ContextManager,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try PredicateAgreement.check(
            predicate, expected, of: Ticket.self, code: \.code, in: manager, insert: { insert(prefix: $0, into: $1) },
            sourceLocation: sourceLocation)
    }

    static func withTickets(_ body: (ContextManager) throws -> Void) throws {
        try TicketSchema.withManager { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait {
                insert(prefix: "s:", into: context)
                try context.save()
            }
            try body(manager)
        }
    }

    @Test func formatStringsCompareRawValues() throws {
        try Self.withTickets { manager in
            let cases: [(String, [Any?], [String])] = [
                ("status == %@", [TicketStatus.published], ["t1"]),
                ("status != %@", [TicketStatus.draft], ["t1", "t3"]),
                ("status == 'draft'", [], ["t2", "t4"]),
                ("status IN %@", [[TicketStatus.draft, TicketStatus.published]], ["t1", "t2", "t4"]),
                ("status IN %@", [Set([TicketStatus.archived])], ["t3"]),
                ("status BEGINSWITH 'pub'", [], ["t1"]),
                ("priority == %@", [TicketPriority.high], ["t1", "t4"]),
                ("priority > %@", [TicketPriority.low], ["t1", "t4"]),
                ("priority == nil", [], ["t3"]),
                ("priority == %@", [TicketPriority?.none as Any], ["t3"]),
                ("priority IN %@", [[TicketPriority.low]], ["t2"]),
                ("priority == 1", [], ["t2"]),
                ("size == %@", [TicketSize.large], ["t1", "t4"]),
                ("status == %@ AND priority == %@", [TicketStatus.draft, TicketPriority.high], ["t4"]),
                ("address == nil", [], ["t2", "t4"]),
                ("home != nil AND address != nil", [], ["t1", "t3"]),
            ]
            for (format, arguments, expected) in cases {
                try Self.check(try FetchPredicate(format: format, argumentArray: arguments), expected, in: manager)
            }
            // The one-liners pass their arguments the same way.
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                #expect(try Ticket.count(in: context, where: "status == %@", TicketStatus.draft) == 2)
            }
        }
    }

    @Test func foundationPredicatesCompareRawValues() throws {
        try Self.withTickets { manager in
            let published = TicketStatus.published
            let high = TicketPriority.high
            let small = TicketSize.small
            try Self.check(try FetchPredicate(#Predicate<Ticket> { $0.status == published }), ["t1"], in: manager)
            try Self.check(try FetchPredicate(#Predicate<Ticket> { $0.status != published }), ["t2", "t3", "t4"], in: manager)
            try Self.check(try FetchPredicate(#Predicate<Ticket> { $0.priority == high }), ["t1", "t4"], in: manager)
            try Self.check(try FetchPredicate(#Predicate<Ticket> { $0.priority == nil }), ["t3"], in: manager)
            try Self.check(
                try FetchPredicate(#Predicate<Ticket> { $0.status == published || $0.size == small }),
                ["t1", "t2", "t3"], in: manager)
        }
    }

    /// A `Codable` value is no predicate argument: its JSON is not compared.
    @Test func codableArgumentsAreRefused() throws {
        #expect {
            _ = try FetchPredicate(format: "home == %@", TicketAddress(city: "Oslo", zip: "0150"))
        } throws: { error in
            guard let error = error as? FetchPredicateError else { return false }
            return error.code == .invalidArgument && error.message.contains("AttributeCodable")
        }
    }
}
