import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// An attribute of every type, old and new, optional and not (the test helper declares it
/// again as `HelperSpecimen`, for the process that merges it).
final class Specimen: ManagedObject {
    override class var tableName: String { "specimens" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var text: String = ""
    @Attribute var optionalText: String?
    @Attribute var int: Int = 0
    @Attribute var int64: Int64 = 0
    @Attribute var int32: Int32 = 0
    @Attribute var int16: Int16 = 0
    @Attribute var double: Double = 0
    @Attribute var float: Float = 0
    @Attribute var decimal: Decimal = 0
    @Attribute var flag: Bool = false
    @Attribute var date: Date = Date(timeIntervalSince1970: 0)
    @Attribute var uuid: UUID?
    @Attribute var data: Data = Data()
    @Attribute var json: JSONValue = .null
    @Attribute var status: TicketStatus = .draft
    @Attribute var priority: TicketPriority?
    @Attribute var size: TicketSize = .small
    @Attribute var address: TicketAddress?
    @Attribute var home: TicketAddress = TicketAddress(city: "", zip: "")
    @Attribute var tags: [String] = []
    @Attribute var scores: [Int]?
    @Attribute var levels: [Int16] = []
    @Attribute var ratios: [Double] = []
    @Attribute var amounts: [Decimal]?
    @Attribute var flags: [Bool] = []
    @Attribute var moments: [Date] = []
    @Attribute var keys: [UUID]?

    /// Every attribute set to a value other than its default.
    func fill() {
        text = "tekst ü"
        optionalText = "valgfri"
        int = -9_007_199_254_740_991
        int64 = 9_007_199_254_740_991
        int32 = -2_147_483_648
        int16 = 32_767
        double = 0.1
        float = 1.5
        decimal = Decimal(string: "12345.678") ?? 0
        flag = true
        date = Date(timeIntervalSince1970: 1_700_000_000.25)
        uuid = UUID(uuidString: "123E4567-E89B-12D3-A456-426614174000")
        data = Data([0, 1, 254, 255])
        json = .object(["a": .array([.number(1), .string("b"), .null]), "c": .bool(true)])
        status = .published
        priority = .high
        size = .large
        address = TicketAddress(city: "Bergen", zip: "5003")
        home = TicketAddress(city: "Oslo", zip: "0150")
        tags = ["a", "b,c", "\"q\"", "NULL", ""]
        scores = [-1, 0, 9_007_199_254_740_991]
        levels = [-32_768, 32_767]
        ratios = [0.5, -2.25]
        amounts = [Decimal(string: "1.25") ?? 0, 7]
        flags = [true, false]
        moments = [Date(timeIntervalSince1970: 1_700_000_000.5)]
        keys = [UUID(uuidString: "00000000-0000-0000-0000-000000000001") ?? UUID()]
    }

    /// The values, for comparing two specimens (the code aside).
    var values: [String] {
        [
            text, "\(optionalText as Any)", "\(int)", "\(int64)", "\(int32)", "\(int16)", "\(double)", "\(float)",
            "\(decimal)", "\(flag)", "\(date.timeIntervalSince1970)", "\(uuid as Any)", data.base64EncodedString(),
            json.jsonText, status.rawValue, "\(priority as Any)", "\(size)", "\(address as Any)", "\(home)",
            "\(tags)", "\(scores as Any)", "\(levels)", "\(ratios)", "\(amounts as Any)", "\(flags)",
            "\(moments.map(\.timeIntervalSince1970))", "\(keys as Any)",
        ]
    }
}

/// The target: a model of every attribute type, every relationship kind and every
/// delete rule goes generated DDL → migration file → `Migrator` → a schema check with no
/// mismatch and no warning; objects of every type round-trip through save, fetch, a merge
/// in another process, export and import.
@Suite("Every type and relationship: generated, migrated, checked, round-tripped", .heavy)
struct EveryTypeTargetTests {
    static let entities: [ManagedObject.Type] = [
        Specimen.self, User.self, Post.self, Team.self, Member.self, Vault.self, Item.self, GenNode.self, GenLabel.self,
        GenChicken.self, GenEgg.self, Story.self, Topic.self, Editor.self, Person.self, Passport.self,
    ]

    @Test func everyTypeRoundTripsAcrossProcessesThroughExportAndImport() throws {
        try TestDatabase.withFreshDatabase { configuration in
            let connection = try Connection(configuration)
            defer { connection.close() }
            try TestDatabase.withTemporaryDirectory { folder in
                // Generated DDL, written as the first migration file and applied by the migrator.
                let model = try Model(entities: Self.entities)
                let diff = try SchemaDiff(model: model, on: connection)
                let additive = diff.changes.allSatisfy { $0.isAdditive }
                #expect(additive)
                let file = try #require(try diff.writeMigration(named: "every type", into: folder))
                #expect(file.lastPathComponent == "0001_every_type.sql")
                try Migrator(directory: folder).migrate(on: connection)
                let left = try SchemaDiff(model: model, on: connection).changes
                #expect(left.isEmpty, "\(left.map(\.description))")
            }
            let manager = try ContextManager(configuration: configuration, entities: Self.entities)
            defer { manager.close() }
            let warnings = try manager.coordinator.validateSchema()
            #expect(warnings == [])

            // Saved with defaults, then held by another process's main context.
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                Specimen(context: context).code = "s1"
                try context.save()
            }
            let watcher = try HelperProcess.start("specimen-watch", configuration)
            defer { watcher.stop() }
            try watcher.waitUntil("the watcher holds s1") { $0.contains { $0.hasPrefix("specimens [{") } }

            // Every attribute changed in this process: the other one merges the change.
            let (saved, exported) = try context.performAndWait { () throws -> ([String], String) in
                let specimen = try #require(try Specimen.fetch(in: context, where: "code == 's1'").first)
                specimen.fill()
                try context.save()
                let records = try ObjectMapper<Specimen>(uniqueKey: \.code).export([specimen])
                return (specimen.values, JSONValue.array(records).jsonText)
            }
            try watcher.waitUntil("the watcher merges every value") { $0.contains("specimens " + exported) }

            // A fresh fetch reads the same values back.
            let reader = manager.newPrivateContext()
            try reader.performAndWait { () throws in
                let fetched = try #require(try Specimen.fetch(in: reader, where: "code == 's1'").first)
                #expect(fetched.values == saved)
            }

            // The other process's export, imported under a new key, holds the same values.
            let line = try #require(watcher.lines.last { $0.hasPrefix("specimens " + exported) })
            var records = try JSONDecoder().decode([JSONValue].self, from: Data(line.dropFirst("specimens ".count).utf8))
            #expect(records.count == 1)
            if case .object(var members) = records[0] {
                members["code"] = .string("s2")
                records[0] = .object(members)
            }
            let importer = manager.newPrivateContext()
            try importer.performAndWait { () throws in
                let imported = try Specimen.importRecords(records, mapper: ObjectMapper<Specimen>(uniqueKey: \.code), in: importer)
                #expect(imported.map(\.code) == ["s2"])
                try importer.save()
            }
            // (A new context: `reader`'s transaction reads its own snapshot.)
            let checker = manager.newPrivateContext()
            try checker.performAndWait { () throws in
                let copy = try #require(try Specimen.fetch(in: checker, where: "code == 's2'").first)
                #expect(copy.values == saved)
            }
        }
    }
}
