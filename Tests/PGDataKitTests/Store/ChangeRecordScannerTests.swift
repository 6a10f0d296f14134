import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("Reading change records and payloads without JSONDecoder")
struct ChangeRecordScannerTests {
    /// The record as `jsonb` prints it (keys by length, then bytes; a space after `:` and
    /// `,`), with escapes, unknown keys and a key order of its own, reads as written.
    @Test func theScannerReadsTheRecordHoweverItIsSpelled() throws {
        let normalised = """
            [{"entity": "Post", "deleted": [9], "updated": [], "inserted": []}, \
            {"entity": "User", "deleted": [], "updated": [{"ids": [3, -2], "keys": ["age", "name"]}], \
            "inserted": [1, 9223372036854775807, -9223372036854775808]}]
            """
        let changes = try ChangeLog.decode(normalised)
        let aged = ObjectID(entityName: "User", primaryKey: 3)
        #expect(changes.deleted == [ObjectID(entityName: "Post", primaryKey: 9)])
        #expect(changes.inserted == Set([1, Int64.max, Int64.min].map { ObjectID(entityName: "User", primaryKey: $0) }))
        #expect(changes.updated == [aged, ObjectID(entityName: "User", primaryKey: -2)])
        #expect(changes.changedKeys[aged] == ["age", "name"])

        let escaped = #"[ {"later": {"a": [1, {"b": null}], "c": "x\"y"}, "entity" : "Caf\u00e9\n\ud83d\ude00\"", "#
            + #""updated":[{"keys":["a\/b","\\"],"ids":[4],"extra":true}],"inserted":[],"deleted":[]} ]"#
        let read = try ChangeLog.decode(escaped)
        let id = ObjectID(entityName: "Café\n😀\"", primaryKey: 4)
        #expect(read.updated == [id])
        #expect(read.changedKeys[id] == ["a/b", "\\"])
        #expect(try ChangeLog.decode("[]").isEmpty)
        #expect(try ChangeLog.decode(" [ ] ").isEmpty)
    }

