/// How strongly a save locks a row before writing (PostgreSQL's row-level lock modes).
enum RowLockMode: Int16, Comparable, Sendable {
    /// `FOR KEY SHARE`: a row other rows of the save will reference (what a foreign-key
    /// check takes); it stops the row from being deleted or its key changed.
    case keyShare = 1
    /// `FOR NO KEY UPDATE`: a row the save updates without changing a key column.
    case noKeyUpdate = 2
    /// `FOR UPDATE`: a row the save deletes, or whose unique (key) column it changes.
    case update = 3

    static func < (a: RowLockMode, b: RowLockMode) -> Bool { a.rawValue < b.rawValue }

    /// The locking clause.
    var clause: String {
        switch self {
        case .keyShare: return "FOR KEY SHARE"
        case .noKeyUpdate: return "FOR NO KEY UPDATE"
        case .update: return "FOR UPDATE"
        }
    }
}

/// The rows of one entity a save locks before it writes, each with the strongest mode
/// it needs.
struct RowLockSet {
    /// Rows as they were added: a key may come more than once (`ordered` keeps its
    /// strongest mode). Appending is all a save's per-object pass does; sorting and
    /// merging happen once, for the statement.
    private var keys: [Int64] = []
    private var modes: [RowLockMode] = []
    /// The rows' locations where the save knows them for this transaction (see
    /// `RowLocation`), `nil` for the others.
    private var locations: [RowLocation?] = []

    var isEmpty: Bool { keys.isEmpty }

    /// Adds a row; when it is there already, the stronger mode wins.
    mutating func add(_ key: Int64, _ mode: RowLockMode, location: RowLocation? = nil) {
        keys.append(key)
        modes.append(mode)
        locations.append(location)
    }

    /// When every row has a location and all take one mode other than `FOR KEY SHARE`
    /// (rows the save updates or deletes, found by an import's fetch in this
    /// transaction): the locations, each row once, with the number of rows and the mode.
    var located: (locations: [RowLocation], rows: Int, mode: RowLockMode)? {
        guard let mode = modes.first, mode != .keyShare, modes.allSatisfy({ $0 == mode }) else { return nil }
        var byKey: [RowKey: RowLocation] = [:]
        byKey.reserveCapacity(keys.count)
        for (key, location) in zip(keys, locations) {
            guard let location else { return nil }
            // (Two locations for one key would be two versions of its row: not trusted.)
            if let known = byKey.updateValue(location, forKey: RowKey(key)), known != location { return nil }
        }
        return (Array(byKey.values), byKey.count, mode)
    }

    /// The modes the rows take. (A bit per mode while scanning: a set built from a
    /// batch's thousand entries hashes each.)
    var modesUsed: Set<RowLockMode> {
        var bits = 0
        for mode in modes { bits |= 1 << Int(mode.rawValue) }
        return Set([RowLockMode.keyShare, .noKeyUpdate, .update].filter { bits & (1 << Int($0.rawValue)) != 0 })
    }

    /// The one row when the set holds a single row (added once or more), with its
    /// strongest mode; `nil` for none or several.
    var onlyRow: (key: Int64, mode: RowLockMode)? {
        guard let first = keys.first, keys.allSatisfy({ $0 == first }) else { return nil }
        return (first, modes.max() ?? .keyShare)
    }

    /// The keys in ascending order, each once with its strongest mode: the order locks
    /// are taken in.
    var ordered: (keys: [Int64], modes: [Int16]) {
        let order = keys.indices.sorted { keys[$0] < keys[$1] }
        var orderedKeys: [Int64] = []
        var orderedModes: [Int16] = []
        orderedKeys.reserveCapacity(order.count)
        orderedModes.reserveCapacity(order.count)
        for index in order {
            let mode = modes[index].rawValue
            if let last = orderedKeys.last, last == keys[index] {
                orderedModes[orderedModes.count - 1] = max(orderedModes[orderedModes.count - 1], mode)
            } else {
                orderedKeys.append(keys[index])
                orderedModes.append(mode)
            }
        }
        return (orderedKeys, orderedModes)
    }
}

/// Where the rows of one entity that a save locked to write are, while its transaction
/// holds them: a `tid[]` parameter, for the save's `UPDATE` and `DELETE`
/// (`StoreCoordinator.rowsByLocation`).
struct LockedLocations {
    /// The locations, a `tid[]` parameter: in binary when built from the locations an
    /// import read, the lock statement's text (`{"(0,1)","(0,2)",…}`) otherwise.
    let parameter: any PostgresEncodable
    /// How many rows the save locked to write (the locations lack those not found).
    let rows: Int
    /// Whether the rows were found by the locations an import read (otherwise by key,
    /// the locations coming back from the lock statement).
    let byLocation: Bool

