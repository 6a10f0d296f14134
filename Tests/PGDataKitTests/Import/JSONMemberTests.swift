import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Reading an imported record's members, small objects (searched key by key) and large
/// ones (looked up) alike.
@Suite("Imported records: members by key")
struct JSONMemberTests {
    /// Objects of 0 to 12 members: every member is found by its key, a missing key is
    /// `nil`, a key canonically equivalent to a member's finds it (as a `Dictionary`
    /// does), a `null` member is `.null`, and dotted key paths go through both sizes.
    @Test func membersAreFoundInObjectsOfEverySize() {
        for size in 0...12 {
            var members: [String: JSONValue] = [:]
            for index in 0..<size { members["key\(index)"] = .number(Double(index)) }
            if size > 0 { members["caf\u{E9}"] = .null }
            let record = JSONValue.object(members)
            for index in 0..<size {
                #expect(record["key\(index)"] == .number(Double(index)), "size \(size)")
            }
            #expect(record["key\(size)"] == nil)
            #expect(record[""] == nil)
            if size > 0 {
                #expect(record["cafe\u{301}"] == .null, "size \(size)")  // (decomposed é)
                #expect(record["cafe"] == nil)
            }
            let nested = JSONValue.object(["outer": record, "other": .bool(true)])
            #expect(nested.value(atKeyPath: "outer.key0") == (size > 0 ? .number(0) : nil))
            #expect(nested.value(atKeyPath: "outer.missing") == nil)
        }
        #expect(JSONValue.array([.null])["key"] == nil)
        #expect(JSONValue.string("x")["key"] == nil)
    }

    /// Keys compared word by word (both inline ASCII) and as strings (either not): a
    /// trailing NUL, the 15- and 16-byte boundary of inline strings, keys that differ
    /// only in their last byte, and an ASCII key canonically equivalent to a non-ASCII
    /// member (the Kelvin sign is `K`) find what `Dictionary` finds.
    @Test func keysMatchAsDictionaryKeysDo() {
        let keys = [
            "ab", "ab\u{0}", "K", "\u{212A}", "abcdefghijklmno", "abcdefghijklmnp", "abcdefghijklmnop",
            "abcdefghijklmnoq", "abcdefg", "abcdefh", "", "é", "e\u{301}",
        ]
        for first in keys.indices {
            for second in keys.indices {
                let members: [String: JSONValue] = [keys[first]: .number(1), "other": .number(2)]
                let record = JSONValue.object(members)
                #expect(record[keys[second]] == members[keys[second]], "\(keys[first].debugDescription) / \(keys[second].debugDescription)")
            }
        }
    }
}
