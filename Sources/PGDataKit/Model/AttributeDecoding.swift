
/// How fetches decode an attribute's column without generic dispatch: the common scalar
/// types are read straight from the result's text; the rest go through the attribute's
/// decode closure.
enum AttributeDecoding: Sendable {
    case string
    case int
    case int64
    case int32
    case int16
    case bool
    case generic

    init<Scalar: AttributeScalar>(_ scalar: Scalar.Type) {
        switch scalar {
        case is String.Type: self = .string
        case is Int.Type: self = .int
        case is Int64.Type: self = .int64
        case is Int32.Type: self = .int32
        case is Int16.Type: self = .int16
        case is Bool.Type: self = .bool
        default: self = .generic
        }
    }

    // Unsafe: `bytes` is borrowed for the call: a `QueryResult.fieldBytes` cell of the result
    // the caller holds (`apply`'s parameter); a string is copied out, nothing else is kept.
    /// The stored value of a non-NULL cell, or `nil` when this fast path cannot read it
    /// (the caller then decodes through the attribute's closure, which names the error).
    @inline(__always)
    func decode(_ bytes: UnsafeBufferPointer<UInt8>) -> StoredValue? {
        switch self {
        case .string: return .string(Self.text(bytes))
        case .int: return Self.integer(bytes).map { .int($0) }
        case .int64: return Self.integer(bytes).map { .int64(Int64($0)) }
        case .int32: return Self.integer(bytes).flatMap { Int32(exactly: $0) }.map { .int32($0) }
        case .int16: return Self.integer(bytes).flatMap { Int16(exactly: $0) }.map { .int16($0) }
        case .bool:
            guard bytes.count == 1 else { return nil }
            switch bytes[0] {
            case UInt8(ascii: "t"): return .bool(true)
            case UInt8(ascii: "f"): return .bool(false)
            default: return nil
            }
        case .generic: return nil
        }
    }

    // Unsafe: `bytes` is borrowed for the call (the caller holds the `QueryResult` whose
    // `fieldBytes` they are) and copied out.
    /// A cell's text, as `String(decoding:as: UTF8.self)` reads it (invalid UTF-8 repaired).
    /// Up to 15 ASCII bytes (keys, codes, short names) are written as an inline string
    /// (`SmallText`); up to 15 others are copied straight into a small string, which
    /// checks whether they are valid UTF-8 (callgrind: about 50 instructions fewer a string
    /// than the general way); longer text is validated as it comes.
    @inline(__always)
    static func text(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        guard bytes.count <= 15 else { return String(decoding: bytes, as: UTF8.self) }
        if let ascii = SmallText.string(bytes) { return ascii }
        // Unsafe: the new string's buffer, `bytes.count` long, is filled from `bytes` (the
        // caller's borrowed cell) and that count returned.
        return String(unsafeUninitializedCapacity: bytes.count) { buffer in
            buffer.initialize(fromContentsOf: bytes)
        }
    }

    // Unsafe: `bytes` is borrowed for the call (the caller holds the `QueryResult` whose
    // `fieldBytes` they are) and only read.
    /// A decimal integer in PostgreSQL's text form, or `nil` (empty, stray characters,
    /// overflow).
    @inline(__always)
    static func integer(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        Row.decimal(bytes).flatMap { Int(exactly: $0) }
    }
}

extension FieldReader {
    // Unsafe: the text and length are libpq's for the loaded row's field (`load(row:)`),
    // valid while the caller holds the result; `column` is checked against the columns.
    /// The loaded row's field in `column`: its bytes, `nil` for `NULL` (as
    /// `QueryResult.fieldBytes(row:column:)`). Here, not beside `FieldReader`, so that a
    /// fetch's per-field read is inlined (a call into the other module per field cost
    /// what reading the row in one call saved).
    ///
    /// - Precondition: `column` is one of the result's columns.
    @inline(__always)
    func bytes(_ column: Int) -> UnsafeBufferPointer<UInt8>? {
        precondition(column >= 0 && column < values.count, "no such column in the result")
        guard let start = values[column] else { return nil }
        // Unsafe: as above; `lengths` has an entry per column, like `values`.
        return UnsafeBufferPointer(start: start, count: Int(lengths[column]))
    }
}