    /// Whether a statement that writes `count` of the rows had better find them by
    /// location: it then reads every row of the locations, so at least half of them.
    func suits(_ count: Int) -> Bool { count * 2 >= rows }
}

/// The lock order of saves.
///
/// Every save takes the row locks it needs in one global order, so two saves (or
/// imports) of PGDataKit over overlapping rows wait for each other at most, and never in
/// a cycle (a deadlock, which PostgreSQL finds only after `deadlock_timeout`):
///
/// 1. Existing rows first, entity by entity in the model's insert order (referenced
///    entities before those that reference them), each entity's rows in ascending
///    primary-key order, with one statement per entity (`lockRows`): rows to delete or
///    whose key column changes `FOR UPDATE`, rows to update `FOR NO KEY UPDATE`, and the
///    existing rows the save's new or changed foreign keys point at `FOR KEY SHARE` —
///    the lock the foreign-key check would take later, taken now in order. Rows that an
///    import read in the save's own repeatable-read transaction are found by location
///    instead (`RowLocation`: no index probe), sorted by primary key and locked in that
///    order, when every row of the entity was read so and takes one mode.
/// 2. Then new unique keys, entity by entity in the same order, each entity's keys in
///    ascending byte order in one statement (`claimRows`: `INSERT … ON CONFLICT DO
///    NOTHING`, which waits for a concurrent insert of the same key and never for a row
///    that exists). Keys whose rows exist are written by upserts after the claim, once
///    their rows are locked: in step 1 when the save looked them up
///    (`lockRowsInOrder(keyedRows: true)`), otherwise after the claim without waiting
///    (`NOWAIT`, which cannot close a cycle); a row held elsewhere sends the save to a
///    redo that looks it up first (`KeyedInsertsMetUnlockedRows`).
/// 3. Then the writes themselves (inserts, updates, deletes, join rows), which find
///    every row they lock already locked by the save. (A save that only updates one row
///    sends no lock statement: waiting for that row while holding nothing else, it
///    cannot close a cycle.)
///
/// A wait that remains (another program's locks, a row inserted by a transaction that
/// committed between the save's lock statement and its upsert) is bounded by
/// `ConnectionConfiguration.lockTimeout`.
extension StoreCoordinator {
    /// Locks rows of one entity in ascending primary-key order, each in its mode, with
    /// one statement (a probe of the primary-key index per row, in the order of the
    /// array). Rows that do not exist (any more) are skipped: the writes that follow
    /// find out and report conflicts as before.
    ///
    /// Rows the set knows the locations of (`RowLockSet.located`: the save runs in the
    /// repeatable-read transaction whose import read them; the caller adds locations only
    /// then) are found by location, with no probe of the primary-key index: one statement
    /// that sorts the rows by primary key and locks them in that order. When a location
    /// finds no row (the transaction itself changed or deleted the row since it read it,
    /// so the version there is no longer visible to it), the rows are locked by key as
    /// usual: the rows not found by location are then ones the transaction already
    /// holds, so that statement waits for none of them and the order holds.
    /// - Returns: the locations of the rows locked to be written (`FOR UPDATE` or `FOR
    ///   NO KEY UPDATE`), which stay theirs while the transaction holds them: the save's
    ///   `UPDATE` and `DELETE` then find the rows by location too. `nil` when the save
    ///   locks no row to write.
    @discardableResult
    func lockRows(
        of entity: EntityDescription, _ locks: RowLockSet, on connection: Connection
    ) throws -> LockedLocations? {
        guard !locks.isEmpty else { return nil }
        if let located = locks.located {
            let array = RowLocation.binaryArray(located.locations)
            let locked = try execute(
                Self.lockRowsByLocationSQL(entity, located.mode), [array], on: connection,
                reusesPlan: Self.reusesPlan(keys: located.locations.count)
            ).first.map { try $0.int64(at: 0) }
            if locked == Int64(located.rows) { return LockedLocations(parameter: array, rows: located.rows, byLocation: true) }
        }
        let (keys, modes) = locks.ordered
        let modesUsed = locks.modesUsed
        let result = try execute(
            Self.lockRowsSQL(entity, modes: modesUsed), modesUsed.count == 1 ? [keys] : [keys, modes], on: connection,
            reusesPlan: Self.reusesPlan(keys: keys.count))
        let writing = modes.filter { $0 != RowLockMode.keyShare.rawValue }.count
        guard writing > 0 else { return nil }
        return LockedLocations(
            parameter: ArrayLiteral<String>(text: try result.first?.decode(String?.self, at: 0) ?? "{}"), rows: writing,
            byLocation: false)
    }

