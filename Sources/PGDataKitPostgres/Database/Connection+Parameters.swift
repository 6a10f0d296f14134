import Foundation

/// A statement's parameters as libpq takes them, in one block `Connection.encode` wrote
/// and the caller frees (`storage`): a pointer per parameter (`nil` for NULL) to its
/// bytes, a NUL-terminated text or binary bytes; then every parameter's byte length and
/// format (1 binary, 0 text), handed to libpq when one parameter travels in binary; then
/// the bytes. The type OIDs (0 for NULL) are an array of their own: a prepared
/// statement's key holds them.
struct EncodedParameters {
    /// Each parameter's type OID.
    var types: [UInt32] = []
    /// The block (`nil` for no parameters), freed by the caller with `free`.
    private(set) var storage: UnsafeMutableRawPointer?
    /// Whether some parameter travels in binary (a `bigint[]`, `text[]` or `tid[]` with
    /// a binary form), so libpq is handed the lengths and formats too.
    private(set) var hasBinary = false

    /// No parameters.
    init() {}

    /// The parameters of `types` in `storage` (see `Connection.encode`).
    fileprivate init(types: [UInt32], storage: UnsafeMutableRawPointer?, hasBinary: Bool) {
        self.types = types
        self.storage = storage
        self.hasBinary = hasBinary
    }

    /// How many parameters there are.
    var count: Int32 { Int32(types.count) }

    /// The size of the block's pointers, lengths and formats for `count` parameters.
    fileprivate static func headerSize(count: Int) -> Int {
        count * (MemoryLayout<UnsafeMutablePointer<CChar>?>.stride + 8)
    }

    // Unsafe: the block holds `types.count` pointers from its start and as many lengths
    // and formats after them (`Connection.encode` wrote them all), and lives until the
    // caller frees it, after the last use of these.
    /// Each parameter's pointer.
    var values: UnsafeBufferPointer<UnsafeMutablePointer<CChar>?> {
        UnsafeBufferPointer(start: storage?.assumingMemoryBound(to: UnsafeMutablePointer<CChar>?.self), count: types.count)
    }

    /// Each parameter's byte length and format; empty when every parameter is text.
    var lengthsAndFormats: (lengths: UnsafeBufferPointer<Int32>, formats: UnsafeBufferPointer<Int32>) {
        guard hasBinary, let storage else { return (UnsafeBufferPointer(start: nil, count: 0), UnsafeBufferPointer(start: nil, count: 0)) }
        let lengths = (storage + types.count * MemoryLayout<UnsafeMutablePointer<CChar>?>.stride).assumingMemoryBound(to: Int32.self)
        return (UnsafeBufferPointer(start: lengths, count: types.count), UnsafeBufferPointer(start: lengths + types.count, count: types.count))
    }

