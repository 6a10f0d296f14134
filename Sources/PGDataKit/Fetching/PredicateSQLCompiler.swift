import Foundation

/// Compiles predicates and sort descriptors to SQL over an entity's table, with every
/// value bound as a parameter and every identifier quoted.
///
/// Comparisons are two-valued, like `NSPredicate` and the in-memory evaluator: in a
/// positive position a plain SQL comparison suffices (a `NULL` result excludes the row,
/// as false would), and under `NOT` comparisons are wrapped in `COALESCE(…, false)`.
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

    private mutating func newAlias() -> String {
        aliasCount += 1
        return "a\(aliasCount)"
    }

    private func error(_ message: String, _ path: FetchPredicate.KeyPath? = nil) -> FetchPredicateError {
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
    private mutating func compileNode(_ predicate: FetchPredicate, entity: EntityDescription, alias: String, strict: Bool) throws -> String {
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

    private mutating func compile(
        _ original: FetchPredicate.Comparison, entity: EntityDescription, alias: String, strict: Bool
    ) throws -> String {
        let comparison = try normalized(original)
        guard case .keyPath(let path) = comparison.left else {
            if case .count(let path) = comparison.left {
                let resolved = try model.resolve(path, from: entity, counting: true, format: format)
                let left = try countSQL(resolved, alias: alias)
                return try compare(left: left, type: .int64, comparison, entity: entity, alias: alias, strict: strict)
            }
            throw error("the left side of \(comparison.operator.rawValue) must be a key path")
        }
        let resolved = try model.resolve(path, from: entity, format: format)
        if let toMany = resolved.toManyIndex {
            return try quantified(resolved, toManyAt: toMany, comparison, alias: alias)
        }
        guard comparison.quantifier == nil else {
            throw error("\(comparison.quantifier?.rawValue ?? "") needs a key path through a to-many relationship", path)
        }
        return try compare(resolved: resolved, comparison, entity: entity, alias: alias, strict: strict)
    }

    private func normalized(_ comparison: FetchPredicate.Comparison) throws -> FetchPredicate.Comparison {
        do {
            return try comparison.keyPathFirst()
        } catch var error as FetchPredicateError {
            error.format = format
            throw error
        }
    }

    /// `ANY`/`ALL`/`NONE` (and unquantified, meaning `ANY`) over a to-many hop: an
    /// `EXISTS` subquery correlated on the inverse foreign key.
    private mutating func quantified(
        _ resolved: ResolvedKeyPath, toManyAt index: Int, _ comparison: FetchPredicate.Comparison, alias: String
    ) throws -> String {
        let hop = resolved.hops[index]
        guard let inverseName = hop.relationship.inverseName,
            let inverse = hop.destination.relationship(named: inverseName), let foreignKey = inverse.columnName
        else { throw error("\(hop.source.name).\(hop.relationship.name) has no inverse", resolved.path) }
        if resolved.hops[(index + 1)...].contains(where: \.relationship.isToMany) {
            throw error("a key path may cross only one to-many relationship", resolved.path)
        }
        let sourceKey = try keySQL(ofSourceOf: resolved, hopIndex: index, alias: alias)
        let member = newAlias()
        let remaining = ResolvedKeyPath(hops: Array(resolved.hops[(index + 1)...]), end: resolved.end, path: resolved.path)
        let quantifier = comparison.quantifier ?? .any
        let condition = try compare(
            resolved: remaining, comparison, entity: hop.destination, alias: member, strict: quantifier == .all)
        let from = "SELECT 1 FROM \(hop.destination.quotedTable) AS \(member) "
            + "WHERE \(member).\(Connection.quoteIdentifier(foreignKey)) = \(sourceKey)"
        switch quantifier {
        case .any: return "EXISTS (\(from) AND \(condition))"
        case .noneOf: return "NOT EXISTS (\(from) AND \(condition))"
        case .all: return "NOT EXISTS (\(from) AND NOT (\(condition)))"
        }
    }

    /// The primary key of the entity a hop starts from, reached through the to-one hops
    /// before it.
    private mutating func keySQL(ofSourceOf resolved: ResolvedKeyPath, hopIndex: Int, alias: String) throws -> String {
        if hopIndex == 0 { return "\(alias).\(Connection.quoteIdentifier(resolved.hops[0].source.primaryKeyColumn))" }
        let prefix = Array(resolved.hops[..<(hopIndex - 1)])
        let last = resolved.hops[hopIndex - 1]
        return scalarSQL(hops: prefix, alias: alias) { alias in
            "\(alias).\(Connection.quoteIdentifier(last.relationship.columnName ?? ""))"
        }
    }

    /// A value reached through to-one hops: nested scalar subqueries.
    private mutating func scalarSQL(hops: [ResolvedKeyPath.Hop], alias: String, end: (String) -> String) -> String {
        guard let hop = hops.first else { return end(alias) }
        let next = newAlias()
        let inner = scalarSQL(hops: Array(hops.dropFirst()), alias: next, end: end)
        return "(SELECT \(inner) FROM \(hop.destination.quotedTable) AS \(next) WHERE \(next)."
            + "\(Connection.quoteIdentifier(hop.destination.primaryKeyColumn)) = \(alias)."
            + "\(Connection.quoteIdentifier(hop.relationship.columnName ?? "")))"
    }

    /// The SQL value of a key path without to-many hops, and its type.
    mutating func valueSQL(_ resolved: ResolvedKeyPath, alias: String) throws -> (sql: String, attribute: AttributeDescription?) {
        switch resolved.end {
        case .attribute(let attribute):
            return (scalarSQL(hops: resolved.hops, alias: alias) { "\($0).\(Connection.quoteIdentifier(attribute.columnName))" }, attribute)
        case .toOne(let relationship):
            return (scalarSQL(hops: resolved.hops, alias: alias) { "\($0).\(Connection.quoteIdentifier(relationship.columnName ?? ""))" }, nil)
        case .count:
            return (try countSQL(resolved, alias: alias), nil)
        }
    }

    private mutating func countSQL(_ resolved: ResolvedKeyPath, alias: String) throws -> String {
        guard let last = resolved.hops.last, let inverseName = last.relationship.inverseName,
            let inverse = last.destination.relationship(named: inverseName), let foreignKey = inverse.columnName
        else { throw error("@count needs a to-many relationship with an inverse", resolved.path) }
        let member = newAlias()
        let ownerKey = scalarSQL(hops: Array(resolved.hops.dropLast()), alias: alias) {
            "\($0).\(Connection.quoteIdentifier(last.source.primaryKeyColumn))"
        }
        return "(SELECT count(*) FROM \(last.destination.quotedTable) AS \(member) "
            + "WHERE \(member).\(Connection.quoteIdentifier(foreignKey)) = \(ownerKey))"
    }

    private mutating func compare(
        resolved: ResolvedKeyPath, _ comparison: FetchPredicate.Comparison, entity: EntityDescription, alias: String,
        strict: Bool
    ) throws -> String {
        let (left, attribute) = try valueSQL(resolved, alias: alias)
        if case .toOne(let relationship) = resolved.end {
            return try compareReference(left: left, relationship: relationship, comparison, path: resolved.path, strict: strict)
        }
        return try compare(left: left, type: attribute?.type ?? .int64, attribute: attribute, comparison, entity: entity, alias: alias, strict: strict)
    }

    /// A to-one relationship compared with objects or `nil`.
    private mutating func compareReference(
        left: String, relationship: RelationshipDescription, _ comparison: FetchPredicate.Comparison,
        path: FetchPredicate.KeyPath, strict: Bool
    ) throws -> String {
        func key(_ expression: FetchPredicate.Expression) throws -> Int64? {
            switch expression {
            case .value(.null): return nil
            case .value(.object(let id)):
                guard id.entityName == relationship.destinationEntityName else {
                    throw error("\(path) holds \(relationship.destinationEntityName) objects, not \(id.entityName)", path)
                }
                guard let key = id.primaryKey else { throw error("\(id) is not saved yet", path) }
                return key
            case .value(.integer(let value)): return value
            default: throw error("\(path) is a relationship: compare it with an object or nil", path)
            }
        }
        switch comparison.operator {
        case .equal, .notEqual:
            let negate = comparison.operator == .notEqual
            guard let value = try key(comparison.right) else { return "\(left) IS \(negate ? "NOT " : "")NULL" }
            return negate ? "(\(left) IS DISTINCT FROM \(bind(value)))" : wrap("\(left) = \(bind(value))", strict)
        case .in:
            guard case .list(let items) = comparison.right else { throw error("IN needs a list", path) }
            let keys = try items.map(key)
            let present = keys.compactMap { $0 }
            var parts = present.isEmpty ? [] : ["\(left) = ANY(\(bind(present)))"]
            if keys.contains(where: { $0 == nil }) { parts.append("\(left) IS NULL") }
            return parts.isEmpty ? "FALSE" : wrap("(" + parts.joined(separator: " OR ") + ")", strict)
        default:
            throw error("\(comparison.operator.rawValue) cannot compare the relationship \(path)", path)
        }
    }

    private func wrap(_ sql: String, _ strict: Bool) -> String { strict ? "COALESCE(\(sql), false)" : sql }

    /// Applies `[c]`/`[d]` folding to a string expression.
    private mutating func fold(_ sql: String, _ options: FetchPredicate.StringOptions) -> String {
        guard !options.isEmpty else { return sql }
        var result = "(\(sql))::text"
        if options.contains(.diacriticInsensitive) {
            result = "regexp_replace(normalize(\(result), NFD), \(bind(ValueComparison.diacriticPattern))::text, '', 'g')"
        }
        if options.contains(.caseInsensitive) { result = "lower((\(result)) COLLATE \"und-x-icu\")" }
        return result
    }

    /// Converts a constant for a typed left side, or throws naming both.
    private func parameter(
        _ value: FetchPredicate.Value, attribute: AttributeDescription?, type: AttributeType, path: FetchPredicate.KeyPath?
    ) throws -> (any PostgresEncodable)? {
        guard let converted = PredicateValues.convert(value, to: type) else {
            let target = attribute.map { "\($0.name) (\($0.swiftTypeName))" } ?? "\(type.rawValue)"
            throw error("cannot compare \(target) with \(PredicateValues.describe(value))", path)
        }
        return converted
    }

    private mutating func compare(
        left: String, type: AttributeType, attribute: AttributeDescription? = nil, _ comparison: FetchPredicate.Comparison,
        entity: EntityDescription, alias: String, strict: Bool
    ) throws -> String {
        let path: FetchPredicate.KeyPath? = {
            if case .keyPath(let path) = comparison.left { return path }
            if case .count(let path) = comparison.left { return path }
            return nil
        }()
        let options = comparison.options
        let isString = type == .string
        if !options.isEmpty && !isString {
            throw error("[c] and [d] apply to strings only", path)
        }
        let collate = isString ? " COLLATE \"C\"" : ""
        // The right side as SQL.
        func right(_ expression: FetchPredicate.Expression) throws -> (sql: String, isNull: Bool) {
            switch expression {
            case .value(.null):
                return ("NULL", true)
            case .value(let value):
                return (bind(try parameter(value, attribute: attribute, type: type, path: path)), false)
            case .keyPath(let other):
                let resolved = try model.resolve(other, from: entity, format: format)
                guard resolved.toManyIndex == nil else { throw error("\(other) crosses a to-many relationship", other) }
                return (try valueSQL(resolved, alias: alias).sql, false)
            case .count(let other):
                return (try countSQL(try model.resolve(other, from: entity, counting: true, format: format), alias: alias), false)
            case .variable(let name):
                throw error("variable $\(name) has no value: call substituting(_:) first", path)
            case .list:
                throw error("a list is allowed only after IN or BETWEEN", path)
            }
        }
        let isKeyPathRight = comparison.right.isKeyPath
        switch comparison.operator {
        case .equal, .notEqual:
            let negate = comparison.operator == .notEqual
            let (rightSQL, isNull) = try right(comparison.right)
            if isNull { return "\(left) IS \(negate ? "NOT " : "")NULL" }
            let l = fold(left, options)
            let r = fold(rightSQL, options)
            if isKeyPathRight {
                return "(\(l) IS \(negate ? "" : "NOT ")DISTINCT FROM \(r))"
            }
            return negate ? "(\(l) <> \(r) OR \(left) IS NULL)" : wrap("\(l) = \(r)", strict)
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            let (rightSQL, isNull) = try right(comparison.right)
            if isNull { return "FALSE" }
            let symbol = comparison.operator == .lessThan ? "<" : comparison.operator == .lessThanOrEqual ? "<=" : comparison.operator == .greaterThan ? ">" : ">="
            return wrap("\(left)\(collate) \(symbol) \(rightSQL)\(collate)", strict)
        case .between:
            guard case .list(let bounds) = comparison.right, bounds.count == 2 else {
                throw error("BETWEEN needs {low, high}", path)
            }
            let low = try right(bounds[0])
            let high = try right(bounds[1])
            if low.isNull || high.isNull { return "FALSE" }
            return wrap("(\(left)\(collate) >= \(low.sql)\(collate) AND \(left)\(collate) <= \(high.sql)\(collate))", strict)
        case .in:
            guard case .list(let items) = comparison.right else { throw error("IN needs a list or an array argument", path) }
            var values: [FetchPredicate.Value] = []
            for item in items {
                guard case .value(let value) = item else { throw error("IN lists hold constants only", path) }
                values.append(value)
            }
            let present = values.filter { $0 != .null }
            var parts: [String] = []
            if !present.isEmpty {
                if options.isEmpty {
                    let array = try present.map { try parameter($0, attribute: attribute, type: type, path: path) }
                    parts.append("\(left) = ANY(\(bind(PredicateValues.array(array, type: type))))")
                } else {
                    let l = fold(left, options)
                    let items = try present.map { fold(bind(try parameter($0, attribute: attribute, type: type, path: path)), options) }
                    parts.append("\(l) IN (\(items.joined(separator: ", ")))")
                }
            }
            if values.contains(.null) { parts.append("\(left) IS NULL") }
            return parts.isEmpty ? "FALSE" : wrap("(" + parts.joined(separator: " OR ") + ")", strict)
        case .contains, .beginsWith, .endsWith, .like, .matches:
            guard isString else { throw error("\(comparison.operator.rawValue) applies to strings only", path) }
            guard case .value(let value) = comparison.right else {
                throw error("\(comparison.operator.rawValue) needs a string value on the right", path)
            }
            guard case .string(let text) = value else {
                if value == .null { return "FALSE" }
                throw error("\(comparison.operator.rawValue) needs a string, not \(PredicateValues.describe(value))", path)
            }
            let l = fold(left, options)
            let sql: String
            switch comparison.operator {
            case .contains:
                sql = "strpos(\(l), \(fold(bind(text) + "::text", options))) > 0"
            case .beginsWith:
                sql = "starts_with(\(l), \(fold(bind(text) + "::text", options)))"
            case .endsWith:
                let r = fold(bind(text) + "::text", options)
                sql = "right(\(l), char_length(\(r))) = \(r)"
            case .like:
                sql = "\(l) LIKE \(fold(bind(PredicateValues.likePattern(text)) + "::text", options)) ESCAPE '\\'"
            default:
                let checked: MatchesPattern
                do {
                    checked = try MatchesPattern(text)
                } catch {
                    throw self.error(error.message, path)
                }
                sql = "\(l) ~ \(bind(checked.sqlPattern))::text"
            }
            return wrap(sql, strict)
        }
    }

    // MARK: - Sorting

    /// `ORDER BY` terms for sort descriptors, ending with the primary key so the order
    /// is total; `nil` sorts first ascending, last descending.
    mutating func orderBy(_ descriptors: [FetchSortDescriptor], entity: EntityDescription, alias: String) throws -> String {
        var terms: [String] = []
        for descriptor in descriptors {
            let resolved = try model.resolve(FetchPredicate.KeyPath(descriptor.key.split(separator: ".").map(String.init)), from: entity)
            guard resolved.toManyIndex == nil else {
                throw FetchPredicateError(message: "cannot sort by \(descriptor.key): it crosses a to-many relationship")
            }
            var (sql, attribute) = try valueSQL(resolved, alias: alias)
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

/// Conversions of predicate constants to attribute types, shared by SQL and memory.
enum PredicateValues {
    /// The value as the attribute type's Swift scalar, or `nil` when it does not fit.
    static func convert(_ value: FetchPredicate.Value, to type: AttributeType) -> (any PostgresEncodable & Sendable)? {
        switch (value, type) {
        case (.string(let text), .string): return text
        case (.integer(let number), .int64): return Int(number)
        case (.integer(let number), .int32): return Int32(exactly: number)
        case (.integer(let number), .int16): return Int16(exactly: number)
        case (.integer(let number), .double): return Double(number)
        case (.integer(let number), .float): return Float(number)
        case (.integer(let number), .decimal): return Decimal(number)
        case (.double(let number), .double): return number
        case (.double(let number), .float): return Float(number)
        case (.double(let number), .decimal): return Decimal(string: "\(number)")
        case (.double(let number), .int64): return number.rounded() == number ? Int(exactly: number) : nil
        case (.decimal(let number), .decimal): return number
        case (.decimal(let number), .double): return NSDecimalNumber(decimal: number).doubleValue
        case (.bool(let flag), .bool): return flag
        case (.integer(let number), .bool) where number == 0 || number == 1: return number == 1
        case (.date(let date), .date): return date
        case (.uuid(let uuid), .uuid): return uuid
        case (.string(let text), .uuid): return UUID(uuidString: text)
        case (.data(let data), .binary): return data
        default: return nil
        }
    }

    /// The values as one array parameter of the attribute type.
    static func array(_ values: [(any PostgresEncodable)?], type: AttributeType) -> any PostgresEncodable {
        switch type {
        case .string: return values.map { $0 as? String }
        case .int64: return values.map { $0 as? Int }
        case .int32: return values.map { $0 as? Int32 }
        case .int16: return values.map { $0 as? Int16 }
        case .double: return values.map { $0 as? Double }
        case .float: return values.map { $0 as? Float }
        case .decimal: return values.map { $0 as? Decimal }
        case .bool: return values.map { $0 as? Bool }
        case .date: return values.map { $0 as? Date }
        case .uuid: return values.map { $0 as? UUID }
        case .binary: return values.map { $0 as? Data }
        case .json: return values.map { $0 as? JSONValue }
        }
    }

    /// A short rendering for messages.
    static func describe(_ value: FetchPredicate.Value) -> String {
        switch value {
        case .null: return "nil"
        case .string(let text): return "the string \"\(text)\""
        case .integer(let number): return "the integer \(number)"
        case .double(let number): return "the number \(number)"
        case .decimal(let number): return "the decimal \(number)"
        case .bool(let flag): return "the boolean \(flag)"
        case .date(let date): return "the date \(date)"
        case .uuid(let uuid): return "the UUID \(uuid)"
        case .data(let data): return "\(data.count) bytes of data"
        case .object(let id): return "the object \(id)"
        }
    }

    /// An `NSPredicate` `LIKE` pattern (`*`, `?`) as an SQL `LIKE` pattern escaped with
    /// backslash.
    static func likePattern(_ pattern: String) -> String {
        var result = ""
        for scalar in pattern.unicodeScalars {
            switch scalar {
            case "*": result += "%"
            case "?": result += "_"
            case "%", "_", "\\": result += "\\" + String(scalar)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