    /// The statement of `lockRows` by key. It returns the locations (`tid[]`) of the
    /// rows it locked to be written, or their count when it locks none so.
    ///
    /// When all rows take one mode (a save that only updates, only deletes or only
    /// references rows: the common case), it reads the rows of the keys of array `$1`
    /// with one scan of the primary-key index (`anyElement(of:type:)`: an index scan
    /// whatever the planner knows of the table), sorts
    /// them by key and locks them in that order (PostgreSQL locks after sorting). Server
    /// time for 1,000 rows of 100,000 (`scripts/save-statements`, `sorted`): 1.9 ms
    /// against 2.4 ms for a probe per key.
    ///
    /// Otherwise, for each key of array `$1` in order, one lateral probe per mode the rows
    /// take, only the one of the key's mode (`$2`) running.
    static func lockRowsSQL(_ entity: EntityDescription, modes: Set<RowLockMode> = [.update, .noKeyUpdate, .keyShare]) -> String {
        let primaryKey = Connection.quoteIdentifier(entity.primaryKeyColumn)
        if modes.count == 1, let mode = modes.first {
            let rows = "SELECT u.ctid AS r FROM \(entity.quotedTable) AS u "
                + "WHERE u.\(primaryKey) = \(anyElement(of: 1, type: "bigint")) ORDER BY u.\(primaryKey) \(mode.clause)"
            return (mode == .keyShare ? "SELECT count(*)" : "SELECT array_agg(l.r)") + " FROM (\(rows)) AS l"
        }
        let writing = [RowLockMode.update, .noKeyUpdate].filter(modes.contains).map { "l\($0.rawValue).r" }
        let location = "COALESCE(\(writing.joined(separator: ", ")))"
        var sql = "SELECT "
            + (writing.isEmpty ? "count(*)" : "array_agg(\(location)) FILTER (WHERE \(location) IS NOT NULL)")
            + " FROM unnest($1::bigint[], $2::smallint[]) WITH ORDINALITY AS k(v, m, o)"
        for mode in [RowLockMode.update, .noKeyUpdate, .keyShare] where modes.contains(mode) {
            sql += " LEFT JOIN LATERAL (SELECT u.ctid AS r FROM \(entity.quotedTable) AS u WHERE k.m = \(mode.rawValue) AND "
                + "u.\(primaryKey) = k.v \(mode.clause)) AS l\(mode.rawValue) ON true"
        }
        return sql
    }

    /// The statement of `lockRows` by location: the rows at the locations of `tid[]`
    /// array `$1` (a TID scan whatever the plan, see `anyElement(of:type:)`), sorted by
    /// primary key, locked in that order (PostgreSQL locks after sorting); returns how
    /// many it locked.
    static func lockRowsByLocationSQL(_ entity: EntityDescription, _ mode: RowLockMode) -> String {
        "SELECT count(*) FROM (SELECT 1 FROM \(entity.quotedTable) AS u WHERE u.ctid = \(anyElement(of: 1, type: "tid")) "
            + "ORDER BY u.\(Connection.quoteIdentifier(entity.primaryKeyColumn)) \(mode.clause)) AS l"
    }

    /// Locks the rows whose unique `attribute` is one of `values`, in `mode`, without
    /// waiting (`NOWAIT`): rows a save's keyed inserts met after claiming their new keys
    /// (see `claimKeyedInsertKeys`). Rows the save locked already are taken at once;
    /// waiting for any other, while holding new keys, could close a cycle. The values are
    /// read from the unique index in every plan (`anyElement(of:type:)`).
    ///
    /// - Throws: `PostgresError` with `.lockNotAvailable` (`55P03`, transient) when
    ///   another transaction holds one of the rows; `PostgresValueError`.
    func lockRowsWithoutWaiting(
        of entity: EntityDescription, whereUnique attribute: AttributeDescription, isIn values: [StoredValue],
        mode: RowLockMode, on connection: Connection
    ) throws {
        let column = Connection.quoteIdentifier(attribute.columnName)
        try execute(
            "SELECT count(*) FROM (SELECT 1 FROM \(entity.quotedTable) AS t "
                + "WHERE t.\(column) = \(Self.anyElement(of: 1, type: attribute.type.sqlType)) "
                + "\(mode.clause) NOWAIT) AS locked",
            [try attribute.encodeColumn(values)], on: connection, reusesPlan: Self.reusesPlan(keys: values.count))
    }
}
