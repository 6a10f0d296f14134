import Foundation

extension Connection {
    /// Parameters as libpq takes them: texts (C strings) and type OIDs, `nil` and 0 for
    /// NULL. The texts lie one after another in `storage`, one block the caller frees with
    /// `free` (`nil` when every parameter is NULL): a statement's parameters cost one
    /// allocation, not one each.
    ///
    /// - Throws: the error of a parameter that cannot be encoded (nothing is left to free).
    static func encode(_ parameters: [(any PostgresEncodable)?]) throws -> (
        texts: [UnsafeMutablePointer<CChar>?], types: [UInt32], storage: UnsafeMutableRawPointer?
    ) {
        var strings: [String?] = []
        strings.reserveCapacity(parameters.count)
        var types: [UInt32] = []
        types.reserveCapacity(parameters.count)
        var size = 0
        // (Each parameter read in place through optional chaining: binding it to a
        // constant copied the existential, its value's retain included.)
        for index in parameters.indices {
            guard let oid = parameters[index]?.postgresTypeOID else {
                strings.append(nil)
                types.append(0)
                continue
            }
            types.append(oid)
            let text = try parameters[index]?.postgresText()
            if let text { size += text.utf8.count + 1 }
            strings.append(text)
        }
        guard size > 0 else { return (Array(repeating: nil, count: parameters.count), types, nil) }
        guard let storage = malloc(size) else {
            throw PostgresError(kind: .client, message: "no memory for \(size) bytes of parameters")
        }
        // Unsafe: every text is written inside the block: `size` counts each one's UTF-8
        // bytes and its terminating NUL, and `offset` advances by exactly that.
        let base = storage.bindMemory(to: CChar.self, capacity: size)
        var texts: [UnsafeMutablePointer<CChar>?] = []
        texts.reserveCapacity(parameters.count)
        var offset = 0
        for string in strings {
            guard var string else {
                texts.append(nil)
                continue
            }
            let start = base + offset
            let count = string.withUTF8 { bytes in
                // Unsafe: `bytes` is read only inside this closure, into the room counted
                // for it above.
                if let source = bytes.baseAddress {
                    UnsafeMutableRawPointer(start).copyMemory(from: source, byteCount: bytes.count)
                }
                return bytes.count
            }
            start[count] = 0
            texts.append(start)
            offset += count + 1
        }
        return (texts, types, storage)
    }
}

extension PostgresEncodable {
    /// The type OID of the value's type (`postgresType`), read through the value.
    fileprivate var postgresTypeOID: UInt32 { Self.postgresType.oid }
}
