import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// An entity with an attribute of each array type, optional and not; `labels` has a
/// non-empty default that needs escaping.
final class Shelf: ManagedObject {
    override class var tableName: String { "shelves" }
    @Attribute(unique: true) var code: String = ""
    @Attribute var tags: [String] = []
    @Attribute var counts: [Int] = []
    @Attribute var bigs: [Int64]?
    @Attribute var mids: [Int32]?
    @Attribute var smalls: [Int16] = [1, 2]
    @Attribute var ratios: [Double]?
    @Attribute var floats: [Float]?
    @Attribute var prices: [Decimal]?
    @Attribute var flags: [Bool]?
    @Attribute var dates: [Date]?
    @Attribute var ids: [UUID]?
    @Attribute var labels: [String] = [#"a "quoted" 'word'"#, #"back\slash"#, "", "NULL", "{x,y}"]
}

/// A fresh database holding the shelves' table, made by `Model.schemaSQL()`.
enum ShelfSchema {
    static func withDatabase(_ body: (ConnectionConfiguration, Connection) throws -> Void) throws {
        try TestDatabase.withConnection { connection in
            try connection.executeScript(try Model(entities: [Shelf.self]).schemaSQL())
            try body(connection.configuration, connection)
        }
    }

    static func withManager(_ body: (ContextManager, Connection) throws -> Void) throws {
        try withDatabase { configuration, connection in
            let manager = try ContextManager(configuration: configuration, entities: [Shelf.self])
            defer { manager.close() }
            try body(manager, connection)
        }
    }

    /// Inserts shelves with these codes, each changed by `body`, and saves.
    static func insert(_ codes: [String], in manager: ContextManager, _ body: (Shelf) -> Void = { _ in }) throws {
        let context = manager.newPrivateContext()
        try context.performAndWait {
            for code in codes {
                let shelf = Shelf(context: context)
                shelf.code = code
                body(shelf)
            }
            try context.save()
        }
    }

    /// The shelf with a code, fetched in `context` (on its queue).
    static func shelf(_ code: String, in context: ManagedObjectContext) throws -> Shelf {
        try #require(try Shelf.fetch(in: context, where: "code == %@", code).first)
    }

    /// A date PostgreSQL keeps exactly (whole microseconds).
    static let date = Date(timeIntervalSince1970: 1_700_000_000.123456)

