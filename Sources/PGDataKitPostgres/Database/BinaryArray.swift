import Foundation

/// Bytes of a binary parameter, in one allocation with the object (its header is the
/// byte count): written once, by `BinaryArrayBuilder`, before the object is shared, and
/// only read after.
package final class BinaryBytes: ManagedBuffer<Int, UInt8> {
    /// How many bytes there are. (Read and written through the header's pointer:
    /// `header` itself is a class property, each access checked for exclusivity at run
    /// time, about 150 instructions.)
    package var count: Int {
        // Unsafe: the header is the object's own, alive as long as it.
        withUnsafeMutablePointerToHeader { $0.pointee }
    }

    /// The first byte (valid while the object lives).
    package var base: UnsafeMutableRawPointer {
        // Unsafe: the elements are the object's tail allocation, alive as long as it.
        withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0) }
    }

    /// Room for at least `capacity` bytes, none written (`count` 0).
    fileprivate static func make(capacity: Int) -> BinaryBytes {
        // Unsafe: `create` called on this class makes an instance of it.
        unsafeDowncast(create(minimumCapacity: capacity) { _ in 0 }, to: BinaryBytes.self)
    }

    /// The bytes, for the duration of `body`.
    package func withBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }
}

/// An element type an array parameter can be sent in binary for: its elements' type
/// (the array header names it, and the server checks it against the parameter's type).
package protocol BinaryArrayElement: PostgresEncodable {
    /// The type of one element in binary (`text` for strings, `bigint` for integers).
    static var binaryElementType: PostgresType { get }
}

extension String: BinaryArrayElement {
    /// `text`.
    package static var binaryElementType: PostgresType { .text }
}

extension Int64: BinaryArrayElement {
    /// `bigint`.
    package static var binaryElementType: PostgresType { .int8 }
}

/// A row version's location (`tid`: a block number and an item offset), as an element of a
/// binary `tid[]` (`BinaryArrayBuilder.append(block:offset:)`).
package struct TupleID: BinaryArrayElement, Equatable {
    /// The block number.
    package let block: UInt32
    /// The item's offset in the block.
    package let offset: UInt16

    /// The location of item `offset` of block `block`.
    package init(block: UInt32, offset: UInt16) {
        self.block = block
        self.offset = offset
    }

    /// `tid`.
    package static var postgresType: PostgresType { .tid }

    /// `tid`.
    package static var binaryElementType: PostgresType { .tid }

    /// `(block,offset)`, as PostgreSQL writes a `tid`.
    package func postgresText() throws -> String? { "(\(block),\(offset))" }
}

/// A one-dimensional array parameter already written in binary (`BinaryArrayBuilder`),
/// sent in binary as an array of `Element.binaryElementType` (`text[]`, `bigint[]`),
/// typed so: a statement casts it (`$1::integer[]`) where the column's type differs.
package struct BinaryArray<Element: BinaryArrayElement>: PostgresEncodable {
    /// The array in binary. (Not `Sendable` as a `ManagedBuffer`; unsafe only in name:
    /// the bytes are written before the value exists and never after.)
    nonisolated(unsafe) package let bytes: BinaryBytes

    /// The array `bytes` holds (`BinaryArrayBuilder.finish()`).
    package init(bytes: BinaryBytes) { self.bytes = bytes }

    /// The type of an array of the element type.
    package static var postgresType: PostgresType {
        PostgresType(oid: Element.binaryElementType.arrayOID, arrayOID: 0)
    }

    /// The array's text literal, read back from its binary form (for `COPY` and for
    /// descriptions; statements send the binary form).
    package func postgresText() throws -> String? {
        try BinaryArrayReader.literal(of: bytes)
    }
}

extension Array where Element: BinaryIntegerArrayElement {
    /// A `bigint[]` in binary, `NULL` elements included (how `Connection` sends an
    /// `[Int]`, `[Int64]` and their optional-element forms).
    package func postgresBinary() -> BinaryBytes {
        var builder = BinaryArrayBuilder(element: .int8, capacity: count)
        for element in self {
            if let value = element.binaryInt64 { builder.append(value) } else { builder.appendNull() }
        }
        return builder.finish()
    }
}

/// An element of a public integer array that is sent as `bigint[]` in binary: `Int`,
/// `Int64` and their optionals (`[Int].postgresType` is `bigint[]`).
package protocol BinaryIntegerArrayElement: PostgresEncodable {
    /// The value, `nil` for `NULL`.
    var binaryInt64: Int64? { get }
}

