/// A stored value as its scalar type, `nil` for `NULL`. Binding the optional first
/// matters: passed through `flatMap`'s closure the value reaches `unbox` as `any Sendable`
/// unopened, and every read pays a dynamic cast.
@inlinable
func unboxStored<Scalar>(_ stored: StoredValue, as scalar: Scalar.Type) -> Scalar? {
    if StoredValueLayout.isInline(Scalar.self), StoredValueLayout.isReadable {
        if let read = StoredValueLayout.read(stored, as: Scalar.self) { return read }
    }
    guard let stored else { return nil }
    return unbox(stored, as: Scalar.self)
}

/// `unboxStored` for a value in place (in an array's storage).
@inlinable
func unboxStored<Scalar>(at pointer: UnsafePointer<StoredValue>, as scalar: Scalar.Type) -> Scalar? {
    if StoredValueLayout.isInline(Scalar.self), StoredValueLayout.isReadable,
        let read = StoredValueLayout.read(at: pointer, as: Scalar.self)
    {
        return read
    }
    return unboxStored(pointer.pointee, as: Scalar.self)
}

/// Reads the common scalar types straight out of a `StoredValue`'s box, without copying
/// the box through its type's value witnesses (saves and imports read and compare every
/// value they write, and the generic path costs hundreds of instructions per value).
///
/// A `StoredValue` is an optional existential: three words holding a small value inline,
/// then the value's type metadata (null for `nil`). Only types that are always stored
/// inline (`String`, the integers, `Bool`, `Double`) are read this way, and only after
/// `isReadable` checked that layout once with sample values; otherwise the generic path
/// runs.
@usableFromInline
enum StoredValueLayout {
    /// The byte offset of the metadata word.
    @usableFromInline static let metadataOffset = 3 * MemoryLayout<Int>.size

    /// A type's metadata pointer as a word, as an existential box holds it (no bit cast:
    /// `ObjectIdentifier` of a metatype wraps that pointer).
    @inlinable
    static func metadataWord(of type: Any.Type) -> Int { Int(bitPattern: ObjectIdentifier(type)) }

    /// Whether values of `Scalar` are read from the box directly.
    @inlinable
    static func isInline<Scalar>(_ scalar: Scalar.Type) -> Bool {
        Scalar.self == String.self || Scalar.self == Int.self || Scalar.self == Int64.self || Scalar.self == Int32.self
            || Scalar.self == Int16.self || Scalar.self == Bool.self || Scalar.self == Double.self
    }

    /// The value when the box holds a `Scalar` (`.some(nil)` for `NULL`); `nil` when it
    /// holds another type (the caller takes the generic path).
    @inlinable
    static func read<Scalar>(_ stored: StoredValue, as scalar: Scalar.Type) -> Scalar?? {
        let type = metadataWord(of: Scalar.self)
        return withUnsafeBytes(of: stored) { raw -> Scalar?? in
            let metadata = raw.load(fromByteOffset: metadataOffset, as: Int.self)
            guard metadata != 0 else { return .some(nil) }
            guard metadata == type else { return nil }
            return .some(raw.load(as: Scalar.self))
        }
    }

    /// `read` for a value in place (in an array's storage): nothing is copied but the
    /// scalar.
    @inlinable
    static func read<Scalar>(at pointer: UnsafePointer<StoredValue>, as scalar: Scalar.Type) -> Scalar?? {
        let raw = UnsafeRawPointer(pointer)
        let metadata = raw.load(fromByteOffset: metadataOffset, as: Int.self)
        guard metadata != 0 else { return .some(nil) }
        guard metadata == metadataWord(of: Scalar.self) else { return nil }
        return .some(raw.load(as: Scalar.self))
    }

    /// Whether a value in place is `NULL`, without copying it.
    @inlinable
    static func isNull(at pointer: UnsafePointer<StoredValue>) -> Bool {
        guard isReadable else { return pointer.pointee == nil }
        return UnsafeRawPointer(pointer).load(fromByteOffset: metadataOffset, as: UnsafeRawPointer?.self) == nil
    }

    /// Whether the layout is the one `read` expects, checked with sample values of every
    /// type it reads (the metadata first, so a different layout is never read as a value).
    @usableFromInline static let isReadable: Bool = {
        func holds<T: Equatable & Sendable>(_ value: T) -> Bool {
            let stored: StoredValue = value
            return withUnsafeBytes(of: stored) { raw in
                raw.count == metadataOffset + MemoryLayout<Int>.size
                    && raw.load(fromByteOffset: metadataOffset, as: Int.self) == metadataWord(of: T.self)
                    && raw.load(as: T.self) == value
            }
        }
        let none: StoredValue = nil
        let noneIsNull = withUnsafeBytes(of: none) { raw in
            raw.count == metadataOffset + MemoryLayout<Int>.size
                && raw.load(fromByteOffset: metadataOffset, as: UnsafeRawPointer?.self) == nil
        }
        return noneIsNull && holds("short") && holds("a string too long to be stored in the string itself")
            && holds(Int.min) && holds(Int64.max) && holds(Int32(-3)) && holds(Int16(4)) && holds(true) && holds(2.5)
    }()
}

/// A stored value as its scalar type. The existential is opened (`value` arrives with its
/// dynamic type `T`), so the cast starts from the value's own type: when that is the
/// scalar type (the common case), the runtime's same-type path copies it.
@inlinable
func unbox<T: Sendable, Scalar>(_ value: T, as scalar: Scalar.Type) -> Scalar? {
    value as? Scalar
}
