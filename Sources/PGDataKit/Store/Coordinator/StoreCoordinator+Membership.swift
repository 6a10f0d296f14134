/// Which of some changed rows of one entity match each of several conditions now: what
/// object controllers ask after a change set, all of them with one statement.
///
/// `keys` is bound as `$1` (one array parameter, so any number of keys is one
/// statement); the conditions are SQL over the table alias `t` whose placeholders count
/// from `$2`, with their values in `parameters`. The Fetching layer compiles them with a
/// compiler that starts from `[keys]` (see `StoreQuery` for the alias and placeholders).
struct MembershipQuery {
    /// The primary keys asked about.
    var keys: [Int64]
    /// One condition per asker; `nil` matches every row.
    var conditions: [String?] = []
    /// The values of `$2`, `$3`, … in order.
    var parameters: [(any PostgresEncodable)?] = []

    /// A question about these keys, with no condition yet.
    init(keys: [Int64]) { self.keys = keys }
}

/// The answer to a `MembershipQuery`: the rows of the keys that match at least one
/// condition, as object rows (`selectColumns` first, so contexts register them as
/// fetched rows), and which conditions each matches (one bit per condition in `bigint`
/// columns after the object columns, 63 conditions a column).
struct MembershipAnswer {
    /// The matching rows, in no particular order.
    let rows: QueryResult
    /// How many conditions were asked.
    let conditionCount: Int
    /// The column of the first flags column.
    let firstFlagColumn: Int

    /// Conditions per flags column (the sign bit stays clear).
    static let conditionsPerColumn = 63

    /// The flags of a row: bit `n % 63` of column `n / 63` is condition `n`.
    func flags(of row: Row) throws -> [Int64] {
        try (0..<((conditionCount + Self.conditionsPerColumn - 1) / Self.conditionsPerColumn)).map {
            try row.decode(Int64.self, at: firstFlagColumn + $0)
        }
    }

    /// Whether flags (from `flags(of:)`) say that a row matches condition number `condition`.
    static func flags(_ flags: [Int64], match condition: Int) -> Bool {
        flags[condition / conditionsPerColumn] & (1 << Int64(condition % conditionsPerColumn)) != 0
    }
}

extension StoreCoordinator {
    /// Asks, in one statement, which of `query.keys` match each condition now, and reads
    /// the rows of those that match any: `SELECT <object columns>, <condition bits>` over
    /// the rows of the keys, keeping the rows with a bit set. A key whose row is gone is
    /// simply absent.
    ///
    /// The rows are read from the primary-key index whatever the planner knows of the
    /// table (`rowsByUniqueColumn`): every process with a controller asks about each
    /// batch of an import, often into a new table without statistics.
    ///
    /// - Throws: `PostgresError`.
    func selectMembership(of entity: EntityDescription, _ query: MembershipQuery, on connection: Connection) throws
        -> MembershipAnswer
    {
        let perColumn = MembershipAnswer.conditionsPerColumn
        var columns: [String] = []
        var start = 0
        while start < query.conditions.count {
            let group = query.conditions[start..<Swift.min(start + perColumn, query.conditions.count)]
            let bits = group.enumerated().map { offset, condition in
                "(CASE WHEN (\(condition ?? "TRUE")) THEN \(Int64(1) << Int64(offset)) ELSE 0 END)"
            }
            columns.append("(\(bits.joined(separator: " | ")))::bigint AS pgdatakit_members_\(columns.count)")
            start += perColumn
        }
        let inner = "SELECT \(([entity.selectList(alias: "t")] + columns).joined(separator: ", ")) "
            + "FROM " + Self.rowsByUniqueColumn(entity, entity.primaryKeyColumn, single: Self.isOneKey(query.keys))
        let anyBit = columns.indices.map { "m.pgdatakit_members_\($0) <> 0" }.joined(separator: " OR ")
        let sql = columns.isEmpty ? inner : "SELECT * FROM (\(inner)) AS m WHERE \(anyBit)"
        let rows = try execute(
            sql, [query.keys] + query.parameters, on: connection, reusesPlan: Self.reusesPlan(keys: query.keys.count))
        return MembershipAnswer(
            rows: rows, conditionCount: query.conditions.count, firstFlagColumn: entity.selectColumns.count)
    }
}
