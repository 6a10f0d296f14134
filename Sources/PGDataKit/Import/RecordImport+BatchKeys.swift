extension RecordImport {
    /// The plan of a keyed batch, made from the records alone before anything changes:
    /// each record's key, which records share a key, and the order of the keys (of
    /// their first records). A missing or mistyped key fails it.
    ///
    /// Records of one key form a chain through `nextOffset`, from the first (in
    /// `order`) to the last.
    struct BatchKeys {
        /// The offsets of each key's first record, in order of first appearance.
        private(set) var order: [Int] = []
        /// The offset of each text key's first record (the common keys: a text's bytes
        /// hashed once, no `UniqueValue` made).
        private var firstOffsetOfText: ExactTextMap
        /// The offset of each other key's first record.
        private var firstOffsetOfOther: [UniqueValue: Int] = [:]
        /// Each record's key, as stored.
        private(set) var storedKeys: [StoredValue] = []
        /// The offset of the next record of the same key; -1 after the last.
        private(set) var nextOffset: [Int]

        /// Plans a batch whose records are matched on `key`, found at the first of
        /// `paths` present in a record.
        ///
        /// - Parameters:
        ///   - firstIndex: the index of the first record in the whole import (for
        ///     errors).
        ///   - keyName, entityName: the key's remote name and the entity's, for errors.
        /// - Throws: `ImportError.missingKey`, `ImportError.typeMismatch`.
        init(
            _ records: [JSONValue], firstIndex: Int, key: AttributeDescription, at paths: [RemoteKeyPath],
            keyName: String, entityName: String, formatters: DateFormatters
        ) throws {
            nextOffset = [Int](repeating: -1, count: records.count)
            // The last record of each key, by the offset of its first.
            var lastOffset = [Int](repeating: -1, count: records.count)
            order.reserveCapacity(records.count)
            firstOffsetOfText = ExactTextMap(minimumCapacity: records.count)
            storedKeys.reserveCapacity(records.count)
            for (offset, record) in records.enumerated() {
                let index = firstIndex + offset
                guard let raw = RecordImport.value(in: record, at: paths), !raw.isNull else {
                    throw ImportError.missingKey(recordIndex: index, key: keyName, entity: entityName, attribute: key.name)
                }
                let stored: StoredValue
                let first: Int
                if key.decoding == .string, case .string(let text) = raw {
                    // The common key: text for a string attribute, taken as it is.
                    stored = .string(text)
                    first = firstOffsetOfText.value(for: text, inserting: offset)
                } else {
                    do {
                        stored = try ValueConversion.key.storedValue(raw, for: key, formatters: formatters)
                    } catch {
                        throw ImportError.typeMismatch(
                            recordIndex: index, key: keyName, entity: entityName, attribute: key.name,
                            expected: error.expected, actual: error.actual, value: raw.importErrorText)
                    }
                    switch UniqueValue(stored) {
                    case nil:
                        throw ImportError.missingKey(recordIndex: index, key: keyName, entity: entityName, attribute: key.name)
                    case .string(let text):
                        first = firstOffsetOfText.value(for: text.text, inserting: offset)
                    case let converted?:
                        // One hash per record: the slot is read and, for a new key, written.
                        first = Self.firstOffset(of: offset, in: &firstOffsetOfOther[converted, default: -1])
                    }
                }
                storedKeys.append(stored)
                if first != offset {
                    nextOffset[lastOffset[first]] = offset
                    lastOffset[first] = offset
                } else {
                    lastOffset[offset] = offset
                    order.append(offset)
                }
            }
        }

        /// The offset of the first record of the batch with this key, or `nil` when no
        /// record has it.
        func firstOffset(of key: UniqueValue) -> Int? {
            if case .string(let text) = key { return firstOffsetOfText.value(for: text.text) }
            return firstOffsetOfOther[key]
        }

        /// The offset of the first record of a key: the slot's, or `offset` for a new key
        /// (the slot holds -1 then and takes `offset`).
        @inline(__always)
        private static func firstOffset(of offset: Int, in slot: inout Int) -> Int {
            if slot < 0 { slot = offset }
            return slot
        }
    }
}