    /// Calls `body` with the pointers libpq's `PQexecParams`, `PQsendQueryPrepared` and
    /// the like take: values, lengths and formats (`nil` lengths and formats when every
    /// parameter is text).
    func withArguments<Result>(
        _ body: (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> Result
    ) -> Result {
        let values = storage.map { UnsafePointer($0.assumingMemoryBound(to: UnsafePointer<CChar>?.self)) }
        let (lengths, formats) = lengthsAndFormats
        return body(values, lengths.baseAddress, formats.baseAddress)
    }
}

extension Connection {
    /// Parameters as libpq takes them, in one block (`EncodedParameters`), written in one
    /// pass: a statement's parameters cost one allocation (grown when a long one needs
    /// it), not one each. A `bigint[]` or `text[]` parameter that has a binary form
    /// (`BinaryArray`, the arrays the object graph's statements send, and public `[Int]`
    /// and `[Int64]`) travels in binary: nothing to quote, escape or parse.
    ///
    /// - Throws: the error of a parameter that cannot be encoded (nothing is left to free).
    static func encode(_ parameters: [(any PostgresEncodable)?]) throws -> (
        parameters: EncodedParameters, storage: UnsafeMutableRawPointer?
    ) {
        let count = parameters.count
        guard count > 0 else { return (EncodedParameters(), nil) }
        var types: [UInt32] = []
        types.reserveCapacity(count)
        // Lengths and formats are written for every parameter, and handed to libpq when
        // one travels in binary (its type is `bigint[]`, `text[]` or `tid[]`); a text
        // parameter's format among them is 0. Room for them costs 8 bytes a parameter,
        // and lets each parameter be read once: every read of an array's element copies
        // the existential, a call through its value's witness table (reading it once for
        // its type and again for its bytes was two copies, about 120 instructions each).
        var hasBinary = false
        var block = ParameterBlock(header: EncodedParameters.headerSize(count: count), count: count)
        do {
            for index in parameters.indices {
                guard let parameter = parameters[index] else {
                    types.append(0)
                    block.appendNull(at: index)
                    continue
                }
                let oid = parameter.postgresTypeOID
                types.append(oid)
                if Self.mayBeBinary(oid), let bytes = parameter.binaryArrayBytes() {
                    try block.appendBinary(bytes, at: index)
                    hasBinary = true
                } else if let text = try parameter.postgresText() {
                    try block.appendText(text, at: index)
                } else {
                    block.appendNull(at: index)
                }
            }
            let storage = try block.finish()
            return (EncodedParameters(types: types, storage: storage, hasBinary: hasBinary), storage)
        } catch {
            block.free()
            throw error
        }
    }

    /// Whether a parameter of type `oid` may travel in binary: `bigint[]`, `text[]` and
    /// `tid[]`, the types `binaryArrayBytes()` has a binary form of.
    @inline(__always)
    private static func mayBeBinary(_ oid: UInt32) -> Bool {
        oid == PostgresType.int8.arrayOID || oid == PostgresType.text.arrayOID || oid == PostgresType.tid.arrayOID
    }
}

/// The block `Connection.encode` writes, grown as parameters are written into it: the
/// header (`EncodedParameters`: a pointer per parameter, held as the offset of its bytes
/// until `finish`, then lengths and formats when one is binary), then the bytes.
private struct ParameterBlock: ~Copyable {
    private var base: UnsafeMutableRawPointer?
    private var capacity: Int
    private var used: Int
    private let count: Int
    /// Set when `malloc` or `realloc` failed (thrown at the next write or `finish`).
    private var failed = false

    /// An empty block with room for the header and some bytes.
    init(header: Int, count: Int) {
        self.count = count
        capacity = header + Swift.max(64, Swift.min(count, 1 << 16) * 24)
        base = malloc(capacity)
        used = header
        if base == nil { failed = true }
    }

    /// Makes room for `extra` more bytes, or throws.
    private mutating func reserve(_ extra: Int) throws -> UnsafeMutableRawPointer {
        guard let base, !failed else { throw Self.noMemory(used + extra) }
        guard extra > capacity - used else { return base }
        let larger = Swift.max(used + extra, capacity > Int.max / 2 ? used + extra : capacity * 2)
        guard let grown = realloc(base, larger) else { throw Self.noMemory(larger) }
        self.base = grown
        capacity = larger
        return grown
    }

    private static func noMemory(_ size: Int) -> PostgresError {
        PostgresError(kind: .client, message: "no memory for \(size) bytes of parameters")
    }

    // Unsafe: every write below is inside the block: the header's slots (`count`
    // pointers, then `count` lengths and `count` formats) lie before `used`, and bytes
    // are written after `used` into room `reserve` made.

    /// Notes parameter `index`'s bytes at the current end (an offset until `finish`).
    private func setValue(_ index: Int, offset: Int?, in base: UnsafeMutableRawPointer) {
        let value = offset.flatMap { UnsafeMutablePointer<CChar>(bitPattern: $0) }
        base.storeBytes(of: value, toByteOffset: index * MemoryLayout<UnsafeMutablePointer<CChar>?>.stride, as: UnsafeMutablePointer<CChar>?.self)
    }

