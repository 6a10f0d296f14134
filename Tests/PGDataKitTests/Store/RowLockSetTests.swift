import Testing

@testable import PGDataKit
import PGDataKitPostgres

@Suite("Row lock sets: ascending keys, each once, in its strongest mode")
struct RowLockSetTests {
    @Test func keysComeOutAscendingOnceWithTheirStrongestMode() {
        var set = RowLockSet()
        #expect(set.isEmpty)
        #expect(set.onlyRow == nil)
        for (key, mode) in [
            (Int64(30), RowLockMode.keyShare), (10, .noKeyUpdate), (20, .keyShare), (10, .keyShare), (30, .update),
            (20, .noKeyUpdate), (-5, .keyShare), (30, .noKeyUpdate),
        ] {
            set.add(key, mode)
        }
        let ordered = set.ordered
        #expect(ordered.keys == [-5, 10, 20, 30])
        #expect(ordered.modes == [RowLockMode.keyShare, .noKeyUpdate, .noKeyUpdate, .update].map(\.rawValue))
        #expect(set.onlyRow == nil)
    }

    @Test func oneRowAddedTwiceIsStillOneRow() {
        var set = RowLockSet()
        set.add(7, .keyShare)
        #expect(set.onlyRow?.key == 7 && set.onlyRow?.mode == .keyShare)
        set.add(7, .noKeyUpdate)
        #expect(set.onlyRow?.key == 7 && set.onlyRow?.mode == .noKeyUpdate)
        #expect(set.ordered.keys == [7])
        set.add(8, .update)
        #expect(set.onlyRow == nil)
        #expect(set.ordered.keys == [7, 8])
    }

    /// A location in transaction 3, block `block`, offset `offset`.
    static func location(_ block: UInt64, _ offset: UInt64, serial: UInt64 = 3) -> RowLocation? {
        RowLocation(packed: serial << 48 | block << 16 | offset)
    }

    @Test func rowsAreLockedByLocationOnlyWhenEveryRowHasOneAndAllTakeOneStrongMode() throws {
        var set = RowLockSet()
        set.add(20, .noKeyUpdate, location: Self.location(4, 2))
        set.add(10, .noKeyUpdate, location: Self.location(9, 1))
        set.add(20, .noKeyUpdate, location: Self.location(4, 2))  // the same row twice
        let located = try #require(set.located)
        #expect(located.rows == 2 && located.mode == .noKeyUpdate)
        #expect(Set(located.locations.map(\.text)) == ["(4,2)", "(9,1)"])
        #expect(set.modesUsed == [.noKeyUpdate])

        var missing = set
        missing.add(30, .noKeyUpdate)
        #expect(missing.located == nil, "a row without a location")
        var mixed = set
        mixed.add(30, .update, location: Self.location(5, 5))
        #expect(mixed.located == nil, "two modes")
        #expect(mixed.modesUsed == [.noKeyUpdate, .update])
        var referenced = RowLockSet()
        referenced.add(30, .keyShare, location: Self.location(5, 5))
        #expect(referenced.located == nil, "rows the save only references are not located")
        var twoVersions = set
        twoVersions.add(10, .noKeyUpdate, location: Self.location(9, 2))
        #expect(twoVersions.located == nil, "two locations of one row")
        var deleted = RowLockSet()
        deleted.add(1, .update, location: Self.location(1, 1))
        #expect(deleted.located?.mode == .update)
    }

