import PGDataKitPostgres

/// Writes a change record's JSON (`ChangeLog.encode`): `[{"entity": …, "inserted": […],
/// "updated": [{"keys": […], "ids": […]}, …], "deleted": […]}, …]`. Its fixed parts are
/// byte arrays made once (`RecordPieces`): appending a string's UTF-8 view cost about 210
/// instructions a piece.
struct ChangeRecordWriter {
    var bytes: [UInt8] = []
    private var entries = 0

    /// The record of a save of one object and nothing else (the common save), written
    /// at once with no entry built for it; `nil` for any other save.
    static func oneObject(_ changes: ContextChanges) -> String? {
        guard changes.entityNames.isEmpty, changes.inserted.count + changes.updated.count + changes.deleted.count == 1
        else { return nil }
        if let id = changes.updated.first, let key = id.primaryKey {
            var writer = ChangeRecordWriter(capacity: 96 + id.entityName.utf8.count)
            writer.oneObject(id.entityName, updated: (changes.changedKeys[id] ?? []).sorted(), key: key)
            return writer.finish()
        }
        if let id = changes.inserted.first ?? changes.deleted.first, let key = id.primaryKey {
            var writer = ChangeRecordWriter(capacity: 96 + id.entityName.utf8.count)
            writer.oneObject(id.entityName, insertedOrDeleted: key, inserted: !changes.inserted.isEmpty)
            return writer.finish()
        }
        return nil
    }

    init(capacity: Int) {
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "["))
    }

    mutating func append(_ piece: [UInt8]) { bytes.append(contentsOf: piece) }

    /// Opens an entity's entry, up to its inserted keys (written next, by `list`).
    mutating func open(_ entity: String) {
        if entries > 0 { bytes.append(UInt8(ascii: ",")) }
        entries += 1
        append(RecordPieces.entity)
        JSONValue.appendQuoted(entity, to: &bytes)
        append(RecordPieces.inserted)
    }

    mutating func list(_ ids: [Int64]) {
        bytes.append(UInt8(ascii: "["))
        for (index, id) in ids.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            appendDecimal(id, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// `{"keys":[…],"ids":`: a set of changed keys; the ids of the objects it changed
    /// follow (`list`, `single`), then `}`.
    mutating func updateKeys(_ keys: [String]) {
        append(RecordPieces.keys)
        for (index, key) in keys.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONValue.appendQuoted(key, to: &bytes)
        }
        append(RecordPieces.ids)
    }

    /// `[id]`, with no array made for it.
    mutating func single(_ id: Int64) {
        bytes.append(UInt8(ascii: "["))
        appendDecimal(id, to: &bytes)
        bytes.append(UInt8(ascii: "]"))
    }

    /// The whole entry of one updated object.
    mutating func oneObject(_ entity: String, updated keys: [String], key: Int64) {
        open(entity)
        append(RecordPieces.emptyThenUpdated)
        updateKeys(keys)
        single(key)
        append(RecordPieces.updateThenNoneDeleted)
    }

    /// The whole entry of one inserted (or deleted) object.
    mutating func oneObject(_ entity: String, insertedOrDeleted key: Int64, inserted: Bool) {
        open(entity)
        if inserted {
            single(key)
            append(RecordPieces.updated)
            append(RecordPieces.deleted)
            append(RecordPieces.empty)
        } else {
            append(RecordPieces.emptyThenUpdated)
            append(RecordPieces.deleted)
            single(key)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    consuming func finish() -> String {
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The fixed parts of a change record's JSON (`ChangeRecordWriter`), as bytes.
enum RecordPieces {
    static let entity = Array("{\"entity\":".utf8)
    static let inserted = Array(",\"inserted\":".utf8)
    static let updated = Array(",\"updated\":[".utf8)
    static let keys = Array("{\"keys\":[".utf8)
    static let ids = Array("],\"ids\":".utf8)
    static let deleted = Array("],\"deleted\":".utf8)
    static let entities = Array(",\"entities\":{".utf8)
    /// No inserted keys, then the updates' opening.
    static let emptyThenUpdated = Array("[],\"updated\":[".utf8)
    static let empty = Array("[]".utf8)
    /// The end of an update's ids and of the updates, no deleted keys, the entry's end.
    static let updateThenNoneDeleted = Array("}],\"deleted\":[]}".utf8)
}