    static let tags = ["plain", "with space", #"quote""#, #"back\slash"#, "comma,brace}{", "", "NULL", "ünïcødé ✓", "'"]
    static let counts = [0, -1, Int.max, Int.min]
    static let bigs: [Int64] = [Int64.max, 42]
    static let mids: [Int32] = [Int32.min, 7]
    static let smalls: [Int16] = [Int16.max, -3]
    static let ratios = [1.5, -0.25, .infinity, -.infinity, 1e-300]
    static let floats: [Float] = [0.5, -2]
    static let prices = [Decimal(string: "12345678901234567890.123456789") ?? 0, Decimal(string: "-0.01") ?? 0]
    static let flags = [true, false, true]
    static let dates = [date, Date(timeIntervalSince1970: 0)]
    static let ids = [UUID(uuidString: "00010203-0405-0607-0809-0A0B0C0D0EFF"), UUID(uuidString: "FFFFFFFF-0405-0607-0809-0A0B0C0D0E00")]
        .compactMap { $0 }

    /// Sets values of every type that need care in an array literal.
    static func fill(_ shelf: Shelf) {
        shelf.tags = tags
        shelf.counts = counts
        shelf.bigs = bigs
        shelf.mids = mids
        shelf.smalls = smalls
        shelf.ratios = ratios
        shelf.floats = floats
        shelf.prices = prices
        shelf.flags = flags
        shelf.dates = dates
        shelf.ids = ids
        shelf.labels = []
    }

    /// Whether a shelf holds what `fill` sets.
    static func isFilled(_ shelf: Shelf) -> Bool {
        shelf.tags == tags && shelf.counts == counts && shelf.bigs == bigs && shelf.mids == mids
            && shelf.smalls == smalls && shelf.ratios == ratios && shelf.floats == floats && shelf.prices == prices
            && shelf.flags == flags && shelf.dates == dates && shelf.ids == ids && shelf.labels == []
    }
}

@Suite("Array attributes: saves, fetches, merges, stored values they cannot hold")
struct ArrayAttributeTests {
    /// Every array type goes in as a PostgreSQL array and comes back equal, through a
    /// multi-row insert, a one-row update and a batch update; rows other SQL inserts take
    /// the generated defaults.
    @Test func everyArrayTypeRoundTripsThroughSaveAndFetch() throws {
        try ShelfSchema.withManager { manager, connection in
            #expect(try manager.coordinator.validateSchema() == [])
            try ShelfSchema.insert(["full", "plain"], in: manager) { shelf in
                if shelf.code == "full" { ShelfSchema.fill(shelf) }
            }
            try connection.execute("INSERT INTO shelves (code) VALUES ('sql')")
            let row = try #require(try connection.query(
                "SELECT tags[3], cardinality(counts), bigs[1], smalls, array_ndims(tags) FROM shelves WHERE code = 'full'").first)
            #expect(try row.decode(String.self, at: 0) == #"quote""#)
            #expect(try row.decode(Int.self, at: 1) == 4)
            #expect(try row.decode(Int64.self, at: 2) == Int64.max)
            #expect(try row.decode([Int16].self, at: 3) == [Int16.max, -3])
            #expect(try row.decode(Int.self, at: 4) == 1)

            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let full = try ShelfSchema.shelf("full", in: context)
                #expect(ShelfSchema.isFilled(full))
                for code in ["plain", "sql"] {
                    let shelf = try ShelfSchema.shelf(code, in: context)
                    #expect(shelf.tags == [] && shelf.counts == [] && shelf.smalls == [1, 2], "\(code)")
                    #expect(shelf.labels == [#"a "quoted" 'word'"#, #"back\slash"#, "", "NULL", "{x,y}"], "\(code)")
                    #expect(shelf.bigs == nil && shelf.ids == nil && shelf.dates == nil, "\(code)")
                }
                #expect(try full.value(forKey: "tags") as? [String] == full.tags)
                // A one-row update, then a batch update of two rows.
                full.tags = ["one"]
                try context.save()
                for shelf in try context.fetchAll(Shelf.self) {
                    shelf.ids = [UUID(uuidString: "00000000-0000-0000-0000-000000000001")!]
                    shelf.prices = []
                    shelf.labels.append(shelf.code)
                }
                try context.save()
            }
            let fresh = manager.newPrivateContext()
            try fresh.performAndWait { () throws in
                for shelf in try fresh.fetchAll(Shelf.self) {
                    #expect(shelf.ids == [UUID(uuidString: "00000000-0000-0000-0000-000000000001")!])
                    #expect(shelf.prices == [] && shelf.labels.last == shelf.code)
                    if shelf.code == "full" { #expect(shelf.tags == ["one"] && shelf.counts == [0, -1, Int.max, Int.min]) }
                }
            }
        }
    }

