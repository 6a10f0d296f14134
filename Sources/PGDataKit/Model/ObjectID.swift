import Foundation
import Synchronization

/// Identifies a managed object across contexts and threads.
///
/// An object inserted into a context has a temporary ID until it is first saved; then it
/// gets a permanent one built from its primary key. IDs are `Sendable`: pass them
/// between contexts and fetch the object in the other context with
/// `context.object(with:)` or `existingObject(with:)`.
///
/// For example:
///
/// ```swift
/// let id = try privateContext.performAndWait { () throws -> ObjectID in
///     let user = User(context: privateContext)
///     user.userID = "u1"
///     try privateContext.save()
///     return user.objectID
/// }
/// let user = try manager.mainContext.performAndWait {
///     try manager.mainContext.existingObject(with: id) as? User
/// }
/// ```
public struct ObjectID: Hashable, Sendable, CustomStringConvertible {
    enum Key: Hashable, Sendable {
        case permanent(Int64)
        /// A UUID's 16 bytes as two little-endian words, in memory order (`temporaryUUID`
        /// makes the `UUID`): two integers hash, compare and copy inline, where a `UUID`
        /// payload cost a call into Foundation to make and a value witness to copy.
        case temporary(UInt64, UInt64)
    }

    /// The entity's name.
    public let entityName: String
    let key: Key

    /// Hashes the key only (cheap); equality still compares the entity name.
    public func hash(into hasher: inout Hasher) {
        switch key {
        case .permanent(let value): hasher.combine(value)
        case .temporary(let low, let high):
            hasher.combine(low)
            hasher.combine(high)
        }
    }

    /// The hash dictionaries use (Swift's `Hashable` hook for it): the primary key (or the
    /// temporary UUID's bits) mixed with the table's seed in a few instructions
    /// (splitmix64) instead of a full SipHash round — contexts hash an ID for every
    /// object they fetch or insert.
    public func _rawHashValue(seed: Int) -> Int {
        var mixed: UInt64
        switch key {
        case .permanent(let value):
            mixed = UInt64(bitPattern: value)
        case .temporary(let low, let high):
            // Temporary IDs of this process differ in their counter bits (see
            // `temporaryKey()`); folding both halves keeps other UUIDs apart too.
            mixed = low ^ (high &* 0xFF51_AFD7_ED55_8CCD)
        }
        return FastHash.mix(mixed, seed: seed)
    }

    init(entityName: String, primaryKey: Int64) {
        self.entityName = entityName
        self.key = .permanent(primaryKey)
    }

    private init(entityName: String, key: Key) {
        self.entityName = entityName
        self.key = key
    }

    init(temporaryFor entityName: String) {
        self.entityName = entityName
        self.key = ObjectID.temporaryKey()
    }

    /// The key of a UUID unique in this process: a random value drawn once, combined with
    /// a counter. `UUID()` opens and reads `/dev/urandom` on every call on Linux, which
    /// dominated inserting thousands of objects; temporary IDs never leave the process.
    private static func temporaryKey() -> Key {
        let count = temporaryCounter.add(1, ordering: .relaxed).newValue
        // The counter goes in bytes 9 to 15 (byte 8 keeps the variant): the words are the
        // UUID's bytes as little-endian integers.
        return .temporary(temporaryWords.0.littleEndian, (temporaryWords.1 ^ (count << 8)).littleEndian)
    }

    /// The temporary key of `uuid` (its bytes as two words in memory order).
    private static func temporaryKey(_ uuid: UUID) -> Key {
        let words = uuid.memoryWords
        return .temporary(words.0, words.1)
    }

    /// The UUID of a temporary key's two words.
    private static func uuid(_ low: UInt64, _ high: UInt64) -> UUID {
        UUID(memoryWords: (low, high))
    }

    /// The UUID of a temporary ID (`nil` for a permanent one): the one its URI names.
    var temporaryUUID: UUID? {
        guard case .temporary(let low, let high) = key else { return nil }
        return ObjectID.uuid(low, high)
    }

