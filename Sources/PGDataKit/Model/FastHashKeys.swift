/// Hashing for the library's own dictionaries of row keys and object identities: one round
/// of splitmix64's finalizer over the key's bits and the dictionary's seed, where the
/// standard library hashes an `Int64` or an `ObjectIdentifier` with SipHash (about 60
/// instructions a lookup; a save looks up thousands of rows per batch). The seed is the
/// dictionary's (random per process), so keys cannot be picked to collide without it.
enum FastHash {
    /// The hash of `bits` for a dictionary seeded with `seed`.
    @inline(__always)
    static func mix(_ bits: UInt64, seed: Int) -> Int {
        var mixed = bits ^ UInt64(bitPattern: Int64(seed)) &+ 0x9E37_79B9_7F4A_7C15
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: mixed ^ (mixed >> 31))
    }
}

/// A row's primary key as a dictionary key, hashed by `FastHash`.
struct RowKey: Hashable, Sendable {
    /// The primary key.
    let value: Int64

    init(_ value: Int64) { self.value = value }

    func hash(into hasher: inout Hasher) { hasher.combine(value) }

    func _rawHashValue(seed: Int) -> Int { FastHash.mix(UInt64(bitPattern: value), seed: seed) }
}

/// A transaction id (`xid8`) as a set member, hashed by `FastHash`: a listener notes one
/// per notification, and `Set<UInt64>` hashed each with SipHash.
struct TransactionKey: Hashable, Sendable, ExpressibleByIntegerLiteral {
    /// The transaction id.
    let value: UInt64

    init(_ value: UInt64) { self.value = value }

    init(integerLiteral value: UInt64) { self.value = value }

    func hash(into hasher: inout Hasher) { hasher.combine(value) }

    func _rawHashValue(seed: Int) -> Int { FastHash.mix(value, seed: seed) }
}

/// An object's identity as a dictionary key, hashed by `FastHash`.
struct ObjectKey: Hashable, Sendable {
    /// The object's identity.
    let id: ObjectIdentifier

    init(_ object: AnyObject) { id = ObjectIdentifier(object) }

    func hash(into hasher: inout Hasher) { hasher.combine(id) }

    func _rawHashValue(seed: Int) -> Int { FastHash.mix(UInt64(UInt(bitPattern: id)), seed: seed) }
}