extension Int: BinaryIntegerArrayElement {
    /// The value (64 bits on the platforms the package builds for).
    package var binaryInt64: Int64? { Int64(self) }
}

extension Int64: BinaryIntegerArrayElement {
    /// The value.
    package var binaryInt64: Int64? { self }
}

extension Optional: BinaryIntegerArrayElement where Wrapped: BinaryIntegerArrayElement {
    /// The wrapped value, `nil` for `NULL`.
    package var binaryInt64: Int64? { self?.binaryInt64 }
}

/// Writes a one-dimensional array in PostgreSQL's binary format (what `array_send`
/// writes and `array_recv` reads), element by element: a header (dimensions, whether
/// any element is `NULL`, the element type, then the length and lower bound 1 of the
/// one dimension), then each element as its byte length (-1 for `NULL`) and its bytes:
/// a string's UTF-8, an integer's eight bytes big-endian. An empty array has no
/// dimension. All numbers are big-endian.
///
/// Cheaper than the text literal (`ArrayLiteralBuilder`) on both sides: nothing to quote
/// or escape, no digits to write, and the server parses nothing.
package struct BinaryArrayBuilder: ~Copyable {
    /// The bytes so far, `count` of `capacity` (grown by doubling), and where they start.
    private var bytes: BinaryBytes
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private var count: Int
    /// How many elements there are, and whether one is `NULL` (written at `finish`).
    private var elements: Int32 = 0
    private var hasNull = false
    /// The header's size: dimensions, flags, element type, length, lower bound.
    private static let headerSize = 20

    /// Starts an empty array of `element`s with room for about `capacity` short ones.
    package init(element: PostgresType, capacity: Int) {
        bytes = .make(capacity: Swift.max(64, Self.headerSize &+ Swift.min(capacity, 1 << 24) &* 16))
        base = bytes.base
        self.capacity = bytes.capacity
        base.storeBytes(of: Int32(1).bigEndian, as: Int32.self)
        base.storeBytes(of: Int32(element.oid).bigEndian, toByteOffset: 8, as: Int32.self)
        count = Self.headerSize
    }

    /// Makes room for `extra` more bytes.
    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if extra > capacity &- count { grow(to: count + extra) }
    }

    private mutating func grow(to needed: Int) {
        let grown = BinaryBytes.make(capacity: Swift.max(needed, capacity > Int.max / 2 ? needed : capacity * 2))
        grown.base.copyMemory(from: base, byteCount: count)
        bytes = grown
        base = grown.base
        capacity = grown.capacity
    }

    /// Writes a big-endian 32-bit number at `count`; `reserve` first.
    @inline(__always)
    private mutating func put(_ value: Int32) {
        base.storeBytes(of: value.bigEndian, toByteOffset: count, as: Int32.self)
        count &+= 4
    }

    /// Appends `NULL`.
    package mutating func appendNull() {
        reserve(4)
        put(-1)
        elements &+= 1
        hasNull = true
    }

    /// Appends an integer (an element of `bigint`).
    package mutating func append(_ value: Int64) {
        reserve(12)
        put(8)
        base.storeBytes(of: value.bigEndian, toByteOffset: count, as: Int64.self)
        count &+= 8
        elements &+= 1
    }

    /// Appends a row version's location (an element of `tid`): six bytes, the block
    /// number's four and the offset's two.
    package mutating func append(block: UInt32, offset: UInt16) {
        reserve(10)
        put(6)
        base.storeBytes(of: block.bigEndian, toByteOffset: count, as: UInt32.self)
        base.storeBytes(of: offset.bigEndian, toByteOffset: count &+ 4, as: UInt16.self)
        count &+= 6
        elements &+= 1
    }

    /// Appends a string's UTF-8 (an element of `text`).
    ///
    /// - Throws: `PostgresValueError` with code `.containsNUL` (the array is left as it
    ///   was): PostgreSQL text cannot hold NUL.
    package mutating func append(_ text: String) throws {
        if let inline = SmallText.inlineASCII(text) {
            try appendInline(inline)
            return
        }
        var text = text
        try text.withUTF8 { utf8 in try appendBytes(utf8) }
    }

    /// Appends a short ASCII string from its two words (`SmallText.inlineASCII`): both
    /// words stored whole, the count covering the string.
    @inline(__always)
    private mutating func appendInline(_ inline: (low: UInt64, high: UInt64, count: Int)) throws {
        let (low, high, length) = inline
        // (The bytes past the string's end padded with ones: only the string's own can
        // be zero.)
        if Self.holdsZeroByte(SmallText.padded(low, keeping: length, with: 1))
            || Self.holdsZeroByte(SmallText.padded(high, keeping: length - 8, with: 1))
        {
            throw PostgresValueError(code: .containsNUL, swiftType: "String")
        }
        reserve(20)
        put(Int32(length))
        base.storeBytes(of: low.littleEndian, toByteOffset: count, as: UInt64.self)
        base.storeBytes(of: high.littleEndian, toByteOffset: count &+ 8, as: UInt64.self)
        count &+= length
        elements &+= 1
    }

    /// Appends bytes of UTF-8 after their length, refusing NUL.
    private mutating func appendBytes(_ utf8: UnsafeBufferPointer<UInt8>) throws {
        guard utf8.count <= Int(Int32.max) else {
            throw PostgresValueError(
                code: .unencodable, swiftType: "String", reason: "\(utf8.count) bytes is more than an element can hold")
        }
        if let source = utf8.baseAddress, memchr(source, 0, utf8.count) != nil {
            throw PostgresValueError(code: .containsNUL, swiftType: "String")
        }
        reserve(4 &+ utf8.count)
        put(Int32(utf8.count))
        if let source = utf8.baseAddress { (base + count).copyMemory(from: source, byteCount: utf8.count) }
        count &+= utf8.count
        elements &+= 1
    }

    /// Whether a word of eight bytes has a zero byte (`(w - 0x01…01) & ~w & 0x80…80`).
    @inline(__always)
    private static func holdsZeroByte(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        return (word &- ones) & ~word & (ones &* 0x80) != 0
    }

    /// Completes the header and hands the bytes over (call once, last). An empty array
    /// has no dimension: its header is the first 12 bytes.
    package consuming func finish() -> BinaryBytes {
        if elements == 0 {
            base.storeBytes(of: Int32(0).bigEndian, as: Int32.self)
            base.storeBytes(of: Int32(0).bigEndian, toByteOffset: 4, as: Int32.self)
            // (The element type moves up from byte 8: it already is there.)
            count = 12
        } else {
            base.storeBytes(of: Int32(hasNull ? 1 : 0).bigEndian, toByteOffset: 4, as: Int32.self)
            base.storeBytes(of: elements.bigEndian, toByteOffset: 12, as: Int32.self)
            base.storeBytes(of: Int32(1).bigEndian, toByteOffset: 16, as: Int32.self)
        }
        // Unsafe: the header is the object's own, which the builder holds.
        bytes.withUnsafeMutablePointerToHeader { $0.pointee = count }
        return bytes
    }
}

