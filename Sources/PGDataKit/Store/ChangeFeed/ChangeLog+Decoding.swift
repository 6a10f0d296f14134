import Foundation

/// Reading a record's JSON and a notification's payload without `JSONDecoder`.
///
/// Every process reads every other process's save (from its notification's payload, or
/// from the log), so this runs N − 1 times per save across N processes: `JSONDecoder`
/// (generic containers, metadata lookups, a tree before the values) and
/// `UUID(uuidString:)` (`sscanf`) were most of a listener's CPU. The record has one fixed
/// shape, so it is scanned byte by byte in one pass: any whitespace and key order (the
/// log returns `jsonb`'s normalised text, a payload the text the saver wrote), unknown
/// keys skipped, anything else a typed error. The shape has a fixed depth; an unknown
/// key's value is skipped with a bounded counter, never by recursion.
extension ChangeLog {
    /// Why a record's text could not be read.
    struct RecordSyntaxError: Error, CustomStringConvertible {
        let offset: Int
        let expected: String
        var description: String { "malformed change record at byte \(offset): expected \(expected)" }
    }

    /// The changes of a record's JSON text (`encode(_:)`'s, or the same as `jsonb`
    /// prints it).
    ///
    /// - Throws: `RecordSyntaxError`.
    static func decode(_ text: String) throws -> ContextChanges {
        var text = text
        return try text.withUTF8 { bytes in
            var scanner = RecordScanner(bytes: bytes)
            let changes = try scanner.record()
            scanner.skipSpace()
            guard scanner.position == bytes.count else { throw scanner.error("the end of the record") }
            return changes
        }
    }

    /// Reads a payload: `r2 <id> <xid8> <snapshot or -> <origin> <pid> <backend pid>
    /// <µs since 1970> <changes>`, an earlier writer's `r1` (the same without the
    /// snapshot), or a bare id.
    ///
    /// A payload whose origin is `ownOrigin` is read only that far (`.own`): a listener
    /// delivers none of its process's own records, and scanning the changes of every
    /// save it made cost about 1,000 instructions per object saved.
    ///
    /// With `readsChanges` false, a record's changes are left unread (empty): for a
    /// listener whose observers want no records (`ChangeListener.add(_:wants:)`).
    package static func payload(of text: String, ownOrigin: UUID? = nil, readsChanges: Bool = true) -> Payload {
        // (A record's payload starts with its version, `r…`; only a bare id is a number.)
        if text.utf8.first != PayloadFields.versionLetter, let id = Int64(text) { return .reference(id) }
        var text = text
        let own = ownOrigin?.memoryWords
        return text.withUTF8 { bytes -> Payload in
            var fields = PayloadFields(bytes: bytes)
            guard let carriesSnapshot = fields.version(), let id = fields.integer(Int64.self),
                let transaction = fields.integer(UInt64.self)
            else { return .unreadable }
            // An earlier writer's snapshot (or `-`): skipped, see `Payload.record`.
            if carriesSnapshot, fields.word() == nil { return .unreadable }
            // (The origin as two words: compared with this process's own without making a
            // `UUID`, and made one only for another process's record.)
            guard let words = fields.uuidWords() else { return .unreadable }
            if let own, own == words { return .own(transaction: transaction) }
            let origin = UUID(memoryWords: words)
            guard let processID = fields.integer(Int32.self), let backendPID = fields.integer(Int32.self),
                let micros = fields.integer(Int64.self)
            else { return .unreadable }
            var changes = ContextChanges()
            if readsChanges {
                var scanner = RecordScanner(bytes: bytes, position: fields.position)
                guard let read = try? scanner.record() else { return .unreadable }
                scanner.skipSpace()
                guard scanner.position == bytes.count else { return .unreadable }
                changes = read
            }
            let record = ChangeRecord(
                id: id, origin: origin, originProcessID: processID, originBackendPID: backendPID,
                time: Date(timeIntervalSince1970: Double(micros) / 1_000_000), changes: changes,
                transactionID: transaction)
            return .record(record, transaction: transaction)
        }
    }
}

/// The value of decimal digits (the sign already read) as `T`; `nil` for anything that
/// is not a digit, no digits, or a value `T` cannot hold.
private func decimal<T: FixedWidthInteger>(_ digits: some Collection<UInt8>, negative: Bool) -> T? {
    guard !digits.isEmpty, digits.count <= 20, !negative || T.isSigned else { return nil }
    if digits.count <= 18 {
        // (Below 10^18: summed in a UInt64 with no overflow check per digit, then fitted
        // to `T` once. Ids, transactions and times all are; checking each digit cost
        // about half of reading a payload's header.)
        var magnitude: UInt64 = 0
        for byte in digits {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            magnitude = magnitude &* 10 &+ UInt64(digit)
        }
        return negative ? T(exactly: -Int64(magnitude)) : T(exactly: magnitude)
    }
    var value: T = 0
    for byte in digits {
        guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
        let digit = T(byte - UInt8(ascii: "0"))
        let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
        let (sum, overflow2) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
        guard !overflow1, !overflow2 else { return nil }
        value = sum
    }
    return value
}