    /// Changing an array in place sets it again: a change of that attribute, saved; an
    /// equal array is no change.
    @Test func inPlaceChangesAreTrackedAndSaved() throws {
        try ShelfSchema.withManager { manager, connection in
            try ShelfSchema.insert(["s1"], in: manager) { $0.tags = ["a"] }
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let shelf = try ShelfSchema.shelf("s1", in: context)
                shelf.tags = ["a"]
                shelf.counts = []
                #expect(!shelf.hasChanges && !context.hasChanges)

                shelf.tags.append("b")
                #expect(shelf.hasChanges)
                #expect(Set(shelf.changedValues().keys) == ["tags"])
                #expect(shelf.changedValues()["tags"] as? [String] == ["a", "b"])
                shelf.bigs = [1]
                shelf.bigs?.append(2)
                shelf.smalls.removeAll()
                #expect(Set(shelf.changedValues().keys) == ["tags", "bigs", "smalls"])
                try context.save()
            }
            let row = try #require(try connection.query("SELECT tags, bigs, smalls FROM shelves").first)
            #expect(try row.decode([String].self, at: 0) == ["a", "b"])
            #expect(try row.decode([Int64].self, at: 1) == [1, 2])
            #expect(try row.decode([Int16].self, at: 2) == [])
        }
    }

    /// A save in one manager reaches another manager's main context.
    @Test func anotherManagersMainContextMergesTheChange() throws {
        try ShelfSchema.withDatabase { configuration, _ in
            let writerManager = try ContextManager(configuration: configuration, entities: [Shelf.self])
            defer { writerManager.close() }
            let watcherManager = try ContextManager(configuration: configuration, entities: [Shelf.self])
            defer { watcherManager.close() }
            try ShelfSchema.insert(["s1"], in: writerManager)
            let main = watcherManager.mainContext
            let watched = try main.performAndWait { try ShelfSchema.shelf("s1", in: main) }
            main.performAndWait { #expect(watched.tags == [] && watched.dates == nil) }

            let writer = writerManager.newPrivateContext()
            try writer.performAndWait {
                let shelf = try ShelfSchema.shelf("s1", in: writer)
                ShelfSchema.fill(shelf)
                shelf.tags.append("merged")
                try writer.save()
            }
            let start = ContinuousClock.now
            while !main.performAndWait({ watched.tags.last == "merged" }) {
                if start.duration(to: .now) > patience { throw TestFailure("timed out waiting for the merge") }
                usleep(10_000)
            }
            main.performAndWait {
                #expect(watched.dates == [ShelfSchema.date, Date(timeIntervalSince1970: 0)])
                #expect(watched.counts == [0, -1, Int.max, Int.min] && watched.labels == [])
            }
        }
    }

    /// A `NULL` element, a two-dimensional array, and values of another type (the column
    /// altered by other SQL): the fetches that read those rows throw
    /// `invalidStoredValue` naming entity, attribute and row (never the value).
    @Test(arguments: [
        ("tags", nil, "'{secret,NULL}'"), ("counts", nil, "'{{1,2},{3,4}}'"), ("dates", nil, "ARRAY[NULL::timestamptz]"),
        ("smalls", nil, "'{{1},{2}}'"), ("ids", "text[]", "'{secret-not-a-uuid}'"), ("flags", "text[]", "'{secret}'"),
        ("mids", "bigint[]", "'{99999999999}'"),
    ] as [(String, String?, String)])
    func storedValuesTheTypeCannotHoldFailTheFetch(column: String, alteredType: String?, literal: String) throws {
        try ShelfSchema.withManager { manager, connection in
            try ShelfSchema.insert(["good", "bad"], in: manager)
            let key = try #require(try connection.query("SELECT id FROM shelves WHERE code = 'bad'").first).decode(Int64.self, at: 0)
            if let alteredType { try connection.execute("ALTER TABLE shelves ALTER COLUMN \(column) TYPE \(alteredType)") }
            try connection.execute("UPDATE shelves SET \(column) = \(literal) WHERE code = 'bad'")
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                #expect(try Shelf.fetch(in: context, where: "code == 'good'").count == 1)
                do {
                    _ = try context.fetchAll(Shelf.self)
                    Issue.record("the fetch read a value \(column) cannot hold")
                } catch let error as ManagedObjectError {
                    #expect(error.code == .invalidStoredValue, "\(error)")
                    #expect(error.entity == "Shelf" && error.key == column && error.primaryKey == key, "\(error)")
                    #expect(!"\(error)".contains("secret"), "\(error)")
                }
                #expect(!context.registeredObjects.contains { ($0 as? Shelf)?.code == "bad" })
            }
        }
    }

    /// A registered object re-read after other SQL put a `NULL` element in its row keeps
    /// the values it had; a save meeting such a row in a conflict throws.
    @Test func refreshesAndConflictsRefuseArraysTheTypeCannotHold() throws {
        try ShelfSchema.withManager { manager, connection in
            try ShelfSchema.insert(["s1"], in: manager) { $0.tags = ["kept"] }
            let key = try #require(try connection.query("SELECT id FROM shelves").first).decode(Int64.self, at: 0)
            let context = manager.mainContext
            try context.performAndWait { () throws in
                context.mergePolicy = .mergeByPropertyStoreTrump
                let shelf = try ShelfSchema.shelf("s1", in: context)
                try connection.execute("UPDATE shelves SET tags = '{a,NULL}', version = version + 1")
                do {
                    try context.refresh(shelf, mergeChanges: false)
                    Issue.record("the refresh took an array with a NULL element")
                } catch let error as ManagedObjectError {
                    #expect(error.code == .invalidStoredValue && error.key == "tags" && error.primaryKey == key, "\(error)")
                }
                #expect(shelf.tags == ["kept"])

                shelf.counts = [1]
                do {
                    try context.save()
                    Issue.record("the save took an array with a NULL element")
                } catch let error as ManagedObjectError {
                    #expect(error.code == .invalidStoredValue && error.key == "tags" && error.primaryKey == key, "\(error)")
                }
                #expect(shelf.tags == ["kept"] && shelf.counts == [1])
            }
            #expect(try #require(try connection.query("SELECT counts FROM shelves").first).decode([Int].self, at: 0) == [])
        }
    }

    /// The generated DDL types each array column and gives the non-optional ones `NOT
    /// NULL` and their default literal, escaped; a migration adding them is generated.
    @Test func theSchemaIsGeneratedCheckedAndDiffed() throws {
        let model = try Model(entities: [Shelf.self])
        let script = try model.schemaSQL()
        for line in [
            "tags text[] NOT NULL DEFAULT '{}'", "counts bigint[] NOT NULL DEFAULT '{}'", "bigs bigint[]", "mids integer[]",
            #"smalls smallint[] NOT NULL DEFAULT '{"1","2"}'"#, "ratios double precision[]", "floats real[]",
            "prices numeric[]", "flags boolean[]", "dates timestamptz[]", "ids uuid[]",
            #"labels text[] NOT NULL DEFAULT '{"a \"quoted\" ''word''","back\\slash","","NULL","{x,y}"}'"#,
        ] {
            #expect(script.contains("\n    \(line),\n"), "no line \(line) in\n\(script)")
        }
        try TestDatabase.withConnection { connection in
            try connection.executeScript(
                """
                CREATE TABLE shelves (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    code text NOT NULL CONSTRAINT shelves_code_key UNIQUE, counts bigint[] NOT NULL DEFAULT '{}',
                    bigs bigint[], mids integer[], smalls smallint[] NOT NULL DEFAULT '{}', ratios double precision[],
                    floats real[], prices numeric[], flags boolean[], dates timestamptz[], ids uuid[],
                    version bigint NOT NULL DEFAULT 1);
                INSERT INTO shelves (code) VALUES ('old');
                """)
            let diff = try SchemaDiff(model: model, on: connection)
            let sql = diff.changes.map(\.sql)
            let additive = diff.changes.allSatisfy { $0.isAdditive }
            #expect(additive, "\(sql)")
            #expect(sql.contains("ALTER TABLE shelves ADD COLUMN tags text[] NOT NULL DEFAULT '{}';"), "\(sql)")
            #expect(sql.contains { $0.hasPrefix(#"ALTER TABLE shelves ADD COLUMN labels text[] NOT NULL DEFAULT '{"a"#) }, "\(sql)")
            try TestDatabase.withTemporaryDirectory { folder in
                try diff.writeMigration(named: "arrays", into: folder)
                try Migrator(directory: folder).migrate(on: connection)
            }
            #expect(try SchemaDiff(model: model, on: connection).isEmpty)
            let manager = try ContextManager(configuration: connection.configuration, entities: [Shelf.self])
            defer { manager.close() }
            #expect(try manager.coordinator.validateSchema() == [])
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let old = try ShelfSchema.shelf("old", in: context)
                #expect(old.tags == [] && old.labels.count == 5 && old.labels[0] == #"a "quoted" 'word'"#)
            }
        }
    }

    /// The schema check accepts the array column types and reports a wrong element type,
    /// and a scalar column under an array attribute, by name.
    @Test func theSchemaCheckReportsAWrongElementType() throws {
        try ShelfSchema.withDatabase { configuration, connection in
            try connection.execute("ALTER TABLE shelves ALTER COLUMN tags DROP DEFAULT, ALTER COLUMN tags TYPE bigint[] USING '{}'")
            try connection.execute("ALTER TABLE shelves ALTER COLUMN counts DROP DEFAULT, ALTER COLUMN counts TYPE bigint USING 0")
            try connection.execute("ALTER TABLE shelves ALTER COLUMN mids TYPE smallint[]")
            do {
                let coordinator = try StoreCoordinator(model: try Model(entities: [Shelf.self]), configuration: configuration)
                coordinator.close()
                Issue.record("the check took a bigint[] column for [String]")
            } catch let error as SchemaMismatchError {
                #expect(error.mismatches.count == 2, "\(error)")
                #expect(error.mismatches.contains(
                    .wrongType(entity: "Shelf", column: "shelves.tags", expected: "text[]", actual: "_int8")), "\(error)")
                #expect(error.mismatches.contains(
                    .wrongType(entity: "Shelf", column: "shelves.counts", expected: "bigint[]", actual: "int8")), "\(error)")
            }
        }
    }
}
