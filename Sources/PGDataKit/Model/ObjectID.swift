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
        case temporary(UUID)
    }

    /// The entity's name.
    public let entityName: String
    let key: Key

    /// Hashes the key only (cheap); equality still compares the entity name.
    public func hash(into hasher: inout Hasher) {
        switch key {
        case .permanent(let value): hasher.combine(value)
        case .temporary(let uuid): hasher.combine(uuid)
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
        case .temporary(let uuid):
            // Temporary IDs of this process differ in their counter bits (see
            // `randomUUID()`); folding both halves keeps other UUIDs apart too.
            let halves = withUnsafeBytes(of: uuid.uuid) {
                ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            }
            mixed = halves.0 ^ (halves.1 &* 0xFF51_AFD7_ED55_8CCD)
        }
        mixed = mixed ^ UInt64(bitPattern: Int64(seed)) &+ 0x9E37_79B9_7F4A_7C15
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: mixed ^ (mixed >> 31))
    }

    init(entityName: String, primaryKey: Int64) {
        self.entityName = entityName
        self.key = .permanent(primaryKey)
    }

    init(temporaryFor entityName: String) {
        self.entityName = entityName
        self.key = .temporary(ObjectID.randomUUID())
    }

    /// A UUID unique in this process: a random value drawn once, combined with a
    /// counter. `UUID()` opens and reads `/dev/urandom` on every call on Linux, which
    /// dominated inserting thousands of objects; temporary IDs never leave the process.
    private static func randomUUID() -> UUID {
        let count = temporaryCounter.add(1, ordering: .relaxed).newValue
        var bytes = (temporarySeed.0, temporarySeed.1 ^ (count << 8))  // byte 8 stays the seed's
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
            return UUID(uuid: (
                raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }

    private static let temporarySeed: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
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
    /// permanent IDs.
    public var uriRepresentation: URL {
        switch key {
        case .permanent(let value):
            return URL(string: "x-pgdatakit://\(entityName)/\(value)") ?? URL(fileURLWithPath: "/")
        case .temporary(let uuid):
            return URL(string: "x-pgdatakit://\(entityName)/temporary/\(uuid.uuidString)")
                ?? URL(fileURLWithPath: "/")
        }
    }

    /// `User/42` or `User/temporary-…`.
    public var description: String {
        switch key {
        case .permanent(let value): return "\(entityName)/\(value)"
        case .temporary(let uuid): return "\(entityName)/temporary-\(uuid.uuidString.prefix(8))"
        }
    }
}
