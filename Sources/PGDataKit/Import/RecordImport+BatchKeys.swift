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
        /// The offset of each key's first record.
        private(set) var firstOffset: [UniqueValue: Int] = [:]
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
            firstOffset.reserveCapacity(records.count)
            storedKeys.reserveCapacity(records.count)
            for (offset, record) in records.enumerated() {
                let index = firstIndex + offset
                guard let raw = RecordImport.value(in: record, at: paths), !raw.isNull else {
                    throw ImportError.missingKey(recordIndex: index, key: keyName, entity: entityName, attribute: key.name)
                }
                let stored: StoredValue
                let hash: UniqueValue
                if key.decoding == .string, case .string(let text) = raw {
                    // The common key: text for a string attribute, taken as it is.
                    stored = .string(text)
                    hash = .string(ExactText(text))
                } else {
                    do {
                        stored = try ValueConversion.key.storedValue(raw, for: key, formatters: formatters)
                    } catch {
                        throw ImportError.typeMismatch(
                            recordIndex: index, key: keyName, entity: entityName, attribute: key.name,
                            expected: error.expected, actual: error.actual, value: raw.importErrorText)
                    }
                    guard let converted = UniqueValue(stored) else {
                        throw ImportError.missingKey(recordIndex: index, key: keyName, entity: entityName, attribute: key.name)
                    }
                    hash = converted
                }
                storedKeys.append(stored)
                // One hash per record: the slot is read and, for a new key, written.
                let first = Self.firstOffset(of: offset, in: &firstOffset[hash, default: -1])
                if first != offset {
                    nextOffset[lastOffset[first]] = offset
                    lastOffset[first] = offset
                } else {
                    lastOffset[offset] = offset
                    order.append(offset)
                }
            }
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