    /// What the scanner reads is what `JSONDecoder` reads from the same text, for random
    /// records of several entities, key sets and extreme keys.
    @Test func theScannerAgreesWithJSONDecoder() throws {
        struct Entry: Decodable {
            struct Update: Decodable {
                var keys: [String]
                var ids: [Int64]
            }
            var entity: String
            var inserted: [Int64]
            var updated: [Update]
            var deleted: [Int64]
        }
        var generator = SystemRandomNumberGenerator()
        let names = ["User", "Post", "Zoë", "a\"b", "tab\there", "日本"]
        let keySets: [Set<String>] = [["age"], ["name", "age"], ["quote\"d", "back\\slash"], []]
        for _ in 0..<300 {
            var changes = ContextChanges()
            for _ in 0..<Int.random(in: 0...40, using: &generator) {
                let name = names.randomElement(using: &generator) ?? "User"
                let key = [Int64.min, Int64.max, 0, -1].randomElement(using: &generator).flatMap {
                    Bool.random(using: &generator) ? $0 : nil
                } ?? Int64.random(in: -1_000...1_000, using: &generator)
                let id = ObjectID(entityName: name, primaryKey: key)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: changes.inserted.insert(id)
                case 1: changes.deleted.insert(id)
                default:
                    changes.updated.insert(id)
                    changes.changedKeys[id] = keySets.randomElement(using: &generator)
                }
            }
            let text = try ChangeLog.encode(changes)
            var expected = ContextChanges()
            for entry in try JSONDecoder().decode([Entry].self, from: Data(text.utf8)) {
                for key in entry.inserted { expected.inserted.insert(ObjectID(entityName: entry.entity, primaryKey: key)) }
                for key in entry.deleted { expected.deleted.insert(ObjectID(entityName: entry.entity, primaryKey: key)) }
                for group in entry.updated {
                    for key in group.ids {
                        let id = ObjectID(entityName: entry.entity, primaryKey: key)
                        expected.updated.insert(id)
                        expected.changedKeys[id] = Set(group.keys)
                    }
                }
            }
            let read = try ChangeLog.decode(text)
            #expect(read == expected)
            #expect(read == changes)
        }
    }

    /// Each member name of a record is told apart from its bytes (packed words), and so
    /// is the same name written with escapes; any other name is `.other`.
    @Test func memberNamesAreToldApartByTheirBytes() {
        let names: [(String, RecordKey)] = [
            ("entity", .entity), ("inserted", .inserted), ("updated", .updated), ("deleted", .deleted),
            ("entities", .entities), ("keys", .keys), ("ids", .ids),
        ]
        for (name, key) in names {
            #expect(RecordKey(name: name) == key, "\(name)")
            #expect(RecordKey(name: String(name.dropLast())) == .other, "\(name)")
            #expect(RecordKey(name: name + "s") == .other, "\(name)")
            #expect(RecordKey(name: name.uppercased()) == .other, "\(name)")
        }
        #expect(RecordKey(name: "") == .other)
        #expect(RecordKey(name: "identity") == .other)
        #expect(RecordKey(name: "inserted\u{0}") == .other)
        // Escaped in the text: read as the same name.
        let record = #"[{"entit\u0079":"User","inserted":[],"\u0075pdated":[{"k\u0065ys":["age"],"ids":[5]}],"deleted":[]}]"#
        let id = ObjectID(entityName: "User", primaryKey: 5)
        #expect((try? ChangeLog.decode(record))?.changedKeys[id] == ["age"])
    }

    /// A one-object save's record (written without the entries a larger save builds) reads
    /// exactly as the general writer spells it: entity, the three lists in order, keys
    /// sorted, names escaped.
    @Test func oneObjectRecordsAreSpelledAsLargerOnes() throws {
        let user = ObjectID(entityName: "User", primaryKey: 7)
        var updated = ContextChanges()
        updated.updated = [user]
        updated.changedKeys = [user: ["name", "age"]]
        #expect(try ChangeLog.encode(updated)
            == #"[{"entity":"User","inserted":[],"updated":[{"keys":["age","name"],"ids":[7]}],"deleted":[]}]"#)
        var inserted = ContextChanges()
        inserted.inserted = [ObjectID(entityName: "User", primaryKey: ChangeLog.keyPlaceholder)]
        #expect(try ChangeLog.encode(inserted)
            == #"[{"entity":"User","inserted":[-9223372036854775808],"updated":[],"deleted":[]}]"#)
        var deleted = ContextChanges()
        deleted.deleted = [ObjectID(entityName: "a\"b\tc", primaryKey: 3)]
        #expect(try ChangeLog.encode(deleted) == #"[{"entity":"a\"b\tc","inserted":[],"updated":[],"deleted":[3]}]"#)
        // The same objects in one save: each entry as the one-object records spell it.
        var all = updated
        all.inserted = [ObjectID(entityName: "Post", primaryKey: 1)]
        #expect(try ChangeLog.encode(all)
            == #"[{"entity":"Post","inserted":[1],"updated":[],"deleted":[]},"#
            + #"{"entity":"User","inserted":[],"updated":[{"keys":["age","name"],"ids":[7]}],"deleted":[]}]"#)
        #expect(try ChangeLog.decode(ChangeLog.encode(deleted)) == deleted)
    }

    /// Every malformed record is a typed error, never a crash: truncations and byte
    /// changes of a real record, overflowing keys, deep nesting in an unknown key.
    @Test func malformedRecordsAreTypedErrors() throws {
        var changes = ContextChanges()
        let renamed = ObjectID(entityName: "User", primaryKey: 12)
        changes.updated = [renamed]
        changes.changedKeys = [renamed: ["name"]]
        changes.inserted = [ObjectID(entityName: "Post", primaryKey: 3)]
        changes.deleted = [ObjectID(entityName: "Post", primaryKey: 4)]
        let text = try ChangeLog.encode(changes)
        let bytes = Array(text.utf8)
        for length in 0..<bytes.count {
            let cut = String(decoding: bytes[..<length], as: UTF8.self)
            #expect(throws: ChangeLog.RecordSyntaxError.self, "\(cut)") { try ChangeLog.decode(cut) }
        }
        var generator = SystemRandomNumberGenerator()
        let noise: [UInt8] = Array("[]{}\",:0-9 \\u\\ae".utf8) + [0, 0xFF, 0x0A]
        for _ in 0..<3_000 {
            var mutated = bytes
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<mutated.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: mutated[at] = noise.randomElement(using: &generator) ?? 0
                case 1: mutated.remove(at: at)
                default: mutated.insert(noise.randomElement(using: &generator) ?? 0, at: at)
                }
            }
            // Either it reads (a harmless change) or it throws the typed error.
            do {
                _ = try ChangeLog.decode(String(decoding: mutated, as: UTF8.self))
            } catch is ChangeLog.RecordSyntaxError {
            } catch {
                Issue.record("untyped error \(error)")
            }
        }
        let refused = [
            #"{"not": "a record"}"#, #"[{"inserted": [1]}]"#, #"[{"entity": "U", "inserted": [9223372036854775808]}]"#,
            #"[{"entity": "U", "inserted": [-9223372036854775809]}]"#,
            #"[{"entity": "U", "inserted": [1.5]}]"#, #"[{"entity": "U", "inserted": ["1"]}]"#,
            #"[{"entity": "U\ud800"}]"#, #"[{"entity": "U\x"}]"#, #"[{"entity": "U"}] x"#, "[{\"entity\": \"a\u{01}\"}]",
            #"[{"entity": "U", "deep": "# + String(repeating: "[", count: 100_000) + "}]",
            #"[{"entity": "U", "inserted": [1,]}]"#, #"[{"entity": "U",}]"#, "[", "",
        ]
        for bad in refused {
            #expect(throws: ChangeLog.RecordSyntaxError.self, "\(bad.prefix(60))") { try ChangeLog.decode(bad) }
        }
        let nested = #"[{"entity": "U", "deep": "# + String(repeating: "[", count: 60) + String(repeating: "]", count: 60) + "}]"
        #expect(try ChangeLog.decode(nested).isEmpty)
    }

    /// Payload headers with fields out of range or malformed are unreadable (the log is
    /// then read), never a crash or a wrong record.
    @Test func malformedPayloadHeadersAreUnreadable() throws {
        let origin = UUID()
        let good = "r1 1 2 \(origin.uuidString) 3 4 5 []"
        guard case .record(let record, let transaction) = ChangeLog.payload(of: good) else {
            Issue.record("not read: \(good)")
            return
        }
        #expect(record.origin == origin && transaction == 2 && record.originProcessID == 3 && record.originBackendPID == 4)
        // The decoder reads the versions' letters byte by byte: they are these.
        #expect(ChangeLog.payloadVersion == "r2" && ChangeLog.payloadVersionWithoutSnapshot == "r1")
        guard case .reference(42) = ChangeLog.payload(of: "42") else {
            Issue.record("a bare id was not read as one")
            return
        }
        let bad = [
            "r1 1 -2 \(origin) 3 4 5 []", "r1 1 2 \(origin) 2147483648 4 5 []", "r1 1 2 \(origin) 3 4 99999999999999999999 []",
            "r1 1 2 \(origin.uuidString.dropLast())g 3 4 5 []", "r1 1 2 \(origin.uuidString.replacingOccurrences(of: "-", with: "x")) 3 4 5 []",
            "r1  1 2 \(origin) 3 4 5 []", "r1 1 2 \(origin) 3 4 5", "r1 1 2 \(origin) 3 4 5 [] []", "r1 - 2 \(origin) 3 4 5 []",
            "r3 1 2 \(origin) 3 4 5 []", "R1 1 2 \(origin) 3 4 5 []", "r 1 2 \(origin) 3 4 5 []", "r12 1 2 \(origin) 3 4 5 []",
            "1r 1 2 \(origin) 3 4 5 []", "r1 1 2 \(origin)0 3 4 5 []", "r1 1 2 \(origin.uuidString.dropLast()) 3 4 5 []",
        ]
        for text in bad {
            guard case .unreadable = ChangeLog.payload(of: text) else {
                Issue.record("read: \(text)")
                continue
            }
        }
    }

    /// A payload's origin reads back as written, in either case, and a wrong character at
    /// any of its 36 places makes the payload unreadable.
    @Test func payloadOriginsReadBackExactly() {
        for _ in 0..<200 {
            let origin = UUID()
            for text in [origin.uuidString, origin.uuidString.lowercased()] {
                guard case .record(let record, _) = ChangeLog.payload(of: "r1 1 2 \(text) 3 4 5 []") else {
                    Issue.record("not read: \(text)")
                    continue
                }
                #expect(record.origin == origin)
            }
        }
        let origin = Array(UUID().uuidString.utf8)
        for place in origin.indices {
            for wrong in ["g", "-", " ", "/", ":", "@", "G", "`"].map({ UInt8(ascii: Unicode.Scalar($0)!) }) where wrong != origin[place] {
                var text = origin
                text[place] = wrong
                let payload = "r1 1 2 \(String(decoding: text, as: UTF8.self)) 3 4 5 []"
                guard case .unreadable = ChangeLog.payload(of: payload) else {
                    Issue.record("read: \(payload)")
                    continue
                }
            }
        }
    }
}
