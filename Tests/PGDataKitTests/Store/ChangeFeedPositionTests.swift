import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("Notification payloads and the listener's position, without a server")
struct ChangeFeedPositionTests {
    @Test func aSnapshotCoversWhatCommittedBeforeItAndWhatWasDelivered() {
        var position = ChangeFeedPosition(snapshot: "100:110:102,105")
        #expect(position.covers(99))
        #expect(position.covers(101))
        #expect(!position.covers(102))  // in progress when the snapshot was taken
        #expect(position.covers(104))
        #expect(!position.covers(105))
        #expect(!position.covers(110))  // not yet started then
        #expect(!position.covers(500))
        position.noteDelivered(105)
        position.noteDelivered(500)
        #expect(position.covers(105) && position.covers(500))
        #expect(position.deliveredLiteral == "{105,500}" || position.deliveredLiteral == "{500,105}")
        #expect(ChangeFeedPosition(snapshot: "7:7:").covers(6))
        #expect(!ChangeFeedPosition(snapshot: "7:7:").covers(7))
    }

    /// The literals a read sends: every delivered and own transaction once, in any
    /// order, ids past `Int64.max` too; an empty set is `{}`.
    @Test func theDeliveredLiteralsHoldEachTransactionOnce() throws {
        var position = ChangeFeedPosition(snapshot: "100:110:102,105")
        #expect(position.deliveredLiteral == "{}" && position.ownLiteral == "{}")
        let delivered: [UInt64] = [105, 500, 7_000_000_000, UInt64(Int64.max) + 2]
        for id in delivered { position.noteDelivered(id) }
        for id: UInt64 in [500, 900, UInt64.max] { position.noteOwn(id) }
        func ids(_ literal: String) throws -> [UInt64] {
            #expect(literal.hasPrefix("{") && literal.hasSuffix("}"))
            return try literal.dropFirst().dropLast().split(separator: ",").map { try #require(UInt64($0)) }
        }
        #expect(try ids(position.deliveredLiteral).sorted() == (delivered + [900, UInt64.max]).sorted())
        #expect(try ids(position.ownLiteral).sorted() == [500, 900, UInt64.max])
    }

    @Test func textThatIsNoSnapshotCoversOnlyWhatWasDelivered() {
        for text in ["", "x", "1:2", "5:3:", "1:9:a", "1:9:2,,3x"] {
            var position = ChangeFeedPosition(snapshot: text)
            #expect(!position.covers(0) && !position.covers(1) && !position.covers(UInt64.max), "\(text)")
            position.noteDelivered(42)
            #expect(position.covers(42))
            #expect(position.snapshot == text)
        }
    }

    /// A follower of the host's relay moves to the hosting process's read positions
    /// only when they are as far as its own: every transaction it counts as committed
    /// counts there too. Delivered transactions the new snapshot covers leave the set.
    @Test func aPositionIsAdoptedOnlyWhenItIsAsFarAsTheOwn() {
        var position = ChangeFeedPosition(snapshot: "100:110:102,105")
        position.noteDelivered(105)
        position.noteDelivered(112)
        var moved = position.adopt("100:109:102,105")
        #expect(!moved, "an earlier xmax: 109 may be committed here")
        moved = position.adopt("100:120:101,102,105")
        #expect(!moved, "101 is committed here, in progress there")
        moved = position.adopt("not a snapshot")
        #expect(!moved)
        #expect(position.snapshot == "100:110:102,105" && position.delivered == [105, 112])
        moved = position.adopt("102:120:102,115")
        #expect(moved)
        #expect(position.snapshot == "102:120:102,115")
        #expect(position.delivered == [], "105 and 112 are committed in the adopted snapshot")
        #expect(position.covers(105) && position.covers(119) && !position.covers(102) && !position.covers(115))
        position.noteDelivered(115)
        position.noteDelivered(130)
        moved = position.adopt("102:125:102")
        #expect(moved && position.delivered == [130])
        moved = position.adopt("102:125:102")
        #expect(moved, "the same snapshot again")
        var invalid = ChangeFeedPosition(snapshot: "x")
        invalid.noteDelivered(7)
        moved = invalid.adopt("5:9:")
        #expect(moved && invalid.covers(8) && invalid.delivered == [])
    }

    /// The hosting process's reads run from its own position: a follower adopts a read's
    /// end only when it counts as committed every transaction the read's start does, so
    /// the read (and the records it passed on) covered everything between the follower's
    /// position and the new one. A follower that registered with the relay before the
    /// hosting process took its first position must not adopt: a record committed in
    /// between, whose process died before its notification, reached neither it nor that
    /// process's reads (the follower then reads the log itself).
    @Test func aHostPositionIsAdoptedOnlyWhenTheHostsReadStartedWithinTheOwn() {
        var follower = ChangeFeedPosition(snapshot: "100:110:102,105")
        var moved: Bool
        follower.noteDelivered(105)
        // The host's read started at a snapshot where 102 had committed: the follower
        // never got 102's record.
        let ahead = ChangeFeedPosition.relayedPosition(of: "100:130:", readFrom: "100:110:")
        moved = follower.adopt(relayed: ahead)
        #expect(!moved)
        #expect(follower.snapshot == "100:110:102,105")
        // 102 delivered since: the host's start is covered.
        follower.noteDelivered(102)
        moved = follower.adopt(relayed: ahead)
        #expect(moved)
        #expect(follower.snapshot == "100:130:" && follower.delivered == [])
        // The next read starts where the last ended: adopted; a check that found nothing
        // passes the same position on again: nothing moves.
        moved = follower.adopt(relayed: ChangeFeedPosition.relayedPosition(of: "130:140:135", readFrom: "100:130:"))
        #expect(moved)
        moved = follower.adopt(relayed: ChangeFeedPosition.relayedPosition(of: "130:140:135", readFrom: "130:140:135"))
        #expect(moved)
        #expect(follower.snapshot == "130:140:135")
        // A start past the follower's xmax counts transactions committed there that the
        // follower only has if it delivered them.
        follower.noteDelivered(141)
        let further = ChangeFeedPosition.relayedPosition(of: "130:150:135", readFrom: "130:143:135")
        moved = follower.adopt(relayed: further)
        #expect(!moved)
        follower.noteDelivered(140)
        follower.noteDelivered(142)
        moved = follower.adopt(relayed: further)
        #expect(moved)
        // What is no position, or has no start, is refused.
        for message in ["130:160:135", "", "x y", "130:160: x"] {
            moved = follower.adopt(relayed: message)
            #expect(!moved, "\(message)")
        }
        #expect(follower.snapshot == "130:150:135")
    }

    @Test func aPayloadCarriesTheRecordOrItsID() throws {
        var changes = ContextChanges()
        let renamed = ObjectID(entityName: "User", primaryKey: 7)
        changes.updated = [renamed]
        changes.changedKeys = [renamed: ["name"]]
        changes.inserted = [ObjectID(entityName: "Post", primaryKey: 3)]
        let origin = UUID()
        let text = "r1 42 987654 \(origin.uuidString.lowercased()) 1234 5678 1700000000123456 " + (try ChangeLog.encode(changes))
        guard case .record(let record, let transaction) = ChangeLog.payload(of: text) else {
            Issue.record("not read as a record: \(text)")
            return
        }
        #expect(transaction == 987_654)
        #expect(record.id == 42 && record.origin == origin && record.originProcessID == 1234 && record.originBackendPID == 5678)
        #expect(abs(record.time.timeIntervalSince1970 - 1_700_000_000.123456) < 1e-6)
        #expect(record.changes == changes)
        // Left unread (a listener none of whose observers wants records): the header
        // alone, the same, and the changes are not even checked.
        for unread in [text, String(text.dropLast(3))] {
            guard case .record(let header, let sameTransaction) = ChangeLog.payload(of: unread, readsChanges: false) else {
                Issue.record("not read as a record without its changes: \(unread)")
                continue
            }
            #expect(sameTransaction == 987_654 && header.id == 42 && header.origin == origin)
            #expect(header.originProcessID == 1234 && header.originBackendPID == 5678 && header.changes.isEmpty)
        }
        guard case .unreadable = ChangeLog.payload(of: String(text.dropLast(3))) else {
            Issue.record("a cut record read whole")
            return
        }
        // The origin in either case; a character that is no hex digit makes it unreadable.
        let upper = text.replacingOccurrences(of: origin.uuidString.lowercased(), with: origin.uuidString)
        guard case .record(let sameOrigin, _) = ChangeLog.payload(of: upper) else {
            Issue.record("an uppercase origin not read: \(upper)")
            return
        }
        #expect(sameOrigin.origin == origin)
        for (index, bad) in ["g", "G", ":", "@", "`", "/", "é"].enumerated() {
            var digits = Array(origin.uuidString.lowercased())
            digits[[0, 9, 14, 19, 35, 7, 24][index]] = Character(bad)
            let spoiled = text.replacingOccurrences(of: origin.uuidString.lowercased(), with: String(digits))
            guard case .unreadable = ChangeLog.payload(of: spoiled) else {
                Issue.record("read with \(bad) in its origin: \(spoiled)")
                continue
            }
        }
        guard case .reference(let id) = ChangeLog.payload(of: "42") else {
            Issue.record("an id is a reference")
            return
        }
        #expect(id == 42)
        for bad in ["", "r1", "r2 1 2 \(origin) 1 2 3 []", "r1 1 2 not-a-uuid 1 2 3 []", "r1 1 2 \(origin) 1 2 3 {", "r1 x 2 \(origin) 1 2 3 []"] {
            guard case .unreadable = ChangeLog.payload(of: bad) else {
                Issue.record("read: \(bad)")
                continue
            }
        }
    }

    /// A payload's numbers read exactly at their types' limits (short ones without a check
    /// per digit, long ones with), and a number its field cannot hold, or one spelled with
    /// anything but digits and a leading minus, makes the payload unreadable.
    @Test func aPayloadsNumbersAreReadToTheirLimits() {
        let origin = UUID().uuidString.lowercased()
        func read(_ id: String, _ transaction: String, _ process: String, _ micros: String) -> ChangeLog.Payload {
            ChangeLog.payload(of: "r1 \(id) \(transaction) \(origin) \(process) 5678 \(micros) []")
        }
        let fits: [(String, String, String, String, Int64, UInt64, Int32)] = [
            ("0", "1", "-0", "0", 0, 1, 0),
            ("999999999999999999", "999999999999999999", "2147483647", "-999999999999999999",
             999_999_999_999_999_999, 999_999_999_999_999_999, Int32.max),
            ("-9223372036854775808", "18446744073709551615", "-2147483648", "9223372036854775807",
             Int64.min, UInt64.max, Int32.min),
            ("-999999999999999999", "1000000000000000000", "007", "1", -999_999_999_999_999_999, 1_000_000_000_000_000_000, 7),
        ]
        for (id, transaction, process, micros, expectedID, expectedTransaction, expectedProcess) in fits {
            guard case .record(let record, let readTransaction) = read(id, transaction, process, micros) else {
                Issue.record("not read: \(id) \(transaction) \(process) \(micros)")
                continue
            }
            #expect(record.id == expectedID && readTransaction == expectedTransaction)
            #expect(record.originProcessID == expectedProcess)
        }
        let refused: [(String, String, String, String)] = [
            ("9223372036854775808", "1", "1", "1"), ("1", "-1", "1", "1"), ("1", "18446744073709551616", "1", "1"),
            ("1", "1", "2147483648", "1"), ("1", "1", "-2147483649", "1"), ("+1", "1", "1", "1"), ("1", "1", "1a", "1"),
            ("1", "1", "1", "--1"), ("-", "1", "1", "1"), ("1", "1", "99999999999999999999", "1"),
        ]
        for (id, transaction, process, micros) in refused {
            guard case .unreadable = read(id, transaction, process, micros) else {
                Issue.record("read: \(id) \(transaction) \(process) \(micros)")
                continue
            }
        }
    }

    /// A payload of this version (`r1`) and an earlier writer's `r2`, whose snapshot (or
    /// `-`) is skipped, are both read whole.
    @Test func payloadsOfThisAndEarlierWritersAreRead() throws {
        let origin = UUID().uuidString
        let record = try ChangeLog.encode(ContextChanges())
        let cases = [
            "r2 1 2 100:110:102,105 \(origin) 3 4 5 " + record,
            "r2 1 2 - \(origin) 3 4 5 " + record,
            "r1 1 2 \(origin) 3 4 5 " + record,
        ]
        for text in cases {
            guard case .record(let read, let transaction) = ChangeLog.payload(of: text) else {
                Issue.record("not read: \(text)")
                continue
            }
            #expect(transaction == 2 && read.originProcessID == 3 && read.originBackendPID == 4, "\(text)")
        }
        guard case .unreadable = ChangeLog.payload(of: "r2 1 2 \(origin) 3 4 5 " + record) else {
            Issue.record("an r2 payload without its snapshot word was read")
            return
        }
    }

    /// A payload of this process's own saves is read only as far as its origin: the
    /// transaction comes back, its changes are not scanned (a listener delivers none of
    /// its own). Another origin's payload is read whole as before.
    @Test func ownPayloadsAreReadOnlyAsFarAsTheirOrigin() throws {
        let own = UUID()
        let other = UUID()
        var changes = ContextChanges()
        changes.inserted = Set((1...1_000).map { ObjectID(entityName: "User", primaryKey: $0) })
        let record = try ChangeLog.encode(changes)
        for text in ["r2 7 99 100:110:102 \(own) 3 4 5 " + record, "r2 7 99 100:110:102 \(own) 3 4 5 {not scanned"] {
            guard case .own(let transaction) = ChangeLog.payload(of: text, ownOrigin: own) else {
                Issue.record("an own payload was not recognised: \(text.prefix(60))")
                continue
            }
            #expect(transaction == 99)
        }
        guard case .own(99) = ChangeLog.payload(of: "r1 7 99 \(own) 3 4 5 " + record, ownOrigin: own) else {
            Issue.record("an own r1 payload was not recognised")
            return
        }
        guard case .own(99) = ChangeLog.payload(of: "r1 7 99 \(own.uuidString.lowercased()) 3 4 5 []", ownOrigin: own) else {
            Issue.record("an own payload in lower case was not recognised")
            return
        }
        // An origin one byte away from this process's own, at either end of either half
        // of its bytes, is another process's.
        for index in [0, 7, 8, 15] {
            var bytes = own.uuid
            withUnsafeMutableBytes(of: &bytes) { $0[index] ^= 1 }
            let near = UUID(uuid: bytes)
            guard case .record(let read, 99) = ChangeLog.payload(of: "r1 7 99 \(near) 3 4 5 []", ownOrigin: own) else {
                Issue.record("an origin differing in byte \(index) was taken for this process's own")
                continue
            }
            #expect(read.origin == near)
        }
        guard case .record(let read, 99) = ChangeLog.payload(of: "r2 7 99 - \(other) 3 4 5 " + record, ownOrigin: own) else {
            Issue.record("another origin's payload was not read whole")
            return
        }
        #expect(read.origin == other && read.changes == changes)
        guard case .unreadable = ChangeLog.payload(of: "r2 7 99 - \(other) 3 4 5 {", ownOrigin: own) else {
            Issue.record("another origin's malformed payload was read")
            return
        }
    }
}
