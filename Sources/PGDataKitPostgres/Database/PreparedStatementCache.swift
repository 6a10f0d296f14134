/// The named prepared statements of one session, by SQL text and parameter types, least
/// recently used first out.
///
/// A statement sent with parameters is parsed and planned by the server once per session
/// (`PQprepare`) and afterwards only bound and executed (`PQexecPrepared`): for the large
/// `unnest` statements of a batch import that saves a parse and, more, the planning of a
/// statement whose parameters are thousand-element arrays. The cache is bounded: when it is
/// full, adding a statement evicts the least recently used one, whose name waits in
/// `evicted` until the connection sends its `DEALLOCATE`. Names are never reused within a
/// session (nor shared between sessions: each has a random prefix), so a statement whose `DEALLOCATE` has not reached the server yet cannot be
/// confused with a newer one.
///
/// A prepared statement keeps its plan: after five executions PostgreSQL settles on a
/// generic plan, made for the table as it was then, and keeps it until the table's
/// statistics change (an `ANALYZE`: autovacuum's, at most once a minute, or anyone's).
/// A statement that finds rows by a list of keys or locations and is planned while its
/// table is small (new, truncated, or an import's first batches) reads the whole table
/// and compares every row with every element once the table has grown: 1.0 s for 1,000
/// keys in 100,000 rows where the index takes 1.4 ms. The library sends such statements
/// over long lists unprepared (`Connection.execute(_:_:reusesPlan:)`): planned at each
/// execution, for the table as it is (0.1–0.3 ms each).
///
/// Not thread-safe: `Connection` keeps it under its lock.
struct PreparedStatementCache {
    /// What identifies a prepared statement: its SQL and the type OIDs it was prepared with
    /// (the same SQL with other parameter types is another statement).
    struct Key: Hashable {
        var sql: String
        var types: [UInt32]

        /// Hashes the text's length and at most its first and last 48 bytes, not all of it:
        /// a save looks up several statements of hundreds of bytes each, and hashing them
        /// whole was a tenth of a one-row save's client instructions. The types and those
        /// bytes go in folded into two words (fed to the hasher as they were, one call per
        /// parameter type and a byte-wise pass over the 96 bytes, a hash cost half as much
        /// again: about 870 instructions where it now costs 580). Keys that share all of
        /// those only share a bucket; equality still compares them whole.
        func hash(into hasher: inout Hasher) {
            var folded = UInt64(truncatingIfNeeded: types.count)
            for type in types { folded = folded &* Self.multiplier &+ UInt64(type) }
            hasher.combine(folded)
            let utf8 = sql.utf8
            hasher.combine(utf8.count)
            let hashed: Void? = utf8.withContiguousStorageIfAvailable { bytes in
                let raw = UnsafeRawBufferPointer(bytes)
                hasher.combine(Self.fold(UnsafeRawBufferPointer(rebasing: raw.prefix(48))))
                if raw.count > 48 {
                    hasher.combine(Self.fold(UnsafeRawBufferPointer(rebasing: raw.suffix(Swift.min(48, raw.count - 48)))))
                }
            }
            if hashed == nil { hasher.combine(sql) }
        }

        /// An odd 64-bit multiplier (FNV's prime) for folding.
        private static var multiplier: UInt64 { 0x100_0000_01B3 }

        /// Up to 48 bytes folded into one word, eight at a time, then the rest byte by byte.
        private static func fold(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
            var folded = UInt64(truncatingIfNeeded: bytes.count)
            var offset = 0
            // Unsafe: each load reads 8 bytes at `offset`, which leaves at least 8 in the
            // buffer (unaligned: the text's bytes have no alignment).
            while offset + 8 <= bytes.count {
                folded = (folded ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* multiplier
                offset += 8
            }
            while offset < bytes.count {
                folded = (folded ^ UInt64(bytes[offset])) &* multiplier
                offset += 1
            }
            return folded
        }
    }

    /// How many statements the cache holds; 0 prepares nothing.
    let capacity: Int
    /// Statement name and last use, by key.
    private var entries: [Key: (name: String, lastUse: UInt64)] = [:]
    private var clock: UInt64 = 0
    private var nextNumber = 0
    /// Names evicted from the cache whose `DEALLOCATE` has not been confirmed yet.
    private(set) var evicted: [String] = []

    /// What this cache's statement names start with, after `pgdatakit_`: random per
    /// cache (per session), so that a pooler which hands this session's statements to
    /// another client's server process makes them fail as unknown (`26000`) instead of
    /// running that client's statement of the same name.
    let namePrefix: String

    /// An empty cache for up to `capacity` statements (negative counts as 0).
    init(capacity: Int) {
        self.capacity = max(0, capacity)
        self.namePrefix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    }

    /// How many statements are prepared (or being prepared).
    var count: Int { entries.count }

    /// The name of the prepared statement for a key, marking it as just used, or `nil`.
    mutating func name(for key: Key) -> String? {
        guard let index = entries.index(forKey: key) else { return nil }
        clock &+= 1
        entries.values[index].lastUse = clock
        return entries.values[index].name
    }

    /// Registers a new statement for a key and returns its name, or `nil` when the cache
    /// is disabled. A full cache evicts its least recently used statement first.
    mutating func add(_ key: Key) -> String? {
        guard capacity > 0 else { return nil }
        if entries.count >= capacity, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            entries[oldest.key] = nil
            evicted.append(oldest.value.name)
        }
        nextNumber += 1
        clock &+= 1
        let name = "pgdatakit_\(namePrefix)_\(nextNumber)"
        entries[key] = (name, clock)
        return name
    }

    /// Forgets a key's statement (its preparation failed, or the server no longer knows it).
    mutating func remove(_ key: Key) {
        entries[key] = nil
    }

    /// Forgets every statement (a new session, or the server dropped them all).
    mutating func removeAll() {
        entries.removeAll()
        evicted.removeAll()
    }

    /// Marks evicted names as deallocated on the server.
    mutating func deallocated(_ names: some Collection<String>) {
        let done = Set(names)
        evicted.removeAll { done.contains($0) }
    }
}
