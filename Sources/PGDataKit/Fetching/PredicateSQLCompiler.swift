import Foundation

/// Compiles predicates and sort descriptors to SQL over an entity's table, with every
/// value bound as a parameter and every identifier quoted.
///
/// Comparisons are two-valued, like `NSPredicate` and the in-memory evaluator: in a
/// positive position a plain SQL comparison suffices (a `NULL` result excludes the row,
/// as false would), and under `NOT` comparisons are wrapped in `COALESCE(…, false)`.
/// Each comparison is planned first (`ComparisonPlanner`, shared with the evaluator),
/// then written out (`PredicateSQLCompiler+Comparison.swift`).
struct PredicateSQLCompiler {
    let model: Model
    var parameters: [(any PostgresEncodable)?]
    private var aliasCount = 0
    let format: String?

    init(model: Model, parameters: [(any PostgresEncodable)?] = [], format: String? = nil) {
        self.model = model
        self.parameters = parameters
        self.format = format
    }

    mutating func bind(_ value: (any PostgresEncodable)?) -> String {
        parameters.append(value)
        return "$\(parameters.count)"
    }

    mutating func newAlias() -> String {
        aliasCount += 1
        return "a\(aliasCount)"
    }

    func error(_ message: String, _ path: FetchPredicate.KeyPath? = nil) -> FetchPredicateError {
        FetchPredicateError(message: message, position: path?.position, format: format)
    }

    // MARK: - Predicates

    /// The predicate as an SQL condition; a predicate nested deeper than
    /// `FetchPredicate.maximumDepth` throws before anything is compiled.
    mutating func compile(_ predicate: FetchPredicate, entity: EntityDescription, alias: String, strict: Bool = false) throws -> String {
        do {
            try predicate.checkDepth()
        } catch var error {
            error.format = format
            throw error
        }
        return try compileNode(predicate, entity: entity, alias: alias, strict: strict)
    }

    /// Recurses only where the operator changes (nested ANDs and ORs are flattened), so
    /// the depth check bounds the recursion.
    mutating func compileNode(_ predicate: FetchPredicate, entity: EntityDescription, alias: String, strict: Bool) throws -> String {
        switch predicate.kind {
        case .constant(let value):
            return value ? "TRUE" : "FALSE"
        case .not(let inner):
            return "NOT (\(try compileNode(inner, entity: entity, alias: alias, strict: true)))"
        case .and(let parts):
            let parts = FetchPredicate.flattened(parts, and: true)
            guard !parts.isEmpty else { return "TRUE" }
            return "(" + (try parts.map { try compileNode($0, entity: entity, alias: alias, strict: strict) }).joined(separator: " AND ") + ")"
        case .or(let parts):
            let parts = FetchPredicate.flattened(parts, and: false)
            guard !parts.isEmpty else { return "FALSE" }
            return "(" + (try parts.map { try compileNode($0, entity: entity, alias: alias, strict: strict) }).joined(separator: " OR ") + ")"
        case .comparison(let comparison):
            return try compile(comparison, entity: entity, alias: alias, strict: strict)
        }
    }

    // MARK: - Sorting

    /// `ORDER BY` terms for sort descriptors, ending with the primary key so the order
    /// is total; `nil` sorts first ascending, last descending.
    mutating func orderBy(_ descriptors: [FetchSortDescriptor], entity: EntityDescription, alias: String) throws -> String {
        var terms: [String] = []
        for descriptor in descriptors {
            let resolved = try model.resolve(FetchPredicate.KeyPath.dotted(descriptor.key), from: entity)
            guard resolved.toManyIndex == nil else {
                throw FetchPredicateError(message: "cannot sort by \(descriptor.key): it crosses a to-many relationship")
            }
            var (sql, attribute) = try valueSQL(resolved, alias: alias)
            if let attribute, attribute.type.isArray {
                throw FetchPredicateError(message: "cannot sort by \(descriptor.key): it is an array (\(attribute.swiftTypeName))")
            }
            if attribute?.type == .string {
                if descriptor.caseInsensitive { sql = "lower((\(sql)) COLLATE \"und-x-icu\")" }
                sql += " COLLATE \"C\""
            }
            terms.append(sql + (descriptor.ascending ? " ASC NULLS FIRST" : " DESC NULLS LAST"))
        }
        terms.append("\(alias).\(Connection.quoteIdentifier(entity.primaryKeyColumn)) ASC")
        return terms.joined(separator: ", ")
    }
}