/// The value of a hex digit, either case.
private func hexDigit(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// The space-separated header fields of a payload, read in order.
private struct PayloadFields {
    // Unsafe: the payload's `withUTF8` buffer: `payload(of:ownOrigin:)` makes and drops the
    // fields inside that closure; every read checks `position < bytes.count` first.
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0

    // Unsafe: the word is a slice of `bytes` (`start..<position`, within `bytes.count`), read
    // by the caller inside the same `withUTF8` closure.
    /// The next word (up to a space or the end), consuming the space after it.
    mutating func word() -> Slice<UnsafeBufferPointer<UInt8>>? {
        let start = position
        while position < bytes.count, bytes[position] != UInt8(ascii: " ") { position += 1 }
        guard position > start, position < bytes.count else { return nil }
        defer { position += 1 }
        return bytes[start..<position]
    }

    /// The first letter of a payload's version (`ChangeLog.payloadVersion`, `r2`, and
    /// `payloadVersionWithoutSnapshot`, `r1`; `ChangeRecordScannerTests` holds them to it).
    static let versionLetter = UInt8(ascii: "r")

    /// The next word as a payload's version: whether it is `r2` (an earlier writer's,
    /// carrying a snapshot) rather than `r1`; `nil` for anything else. (Compared byte by
    /// byte: `elementsEqual` over the version strings' UTF-8 cost about 300 instructions.)
    mutating func version() -> Bool? {
        guard let word = word(), word.count == 2, word[word.startIndex] == Self.versionLetter else { return nil }
        switch word[word.startIndex + 1] {
        case UInt8(ascii: "2"): return true
        case UInt8(ascii: "1"): return false
        default: return nil
        }
    }

    /// The next word as a decimal integer of type `T` (overflow is `nil`).
    mutating func integer<T: FixedWidthInteger>(_: T.Type) -> T? {
        // One pass: the digits are summed while the space after them is looked for (a
        // word, then its digits, read each byte twice).
        var index = position
        let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let digits = index
        var magnitude: UInt64 = 0
        while index < bytes.count, index - digits < 18 {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { break }
            magnitude = magnitude &* 10 &+ UInt64(digit)
            index += 1
        }
        // Longer (up to 20 digits, then at most `UInt64.max`): read again, checked.
        while index < bytes.count, bytes[index] &- UInt8(ascii: "0") < 10 { index += 1 }
        guard index > digits, index < bytes.count, bytes[index] == UInt8(ascii: " ") else { return nil }
        position = index + 1
        if index - digits > 18 { return decimal(bytes[digits..<index], negative: negative) }
        guard !negative || T.isSigned else { return nil }
        return negative ? T(exactly: -Int64(magnitude)) : T(exactly: magnitude)
    }

    /// The next word as a UUID in its 36-character form (`8-4-4-4-12` hex digits, either
    /// case): its 16 bytes as two words in memory order (`UUID.memoryWords`).
    mutating func uuidWords() -> (UInt64, UInt64)? {
        // (Its length is known: the space after it is looked at, not searched for.)
        let start = position
        guard bytes.count - start > 36, bytes[start + 36] == UInt8(ascii: " ") else { return nil }
        position = start + 37
        // Unsafe: the word's 36 bytes (`start` + 36 is within `bytes`, checked above); every
        // load below reads 4 or 8 of them at an offset that keeps it inside (at most 28 + 8).
        let text = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[start..<start + 36])
        let dash = UInt8(ascii: "-")
        guard text[8] == dash, text[13] == dash, text[18] == dash, text[23] == dash else { return nil }
        // Eight digits at a time, the first the most significant: the groups of eight and
        // twelve at their places, two groups of four side by side.
        func eight(at offset: Int) -> UInt64? {
            hexValue(of: UInt64(littleEndian: text.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
        }
        func four(at offset: Int) -> UInt64 {
            UInt64(UInt32(littleEndian: text.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        }
        guard let a = eight(at: 0), let bc = hexValue(of: four(at: 9) | four(at: 14) << 32),
            let de = hexValue(of: four(at: 19) | four(at: 24) << 32), let f = eight(at: 28)
        else { return nil }
        // The text's first byte is the most significant of each half: in memory order, it
        // comes first.
        return ((a << 32 | bc).bigEndian, (de << 32 | f).bigEndian)
    }
}

/// The value of eight hex digits, either case, packed in `chunk` with the first in its
/// lowest byte (a little-endian load of the text), the first digit the most significant;
/// `nil` when a byte is not a hex digit. All eight at once (SWAR): a digit at a time cost
/// about 20 instructions, and every process reads an origin per notification.
private func hexValue(of chunk: UInt64) -> UInt64? {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let high: UInt64 = 0x8080_8080_8080_8080
    // ASCII only; then no per-byte sum below carries into the next byte.
    guard chunk & high == 0 else { return nil }
    // A byte's top bit after adding `0x80 - low` says it is at least `low`, after adding
    // `0x7f - top` that it is above `top`.
    // (Swift's `&` binds as tightly as `&*`: every product below is in parentheses.)
    let isDigit = (chunk &+ (ones &* (0x80 - 0x30))) & ~(chunk &+ (ones &* (0x7f - 0x39)))
    // `| 0x20` folds `A`–`F` onto `a`–`f` and no other byte into that range.
    let folded = chunk | (ones &* 0x20)
    let isLetter = (folded &+ (ones &* (0x80 - 0x61))) & ~(folded &+ (ones &* (0x7f - 0x66)))
    guard (isDigit | isLetter) & high == high else { return nil }
    // Each byte's value: its low four bits, plus 9 for a letter (bit 6 set).
    let nibbles = (chunk & (ones &* 0x0f)) &+ (((chunk >> 6) & ones) &* 9)
    // Pairs of nibbles into bytes, pairs of bytes into 16 bits, then the two halves.
    let bytes = (nibbles << 4 | nibbles >> 8) & 0x00ff_00ff_00ff_00ff
    let shorts = (bytes << 8 | bytes >> 16) & 0x0000_ffff_0000_ffff
    return (shorts << 16 | shorts >> 32) & 0xffff_ffff
}

/// Scans a record: `[{"entity": "User", "inserted": [1], "updated": [{"keys": ["age"],
/// "ids": [2]}], "deleted": []}, …]`.
struct RecordScanner {
    // Unsafe: borrowed: its two users (`ChangeLog.decode`, `payload(of:ownOrigin:)`) make and
    // drop the scanner inside `withUTF8`; every read checks `position < bytes.count` first.
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0

    /// The deepest an unknown key's value may nest before the record is refused.
    static let maximumSkippedDepth = 64

    // Unsafe: `bytes` must stay valid while the scanner is used (see `bytes`).
    init(bytes: UnsafeBufferPointer<UInt8>, position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    func error(_ expected: String) -> ChangeLog.RecordSyntaxError {
        ChangeLog.RecordSyntaxError(offset: position, expected: expected)
    }

    mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\t"), UInt8(ascii: "\r"): position += 1
            default: return
            }
        }
    }

    /// Consumes `byte` (after any whitespace), or throws.
    mutating func expect(_ byte: UInt8) throws {
        skipSpace()
        guard position < bytes.count, bytes[position] == byte else {
            throw error("'\(Character(Unicode.Scalar(byte)))'")
        }
        position += 1
    }

    /// Consumes `byte` when it comes next (after any whitespace).
    mutating func consume(_ byte: UInt8) -> Bool {
        skipSpace()
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    /// Reads the elements of an array (after its `[`) up to its `]`.
    mutating func elements(_ element: (inout RecordScanner) throws -> Void) throws {
        if consume(UInt8(ascii: "]")) { return }
        repeat {
            try element(&self)
        } while consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "]"))
    }

    /// Reads the members of an object (after its `{`) up to its `}`.
    mutating func members(_ member: (inout RecordScanner, _ key: String) throws -> Void) throws {
        if consume(UInt8(ascii: "}")) { return }
        repeat {
            let key = try string()
            try expect(UInt8(ascii: ":"))
            try member(&self, key)
        } while consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
    }

    /// `members`, for an object of the record's own (an entry, an update): each member
    /// name is told apart as a `RecordKey` from its bytes, with no `String` made of it
    /// (making and comparing them was about a sixth of a notification's reading).
    mutating func fields(_ field: (inout RecordScanner, _ key: RecordKey) throws -> Void) throws {
        if consume(UInt8(ascii: "}")) { return }
        repeat {
            let key = try scanString(plain: RecordKey.init(bytes:), escaped: RecordKey.init(name:))
            try expect(UInt8(ascii: ":"))
            try field(&self, key)
        } while consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
    }

    mutating func record() throws -> ContextChanges {
        var changes = ContextChanges()
        try expect(UInt8(ascii: "["))
        try elements { scanner in try scanner.entity(into: &changes) }
        return changes
    }

    /// One entity's part; its ids are added to `changes` once its name is known.
    mutating func entity(into changes: inout ContextChanges) throws {
        var name: String?
        var inserted: [Int64] = []
        var deleted: [Int64] = []
        var updated: [(keys: Set<String>, ids: [Int64])] = []
        var entities: [(name: String, ids: [Int64])] = []
        try expect(UInt8(ascii: "{"))
        try fields { scanner, key in
            switch key {
            case .entity: name = try scanner.string()
            case .inserted: inserted = try scanner.integers()
            case .deleted: deleted = try scanner.integers()
            case .entities:
                try scanner.expect(UInt8(ascii: "{"))
                try scanner.members { scanner, name in entities.append((name, try scanner.integers())) }
            case .updated:
                try scanner.expect(UInt8(ascii: "["))
                try scanner.elements { scanner in updated.append(try scanner.update()) }
            case .keys, .ids, .other: try scanner.skipValue()
            }
        }
        guard let name else { throw error("an \"entity\" name in every entry") }
        // (A record's first entry makes its sets at their size: grown from empty one id at
        // a time, they were rehashed at every doubling.)
        if changes.inserted.isEmpty, inserted.count > 1 { changes.inserted = Set(minimumCapacity: inserted.count) }
        if changes.deleted.isEmpty, deleted.count > 1 { changes.deleted = Set(minimumCapacity: deleted.count) }
        if changes.updated.isEmpty, changes.changedKeys.isEmpty, !updated.isEmpty {
            let count = updated.reduce(0) { $0 + $1.ids.count }
            changes.updated = Set(minimumCapacity: count)
            changes.changedKeys = Dictionary(minimumCapacity: count)
        }
        for key in inserted { changes.inserted.insert(ObjectID(entityName: name, primaryKey: key)) }
        for key in deleted { changes.deleted.insert(ObjectID(entityName: name, primaryKey: key)) }
        for group in updated {
            for key in group.ids {
                let id = ObjectID(entityName: name, primaryKey: key)
                changes.updated.insert(id)
                changes.changedKeys[id] = group.keys
            }
        }
        for (kind, keys) in entities {
            for key in keys { changes.entityNames[ObjectID(entityName: name, primaryKey: key)] = kind }
        }
    }

    /// One group of updates: `{"keys": [...], "ids": [...]}`.
    mutating func update() throws -> (keys: Set<String>, ids: [Int64]) {
        var keys: Set<String> = []
        var ids: [Int64] = []
        try expect(UInt8(ascii: "{"))
        try fields { scanner, key in
            switch key {
            case .keys:
                try scanner.expect(UInt8(ascii: "["))
                try scanner.elements { scanner in keys.insert(try scanner.string()) }
            case .ids: ids = try scanner.integers()
            case .entity, .inserted, .updated, .deleted, .entities, .other: try scanner.skipValue()
            }
        }
        return (keys, ids)
    }

    /// An array of integers that fit in `Int64`.
    mutating func integers() throws -> [Int64] {
        var values: [Int64] = []
        try expect(UInt8(ascii: "["))
        try elements { scanner in values.append(try scanner.integer()) }
        return values
    }

    mutating func integer() throws -> Int64 {
        skipSpace()
        let negative = position < bytes.count && bytes[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        let start = position
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            position += 1
        }
        guard position > start else { throw error("an integer key") }
        guard let value: Int64 = decimal(bytes[start..<position], negative: negative) else {
            throw error("a key within the range of a 64-bit integer")
        }
        return value
    }

    /// A JSON string, escapes decoded.
    mutating func string() throws -> String {
        try scanString(plain: { String(decoding: $0, as: UTF8.self) }, escaped: { $0 })
    }

    /// Reads a JSON string: `plain` gets its bytes when it holds no escape (they are
    /// valid only during the call), `escaped` the decoded string otherwise.
    private mutating func scanString<Value>(
        // Unsafe: `plain` reads bytes of `bytes` (valid while the scanner is used) and
        // keeps none of them.
        plain: (UnsafeBufferPointer<UInt8>) -> Value, escaped: (String) -> Value
    ) throws -> Value {
        try expect(UInt8(ascii: "\""))
        let start = position
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "\""):
                defer { position += 1 }
                // Unsafe: `start..<position` lies within `bytes` (the loop runs while
                // `position < bytes.count`); `plain` only reads them.
                return plain(UnsafeBufferPointer(rebasing: bytes[start..<position]))
            case UInt8(ascii: "\\"):
                position = start
                return escaped(try escapedString())
            case 0..<0x20:
                throw error("no control character inside a string")
            default:
                position += 1
            }
        }
        throw error("the end of a string")
    }

    /// The rest of a string that holds escapes, from its first character.
    private mutating func escapedString() throws -> String {
        var scalars = String.UnicodeScalarView()
        var run = position
        func flush(upTo end: Int) {
            // Unsafe: `run <= end <= bytes.count` (positions the scan reached, `run` first);
            // the bytes are copied.
            scalars.append(contentsOf: String(decoding: UnsafeBufferPointer(rebasing: bytes[run..<end]), as: UTF8.self).unicodeScalars)
        }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                flush(upTo: position)
                position += 1
                return String(scalars)
            }
            guard byte >= 0x20 else { throw error("no control character inside a string") }
            guard byte == UInt8(ascii: "\\") else {
                position += 1
                continue
            }
            flush(upTo: position)
            position += 1
            guard position < bytes.count else { break }
            let escape = bytes[position]
            position += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var unit = try hexUnit()
                if (0xD800..<0xDC00).contains(unit) {
                    // A high surrogate must be followed by an escaped low one.
                    guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                        bytes[position + 1] == UInt8(ascii: "u")
                    else { throw error("a low surrogate after a high one") }
                    position += 2
                    let low = try hexUnit()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("a low surrogate after a high one") }
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(unit) else { throw error("a valid Unicode escape") }
                scalars.append(scalar)
            default:
                throw error("a valid escape")
            }
            run = position
        }
        throw error("the end of a string")
    }

    /// Four hex digits of a `\u` escape.
    private mutating func hexUnit() throws -> UInt32 {
        guard position + 4 <= bytes.count else { throw error("four hex digits") }
        var unit: UInt32 = 0
        for _ in 0..<4 {
            guard let value = hexDigit(bytes[position]) else { throw error("four hex digits") }
            unit = unit << 4 | UInt32(value)
            position += 1
        }
        return unit
    }

    /// Skips any JSON value (an unknown key's), nesting at most `maximumSkippedDepth`.
    mutating func skipValue() throws {
        skipSpace()
        var depth = 0
        repeat {
            guard position < bytes.count else { throw error("a value") }
            switch bytes[position] {
            case UInt8(ascii: "\""):
                _ = try string()
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                guard depth <= Self.maximumSkippedDepth else { throw error("a value nested less deeply") }
                position += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                guard depth > 0 else { throw error("a value") }
                depth -= 1
                position += 1
            case UInt8(ascii: ","), UInt8(ascii: ":"):
                guard depth > 0 else { throw error("a value") }
                position += 1
            default:
                // A number or a literal: up to the next delimiter.
                let start = position
                while position < bytes.count {
                    let byte = bytes[position]
                    if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}")
                        || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\t")
                        || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: ":")
                    { break }
                    position += 1
                }
                guard position > start else { throw error("a value") }
            }
            skipSpace()
        } while depth > 0
    }
}

