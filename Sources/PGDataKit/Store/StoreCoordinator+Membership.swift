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
/// fetched rows), and which conditions each matches.
struct MembershipAnswer {
    /// The matching rows, in no particular order.
    let rows: QueryResult
    /// How many conditions were asked.
    let conditionCount: Int
    /// The column of the first condition's flag.
    let firstFlagColumn: Int

    /// Whether a row matches condition number `condition`.
    func row(_ row: Row, matches condition: Int) throws -> Bool {
        try row.decode(Bool.self, at: firstFlagColumn + condition)
    }
}

extension StoreCoordinator {
    /// Asks, in one statement, which of `query.keys` match each condition now, and reads
    /// the rows of those that match any: `SELECT <object columns>, <one flag per
    /// condition> FROM table WHERE pk = ANY($1)`, keeping the rows with a flag set.
    /// A key whose row is gone is simply absent.
    ///
    /// - Throws: `PostgresError`.
    func selectMembership(of entity: EntityDescription, _ query: MembershipQuery, on connection: Connection) throws
        -> MembershipAnswer
    {
        let flags = query.conditions.enumerated().map { offset, condition in
            "COALESCE((\(condition ?? "TRUE")), false) AS pgdatakit_member_\(offset)"
        }
        let anyFlag = query.conditions.indices.map { "m.pgdatakit_member_\($0)" }.joined(separator: " OR ")
        let inner = "SELECT \(([entity.selectList(alias: "t")] + flags).joined(separator: ", ")) "
            + "FROM \(entity.quotedTable) AS t WHERE \(entity.qualifiedPrimaryKey) = ANY($1)"
        let sql = query.conditions.isEmpty ? inner : "SELECT * FROM (\(inner)) AS m WHERE \(anyFlag)"
        let rows = try execute(sql, [query.keys] + query.parameters, on: connection)
        return MembershipAnswer(
            rows: rows, conditionCount: query.conditions.count, firstFlagColumn: entity.selectColumns.count)
    }
}