    /// Writes parameter `index`'s length and format (handed to libpq when some parameter
    /// is binary).
    private func setLength(_ index: Int, _ length: Int, format: Int32, in base: UnsafeMutableRawPointer) {
        let lengths = count * MemoryLayout<UnsafeMutablePointer<CChar>?>.stride
        base.storeBytes(of: Int32(truncatingIfNeeded: length), toByteOffset: lengths + index * 4, as: Int32.self)
        base.storeBytes(of: format, toByteOffset: lengths + (count + index) * 4, as: Int32.self)
    }

    /// Writes a binary parameter.
    mutating func appendBinary(_ bytes: BinaryBytes, at index: Int) throws {
        guard bytes.count <= Int(Int32.max) else {
            throw PostgresValueError(
                code: .unencodable, swiftType: "array", reason: "\(bytes.count) bytes is more than a parameter can hold")
        }
        let base = try reserve(bytes.count)
        (base + used).copyMemory(from: bytes.base, byteCount: bytes.count)
        setValue(index, offset: used, in: base)
        setLength(index, bytes.count, format: 1, in: base)
        used += bytes.count
    }

    /// Writes a text parameter and its terminating NUL.
    mutating func appendText(_ text: String, at index: Int) throws {
        var text = text
        try text.withUTF8 { utf8 in
            let base = try reserve(utf8.count + 1)
            if let source = utf8.baseAddress { (base + used).copyMemory(from: source, byteCount: utf8.count) }
            base.storeBytes(of: 0, toByteOffset: used + utf8.count, as: UInt8.self)
            setValue(index, offset: used, in: base)
            setLength(index, utf8.count, format: 0, in: base)
            used += utf8.count + 1
        }
    }

    /// Notes a NULL parameter.
    mutating func appendNull(at index: Int) {
        guard let base, !failed else { return }
        setValue(index, offset: nil, in: base)
        setLength(index, 0, format: 0, in: base)
    }

    /// Turns the offsets into pointers and hands the block over (the caller frees it).
    mutating func finish() throws -> UnsafeMutableRawPointer {
        guard let base, !failed else { throw Self.noMemory(used) }
        let values = base.bindMemory(to: UnsafeMutablePointer<CChar>?.self, capacity: count)
        let bytes = base.assumingMemoryBound(to: CChar.self)
        for index in 0..<count {
            if let offset = values[index] { values[index] = bytes + Int(bitPattern: offset) }
        }
        self.base = nil
        return base
    }

    /// Frees the block (after a parameter failed).
    mutating func free() {
        Foundation.free(base)
        base = nil
    }
}

extension PostgresEncodable {
    /// The type OID of the value's type (`postgresType`), read through the value.
    fileprivate var postgresTypeOID: UInt32 { Self.postgresType.oid }

    /// The value in binary when its type is one sent that way: `BinaryArray` (of `bigint`,
    /// `text` or `tid`) and `[Int]`, `[Int64]` and their optional-element forms; `nil` for
    /// any other type.
    /// Found by comparing types, not by a cast to a protocol (a conformance lookup, a few
    /// hundred instructions a parameter).
    fileprivate func binaryArrayBytes() -> BinaryBytes? {
        // Unsafe: each bit cast is of a value to its own type (`Self` is that type).
        if Self.self == BinaryArray<Int64>.self { return unsafeBitCast(self, to: BinaryArray<Int64>.self).bytes }
        if Self.self == BinaryArray<String>.self { return unsafeBitCast(self, to: BinaryArray<String>.self).bytes }
        if Self.self == BinaryArray<TupleID>.self { return unsafeBitCast(self, to: BinaryArray<TupleID>.self).bytes }
        if Self.self == [Int64].self { return unsafeBitCast(self, to: [Int64].self).postgresBinary() }
        if Self.self == [Int].self { return unsafeBitCast(self, to: [Int].self).postgresBinary() }
        if Self.self == [Int64?].self { return unsafeBitCast(self, to: [Int64?].self).postgresBinary() }
        if Self.self == [Int?].self { return unsafeBitCast(self, to: [Int?].self).postgresBinary() }
        return nil
    }
}
