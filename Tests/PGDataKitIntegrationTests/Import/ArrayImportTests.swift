import Foundation
import PGDataKit
import Testing

/// Imports, exports and dynamic access of array attributes: records carry JSON arrays,
/// each element converted as an attribute of the element type would be.
@Suite("Array attributes: import, export, setValue")
struct ArrayImportTests {
    static let records: [JSONValue] = [
        [
            "code": "s1", "tags": ["a", "b \"c\""], "counts": [1, -2], "bigs": [9_007_199_254_740_992], "mids": [7],
            "smalls": [-3], "ratios": [0.5], "floats": [1.25], "prices": [12.5], "flags": [true, false],
            "dates": ["2023-11-14T22:13:20Z"], "ids": ["00010203-0405-0607-0809-0a0b0c0d0eff"], "labels": [],
        ],
        ["code": "s2", "tags": [], "bigs": nil],
    ]

    /// A mapper imports JSON arrays, a save stores them, and export writes them back as
    /// they came.
    @Test func aMapperImportsJSONArraysAndExportsThem() throws {
        try ShelfSchema.withManager { manager, _ in
            let mapper = ObjectMapper<Shelf>(uniqueKey: \.code)
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let shelves = try Shelf.importRecords(Self.records, mapper: mapper, in: context)
                let first = try #require(shelves.first)
                #expect(first.tags == ["a", "b \"c\""] && first.counts == [1, -2] && first.bigs == [9_007_199_254_740_992])
                #expect(first.mids == [7] && first.smalls == [-3] && first.ratios == [0.5] && first.floats == [1.25])
                #expect(first.prices == [Decimal(string: "12.5") ?? 0] && first.flags == [true, false])
                #expect(first.dates == [Date(timeIntervalSince1970: 1_700_000_000)])
                #expect(first.ids == [UUID(uuidString: "00010203-0405-0607-0809-0a0b0c0d0eff")].compactMap { $0 })
                #expect(first.labels == [])
                #expect(shelves[1].tags == [] && shelves[1].bigs == nil && shelves[1].smalls == [1, 2])
                try context.save()
            }
            let reader = manager.newPrivateContext()
            try reader.performAndWait { () throws in
                let first = try ShelfSchema.shelf("s1", in: reader)
                let exported = try mapper.export(first)
                guard case .object(let members) = Self.records[0] else { throw TestFailure("not an object") }
                for (key, value) in members {
                    #expect(exported[key] == value, "\(key)")
                }
                #expect(try mapper.export(ShelfSchema.shelf("s2", in: reader))["bigs"] == .null)
                // Imported again, the export changes nothing.
                _ = try Shelf.importRecords([exported], mapper: mapper, in: reader)
                #expect(!reader.hasChanges)
            }
        }
    }

    /// An element that does not convert is a typed import error naming the record, the
    /// attribute and the element's index; nothing of the import stays.
    @Test(arguments: [
        (["code": "s9", "tags": ["a", 5]] as JSONValue, "tags", "[String] (an array)", "element [1] is a number"),
        (["code": "s9", "tags": "secret"] as JSONValue, "tags", "[String] (an array)", "a string"),
        (["code": "s9", "tags": ["a", nil]] as JSONValue, "tags", "[String] (an array)", "element [1] is null"),
        (["code": "s9", "smalls": [1, 40000]] as JSONValue, "smalls", "[Int16] (an array)", "element [1] is out of range"),
        (["code": "s9", "counts": [1.5]] as JSONValue, "counts", "[Int] (an array)",
         "element [0] is a number that is not a whole number or too large"),
        (["code": "s9", "ids": ["secret"]] as JSONValue, "ids", "[UUID]? (an array of UUID strings)", "element [0] is a string"),
        (["code": "s9", "dates": ["x", "secret"]] as JSONValue, "dates", "[Date]? (an array of ISO 8601 strings)",
         "element [0] is a string in another format"),
        (["code": "s9", "flags": [[true]]] as JSONValue, "flags", "[Bool]? (an array)", "element [0] is an array"),
        (["code": "s9", "tags": nil] as JSONValue, "tags", "[String] (an array)", "null"),
    ])
    func elementsThatDoNotConvertAreImportErrors(record: JSONValue, attribute: String, expected: String, actual: String) throws {
        try ShelfSchema.withManager { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                do {
                    _ = try Shelf.importRecords([["code": "s0"], record], mapper: ObjectMapper(uniqueKey: \.code), in: context)
                    Issue.record("the import took a value \(attribute) cannot hold")
                } catch let error as ImportError {
                    #expect(error.code == .typeMismatch, "\(error)")
                    #expect(error.recordIndex == 1 && error.entity == "Shelf" && error.attribute == attribute, "\(error)")
                    #expect(error.expected == expected && error.actual == actual, "\(error)")
                    #expect(!"\(error)".contains("secret"), "\(error)")
                }
                #expect(!context.hasChanges)
            }
        }
    }

    /// `insertOrUpdate` updates arrays of existing rows by key (the `ON CONFLICT` path).
    @Test func insertOrUpdateWritesArrays() throws {
        try ShelfSchema.withManager { manager, connection in
            try ShelfSchema.insert(["s1"], in: manager) { $0.tags = ["old"] }
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let records: [JSONValue] = [["code": "s1", "tags": ["new", "newer"]], ["code": "s2", "tags": ["fresh"]]]
                _ = try Shelf.importRecords(records, mapper: ObjectMapper(uniqueKey: \.code), in: context)
                try context.save()
            }
            let rows = try connection.query("SELECT code, tags FROM shelves ORDER BY code")
                .map { (try $0.decode(String.self, at: 0), try $0.decode([String].self, at: 1)) }
            #expect(rows.map(\.0) == ["s1", "s2"] && rows.map(\.1) == [["new", "newer"], ["fresh"]])
        }
    }

    /// `setValue(_:forKey:)` takes arrays of the element type, and of other integer
    /// widths when every element fits; `value(forKey:)` gives the array.
    @Test func setValueTakesArrays() throws {
        try ShelfSchema.withManager { manager, _ in
            let context = manager.newPrivateContext()
            try context.performAndWait { () throws in
                let shelf = Shelf(context: context)
                try shelf.setValue(["a", "b"], forKey: "tags")
                #expect(shelf.tags == ["a", "b"])
                try shelf.setValue(["c"] as [Any], forKey: "tags")
                #expect(shelf.tags == ["c"])
                try shelf.setValue([Int64(1), Int64(2)], forKey: "counts")
                #expect(shelf.counts == [1, 2])
                try shelf.setValue([1, 2] as [Int], forKey: "smalls")
                #expect(shelf.smalls == [1, 2])
                try shelf.setValue(nil, forKey: "bigs")
                #expect(shelf.bigs == nil)
                try shelf.setValue([3] as [Int], forKey: "bigs")
                #expect(shelf.bigs == [3])
                #expect(try shelf.value(forKey: "tags") as? [String] == ["c"])

                for (value, key, expected) in [
                    ("a", "tags", "[String]"), ([1], "tags", "[String]"), (nil, "tags", "[String]"),
                    ([40000], "smalls", "[Int16]"), (["a"], "counts", "[Int]"), ([1.5], "counts", "[Int]"),
                ] as [(Any?, String, String)] {
                    #expect {
                        try shelf.setValue(value, forKey: key)
                    } throws: { error in
                        guard let error = error as? ManagedObjectError, error.code == .typeMismatch else { return false }
                        return error.entity == "Shelf" && error.key == key && error.expected == expected
                    }
                }
                #expect(shelf.tags == ["c"] && shelf.smalls == [1, 2] && shelf.counts == [1, 2])
            }
        }
    }
}