/// Reads a one-dimensional binary array back as its text literal (`{"a",NULL}`): what a
/// binary array parameter shows where text is needed.
enum BinaryArrayReader {
    /// The literal of `bytes`, which `BinaryArrayBuilder` wrote.
    static func literal(of bytes: BinaryBytes) throws -> String {
        try bytes.withBytes { raw in
            func int32(_ offset: Int) -> Int32 { Int32(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)) }
            guard raw.count >= 12 else { throw malformed() }
            let dimensions = int32(0)
            let element = UInt32(bitPattern: int32(8))
            var literal = ArrayLiteralBuilder(capacity: 0)
            guard dimensions == 1 else { return literal.text() }
            guard raw.count >= 20 else { throw malformed() }
            var offset = 20
            for _ in 0..<int32(12) {
                guard offset + 4 <= raw.count else { throw malformed() }
                let length = Int(int32(offset))
                offset += 4
                if length < 0 {
                    literal.appendNull()
                    continue
                }
                guard offset + length <= raw.count else { throw malformed() }
                if element == PostgresType.int8.oid, length == 8 {
                    literal.append(Int64(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int64.self)))
                } else if element == PostgresType.tid.oid {
                    guard length == 6 else { throw malformed() }
                    let location = TupleID(
                        block: UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)),
                        offset: UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self)))
                    try literal.append(location.postgresText() ?? "")
                } else {
                    try literal.append(String(decoding: UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)]), as: UTF8.self))
                }
                offset += length
            }
            return literal.text()
        }
    }

    private static func malformed() -> PostgresValueError {
        PostgresValueError(code: .unencodable, swiftType: "array", reason: "binary array is malformed")
    }
}