    /// A random UUID drawn once, as two little-endian words, with the version 4 and the
    /// RFC 4122 variant bits set (bytes 6 and 8).
    private static let temporaryWords: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        let first: UInt64 = generator.next()
        let second: UInt64 = generator.next()
        return ((first & ~(0xF0 << 48)) | (0x40 << 48), (second & ~0xC0) | 0x80)
    }()
    private static let temporaryCounter = Atomic<UInt64>(0)

    /// Whether the object has not been saved yet.
    public var isTemporaryID: Bool {
        if case .temporary = key { return true }
        return false
    }

    /// The row's primary key, once the object has been saved.
    public var primaryKey: Int64? {
        if case .permanent(let value) = key { return value }
        return nil
    }

    /// A URI such as `x-pgdatakit://User/42` (or `…/temporary/<uuid>`), stable for
    /// permanent IDs: send it to another process and turn it back into the ID there with
    /// `ObjectID(uriRepresentation:)` or `StoreCoordinator.objectID(forURIRepresentation:)`
    /// (Core Data's `managedObjectID(forURIRepresentation:)`).
    ///
    /// ```swift
    /// let message = user.objectID.uriRepresentation.absoluteString   // "x-pgdatakit://User/42"
    /// // … in another process:
    /// if let url = URL(string: message), let id = manager.coordinator.objectID(forURIRepresentation: url) {
    ///     let user = try manager.mainContext.existingObject(with: id) as? User
    /// }
    /// ```
    public var uriRepresentation: URL {
        URL(string: uriString) ?? URL(fileURLWithPath: "/")
    }

    /// `uriRepresentation` as text (the entity name percent-encoded where needed).
    var uriString: String {
        let entity = entityName.addingPercentEncoding(withAllowedCharacters: .urlHostAllowed) ?? entityName
        switch key {
        case .permanent(let value): return "\(ObjectID.uriScheme)://\(entity)/\(value)"
        case .temporary(let low, let high):
            return "\(ObjectID.uriScheme)://\(entity)/temporary/\(ObjectID.uuid(low, high).uuidString)"
        }
    }

    /// The scheme of `uriRepresentation`.
    static let uriScheme = "x-pgdatakit"

    /// The ID a `uriRepresentation` stands for; `nil` for anything else. A temporary ID
    /// reads back as itself (it names an unsaved object of the process that made it,
    /// which `existingObject(with:)` finds only there); a permanent one names a row of
    /// any process's store.
    ///
    /// - Parameter uri: `x-pgdatakit://<Entity>/<primary key>` or
    ///   `x-pgdatakit://<Entity>/temporary/<uuid>`.
    public init?(uriRepresentation uri: URL) {
        guard uri.scheme == ObjectID.uriScheme, let host = uri.host, let entity = host.removingPercentEncoding,
            !entity.isEmpty
        else { return nil }
        let parts = uri.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        switch parts.count {
        case 1:
            guard let first = parts.first, let key = Int64(first), key > 0 else { return nil }
            self.init(entityName: entity, primaryKey: key)
        case 2:
            guard parts.first == "temporary", let last = parts.last, let uuid = UUID(uuidString: String(last)) else {
                return nil
            }
            self.init(entityName: entity, key: ObjectID.temporaryKey(uuid))
        default:
            return nil
        }
    }

    /// `User/42` or `User/temporary-…`.
    public var description: String {
        switch key {
        case .permanent(let value): return "\(entityName)/\(value)"
        case .temporary(let low, let high): return "\(entityName)/temporary-\(ObjectID.uuid(low, high).uuidString.prefix(8))"
        }
    }
}

extension ObjectID: Codable {
    /// Reads the `uriRepresentation` text an ID is encoded as.
    ///
    /// - Throws: `DecodingError.dataCorrupted` for text that is not an object ID's URI.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let url = URL(string: text), let id = ObjectID(uriRepresentation: url) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not a PGDataKit object ID URI"))
        }
        self = id
    }

    /// Encodes the ID as its `uriRepresentation` text, so it can travel in messages.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(uriString)
    }
}

extension UUID {
    /// The UUID's 16 bytes as two words in memory order (bytes 0–7, then 8–15): compared,
    /// hashed and stored without the sixteen one-byte fields of `uuid_t`.
    var memoryWords: (UInt64, UInt64) {
        // Unsafe: a `uuid_t` (16 `UInt8`s) is 16 bytes, two `UInt64`s in memory order.
        unsafeBitCast(uuid, to: (UInt64, UInt64).self)
    }

    /// The UUID whose 16 bytes are `memoryWords` in memory order (`memoryWords`' inverse).
    init(memoryWords: (UInt64, UInt64)) {
        // Unsafe: two `UInt64`s are 16 bytes, the size of a `uuid_t` (16 `UInt8`s), in
        // memory order; every bit pattern is a valid `uuid_t`.
        self.init(uuid: unsafeBitCast(memoryWords, to: uuid_t.self))
    }
}
