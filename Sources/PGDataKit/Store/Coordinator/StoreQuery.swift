/// Which rows of one entity's table a statement reads or deletes, in what order and how
/// many of them.
///
/// The condition and order are SQL over the table alias `t` with `$1…$n` placeholders
/// for `parameters`: the Fetching layer compiles them from a predicate and sort
/// descriptors, and the context makes simple ones from primary keys (`keys(_:of:)`).
/// The Store puts them into whole statements.
struct StoreQuery {
    /// The `WHERE` condition, if any.
    var condition: String?
    /// The values of the condition's placeholders, in order.
    var parameters: [(any PostgresEncodable)?] = []
    /// The `ORDER BY` terms, if any.
    var orderBy: String?
    /// At most this many rows (not negative).
    var limit: Int?
    /// Rows skipped first (not negative).
    var offset: Int = 0
    /// Whether a statement of this query may be prepared by name and keep its plan.
    /// `false` for the library's lookups by a list of keys (`rows(where:isIn:)`) longer
    /// than `StoreCoordinator.shortListLength`, which are planned at each execution: a
    /// plan kept from when the table was small reads the whole table once it is large
    /// (see `PreparedStatementCache`).
    var reusesPlan = true

    /// Every row, in no particular order.
    static let all = StoreQuery()

    /// The rows whose `column` is one of `keys` (one array parameter, so any number of
    /// keys is one statement).
    static func rows(where column: String, isIn keys: [Int64]) -> StoreQuery {
        StoreQuery(condition: isIn(column), parameters: [keys], reusesPlan: StoreCoordinator.reusesPlan(keys: keys.count))
    }

    /// `t.column = ANY($1)`.
    private static func isIn(_ column: String) -> String {
        "t.\(Connection.quoteIdentifier(column)) = ANY($1)"
    }

    /// The rows of an entity with these primary keys.
    static func keys(_ keys: [Int64], of entity: EntityDescription) -> StoreQuery {
        rows(where: entity.primaryKeyColumn, isIn: keys)
    }

    /// The keys of a query that is still exactly what `keys(_:of:)` of `entity` made (no
    /// condition, order or window set since); `nil` for any other query. Statements
    /// that can read such a query another way (`rowsByUniqueColumn`) ask this.
    func primaryKeysOnly(of entity: EntityDescription) -> [Int64]? {
        guard orderBy == nil, limit == nil, offset == 0, parameters.count == 1,
            condition == Self.isIn(entity.primaryKeyColumn)
        else { return nil }
        return parameters[0] as? [Int64]
    }

    /// The condition over `entity`'s rows: `condition`, and for a sub-entity its
    /// discriminator condition (its table holds its whole hierarchy's rows).
    func condition(for entity: EntityDescription) -> String? {
        guard let discriminator = entity.discriminatorCondition else { return condition }
        guard let condition else { return discriminator }
        return discriminator + " AND (" + condition + ")"
    }

    /// The `WHERE … ORDER BY … LIMIT … OFFSET …` tail of a statement over `entity`'s rows
    /// (`condition(for:)`).
    func clauses(for entity: EntityDescription) -> String {
        var sql = ""
        if let condition = condition(for: entity) { sql += " WHERE " + condition }
        if let orderBy { sql += " ORDER BY " + orderBy }
        if let limit { sql += " LIMIT \(Swift.max(0, limit))" }
        if offset > 0 { sql += " OFFSET \(offset)" }
        return sql
    }
}