    @Test func theLockStatementProbesOnlyForTheModesItUses() throws {
        let entity = try #require(try Model(entities: [LockedNote.self]).entity(for: LockedNote.self))
        let all = StoreCoordinator.lockRowsSQL(entity)
        #expect(all.components(separatedBy: "LEFT JOIN LATERAL").count == 4)
        #expect(all.contains("k.m = 1 AND") && all.contains("FOR KEY SHARE"))
        // The locations of the rows locked to be written come back.
        #expect(all.hasPrefix("SELECT array_agg(COALESCE(l3.r, l2.r)) FILTER (WHERE COALESCE(l3.r, l2.r) IS NOT NULL)"))
        let two = StoreCoordinator.lockRowsSQL(entity, modes: [.noKeyUpdate, .update])
        #expect(two.components(separatedBy: "LEFT JOIN LATERAL").count == 3)
        #expect(two.contains("k.m = 2 AND") && two.contains("k.m = 3 AND") && !two.contains("FOR KEY SHARE"))
        #expect(two.hasPrefix("SELECT array_agg(COALESCE(l3.r, l2.r))"))
        // One mode: one scan of the keys, sorted by key before the locks are taken (the
        // global order); the keys in a subquery, an index scan in every plan.
        let one = StoreCoordinator.lockRowsSQL(entity, modes: [.noKeyUpdate])
        #expect(!one.contains("LATERAL") && !one.contains("$2"))
        #expect(one.contains("u.\"id\" = ANY(ARRAY(SELECT unnest($1::bigint[]))) ORDER BY u.\"id\" FOR NO KEY UPDATE"))
        #expect(one.hasPrefix("SELECT array_agg(l.r) FROM"))
        let referenced = StoreCoordinator.lockRowsSQL(entity, modes: [.keyShare])
        #expect(referenced.hasPrefix("SELECT count(*)") && referenced.contains("ORDER BY u.\"id\" FOR KEY SHARE"))
        let byLocation = StoreCoordinator.lockRowsByLocationSQL(entity, .noKeyUpdate)
        // Sorted by key before the locks are taken: the global order. (The locations in
        // a subquery: a TID scan in every plan, see BatchStatementPlanTests.)
        #expect(byLocation.contains("u.ctid = ANY(ARRAY(SELECT unnest($1::tid[]))) ORDER BY u.\"id\" FOR NO KEY UPDATE"))
    }
}

private final class LockedNote: ManagedObject {
    @Attribute var title: String?
}

@Suite("Row locations")
struct RowLocationTests {
    func parse(_ text: String, serial: UInt16 = 1) -> RowLocation? {
        var text = text
        return text.withUTF8 { RowLocation(tid: $0, serial: serial) }
    }

    @Test func tidsAsPostgreSQLWritesThemParseAndPrintBack() throws {
        for text in ["(0,1)", "(12,34)", "(4294967295,65535)"] {
            let location = try #require(parse(text, serial: 7), "\(text)")
            #expect(location.text == text)
            #expect(location.serial == 7)
        }
        #expect(parse("(12,34)") != parse("(12,35)"))
        #expect(parse("(12,34)", serial: 1) != parse("(12,34)", serial: 2), "the transaction is part of it")
    }

    @Test func anythingElseIsNoLocation() {
        for text in [
            "", "(", "()", "(,)", "(1,)", "(,1)", "1,2", "(1,2", "1,2)", "(1;2)", "(1,2,3)", "(-1,2)", "(1,-2)", "( 1,2)",
            "(4294967296,1)", "(1,65536)", "(99999999999,1)", "(1,2)x", "(a,1)", "(12345678901234567890,1)",
        ] {
            #expect(parse(text) == nil, "\(text)")
        }
        #expect(parse("(1,2)", serial: 0) == nil, "serial 0 marks no location")
        #expect(RowLocation(packed: 0) == nil)
    }

    @Test func theBinaryArrayHoldsEachLocationAsATid() throws {
        let locations = try ["(1,2)", "(300000,17)", "(4294967295,65535)"].map { try #require(parse($0)) }
        let array = RowLocation.binaryArray(locations)
        #expect(try array.postgresText() == "{\"(1,2)\",\"(300000,17)\",\"(4294967295,65535)\"}")
        #expect(type(of: array).postgresType == PostgresType(oid: 1010, arrayOID: 0), "tid[]")
        // Header (20 bytes), then per location its length (6) and six bytes.
        #expect(array.bytes.count == 20 + 3 * 10)
        #expect(try RowLocation.binaryArray([]).postgresText() == "{}")
    }
}