/// A member name of a change record's own objects (`RecordScanner.fields`).
enum RecordKey: Equatable {
    case entity, inserted, updated, deleted, entities, keys, ids
    /// Any other name: its value is skipped.
    case other

    /// The name its UTF-8 bytes spell. All the record's names fit in eight bytes: they
    /// are told apart by their length and their bytes packed into one word, little-end
    /// first (`ChangeRecordScannerTests` checks each word against its name).
    init<Bytes: Collection<UInt8>>(bytes name: Bytes) {
        guard name.count <= 8 else {
            self = .other
            return
        }
        var word: UInt64 = 0
        for (index, byte) in name.enumerated() { word |= UInt64(byte) << (8 * UInt64(index)) }
        switch (name.count, word) {
        case (6, 0x7974_6974_6e65): self = .entity  // "entity"
        case (8, 0x6465_7472_6573_6e69): self = .inserted  // "inserted"
        case (7, 0x64_6574_6164_7075): self = .updated  // "updated"
        case (7, 0x64_6574_656c_6564): self = .deleted  // "deleted"
        case (8, 0x7365_6974_6974_6e65): self = .entities  // "entities"
        case (4, 0x7379_656b): self = .keys  // "keys"
        case (3, 0x73_6469): self = .ids  // "ids"
        default: self = .other
        }
    }

    /// The name a decoded string spells (one written with escapes).
    init(name: String) {
        self.init(bytes: name.utf8)
    }
}
