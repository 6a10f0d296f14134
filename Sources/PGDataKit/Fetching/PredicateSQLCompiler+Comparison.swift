import Foundation

extension PredicateSQLCompiler {
    /// A comparison as an SQL condition over `alias`: `TRUE` or `FALSE` for two constants
    /// (`ComparisonPlanner.constantResult`), else planned (`ComparisonPlanner`), then
    /// written out; `ANY`/`ALL`/`NONE` become `EXISTS` subqueries correlated on the
    /// inverse foreign key.
    mutating func compile(
        _ comparison: FetchPredicate.Comparison, entity: EntityDescription, alias: String, strict: Bool
    ) throws -> String {
        let planner = ComparisonPlanner(model: model, entity: entity, format: format)
        if let value = try planner.constantResult(comparison) { return value ? "TRUE" : "FALSE" }
        let plan = try planner.plan(comparison)
        if let elements = plan.elements { return try renderElements(plan, elements, alias: alias, strict: strict) }
        guard let quantified = plan.quantified else {
            return try render(plan, alias: alias, memberAlias: alias, strict: strict)
        }
        let member = newAlias()
        let from = try membersSQL(quantified.members, alias: alias, memberAlias: member)
        let condition = try render(plan, alias: alias, memberAlias: member, strict: quantified.quantifier == .all)
        switch quantified.quantifier {
        case .any: return "EXISTS (SELECT 1 FROM \(from) AND \(condition))"
        case .noneOf: return "NOT EXISTS (SELECT 1 FROM \(from) AND \(condition))"
        case .all: return "NOT EXISTS (SELECT 1 FROM \(from) AND NOT (\(condition)))"
        }
    }

    /// A comparison over an array's elements: `$1 = ANY(tags)` for `ANY tags == x`,
    /// otherwise `EXISTS` (`NOT EXISTS` for `NONE`, and of the negation for `ALL`) over
    /// `unnest(tags) AS a(v)`. A `NULL` array has no elements.
    private mutating func renderElements(
        _ plan: ComparisonPlan, _ elements: ComparisonPlan.Elements, alias: String, strict: Bool
    ) throws -> String {
        let array = try keySQL(elements.array, alias: alias)
        if elements.quantifier == .any, plan.operator == .equal, plan.options.isEmpty, plan.fixed == nil,
            case .key(.element, _) = plan.left, case .constant(let constant?) = plan.right
        {
            let value = bind(constant) + (constant is String ? "::text" : "")
            return wrap("\(value) = ANY(\(array))", strict)
        }
        let member = newAlias()
        let from = "unnest(\(array)) AS \(member)(v)"
        let condition = try render(plan, alias: alias, memberAlias: member, strict: elements.quantifier == .all)
        switch elements.quantifier {
        case .any: return "EXISTS (SELECT 1 FROM \(from) WHERE \(condition))"
        case .noneOf: return "NOT EXISTS (SELECT 1 FROM \(from) WHERE \(condition))"
        case .all: return "NOT EXISTS (SELECT 1 FROM \(from) WHERE NOT (\(condition)))"
        }
    }

    // MARK: - Keys

    /// `<table> AS <memberAlias> WHERE <memberAlias>.<foreign key> = <owner key>`: the
    /// related objects a path reaches whose last hop is to-many (the hops before it are
    /// to-one). Through a many-to-many relationship the members are joined through the
    /// join table: `<table> AS <memberAlias> JOIN <join table> AS j ON j.<destination
    /// column> = <memberAlias>.<primary key> WHERE j.<source column> = <owner key>`.
    ///
    /// A path that crosses more to-many relationships (`ANY prev.prev.value == 1`) reaches
    /// the objects of its first one this way and joins each later hop onto them, the
    /// last hop's table named `memberAlias`: every object the whole path reaches, once
    /// per way of reaching it (which `EXISTS` does not mind).
    mutating func membersSQL(_ members: ResolvedKeyPath, alias: String, memberAlias: String) throws -> String {
        guard let first = members.toManyIndex, first < members.hops.count - 1 else {
            let single = try singleMembersSQL(members, alias: alias, memberAlias: memberAlias)
            return "\(single.from) WHERE \(single.condition)"
        }
        var previous = newAlias()
        let head = ResolvedKeyPath(hops: Array(members.hops[...first]), end: .object, path: members.path)
        let base = try singleMembersSQL(head, alias: alias, memberAlias: previous)
        var joins = ""
        let later = members.hops[(first + 1)...]
        for (offset, hop) in later.enumerated() {
            let next = offset == later.count - 1 ? memberAlias : newAlias()
            let table = "\(hop.destination.quotedTable) AS \(next)"
            let previousKey = "\(previous).\(Connection.quoteIdentifier(hop.source.primaryKeyColumn))"
            let nextKey = "\(next).\(Connection.quoteIdentifier(hop.destination.primaryKeyColumn))"
            if let joinTable = hop.relationship.joinTable {
                let link = newAlias()
                joins += " JOIN \(Connection.quoteIdentifier(joinTable.tableName)) AS \(link) ON \(link)."
                    + "\(Connection.quoteIdentifier(joinTable.sourceColumn)) = \(previousKey) JOIN \(table) ON \(nextKey) = "
                    + "\(link).\(Connection.quoteIdentifier(joinTable.destinationColumn))"
            } else if let column = hop.relationship.columnName {
                joins += " JOIN \(table) ON \(nextKey) = \(previous).\(Connection.quoteIdentifier(column))"
            } else if let inverseName = hop.relationship.inverseName,
                let foreignKey = hop.destination.relationship(named: inverseName)?.columnName
            {
                joins += " JOIN \(table) ON \(next).\(Connection.quoteIdentifier(foreignKey)) = \(previousKey)"
            } else {
                throw error("\(members.path) needs a to-many relationship with an inverse", members.path)
            }
            previous = next
        }
        return "\(base.from)\(joins) WHERE \(base.condition)"
    }

    /// `membersSQL` for a path whose hops before the last (to-many) one are to-one: its
    /// `FROM` part and the condition tying the members to the owner.
    private mutating func singleMembersSQL(
        _ members: ResolvedKeyPath, alias: String, memberAlias: String
    ) throws -> (from: String, condition: String) {
        guard let hop = members.hops.last, let inverseName = hop.relationship.inverseName else {
            throw error("\(members.path) needs a to-many relationship with an inverse", members.path)
        }
        if let table = hop.relationship.joinTable {
            let owner = ownerKeySQL(members, alias: alias)
            let join = newAlias()
            return (
                "\(hop.destination.quotedTable) AS \(memberAlias) JOIN \(Connection.quoteIdentifier(table.tableName)) "
                    + "AS \(join) ON \(join).\(Connection.quoteIdentifier(table.destinationColumn)) = "
                    + "\(memberAlias).\(Connection.quoteIdentifier(hop.destination.primaryKeyColumn))",
                "\(join).\(Connection.quoteIdentifier(table.sourceColumn)) = \(owner)"
            )
        }
        guard let inverse = hop.destination.relationship(named: inverseName), let foreignKey = inverse.columnName else {
            throw error("\(members.path) needs a to-many relationship with an inverse", members.path)
        }
        let owner = ownerKeySQL(members, alias: alias)
        return (
            "\(hop.destination.quotedTable) AS \(memberAlias)",
            "\(memberAlias).\(Connection.quoteIdentifier(foreignKey)) = \(owner)"
        )
    }

    /// The primary key of the object the last hop starts from, reached through the
    /// to-one hops before it (the last of them read as its foreign key).
    private mutating func ownerKeySQL(_ members: ResolvedKeyPath, alias: String) -> String {
        let index = members.hops.count - 1
        if index == 0 { return "\(alias).\(Connection.quoteIdentifier(members.hops[0].source.primaryKeyColumn))" }
        let previous = members.hops[index - 1]
        guard let column = previous.relationship.columnName else {
            // The side of a one-to-one without the key: read the partner's own key.
            return scalarSQL(hops: Array(members.hops[..<index]), alias: alias) { alias in
                "\(alias).\(Connection.quoteIdentifier(previous.destination.primaryKeyColumn))"
            }
        }
        return scalarSQL(hops: Array(members.hops[..<(index - 1)]), alias: alias) { alias in
            "\(alias).\(Connection.quoteIdentifier(column))"
        }
    }

    /// A value reached through to-one hops: nested scalar subqueries. A hop through the
    /// side of a one-to-one relationship without the key finds the partner by its
    /// foreign key (unique, so the subquery has at most one row).
    mutating func scalarSQL(hops: [ResolvedKeyPath.Hop], alias: String, end: (String) -> String) -> String {
        guard let hop = hops.first else { return end(alias) }
        let next = newAlias()
        let inner = scalarSQL(hops: Array(hops.dropFirst()), alias: next, end: end)
        if hop.relationship.columnName == nil, let inverseName = hop.relationship.inverseName,
            let foreignKey = hop.destination.relationship(named: inverseName)?.columnName
        {
            return "(SELECT \(inner) FROM \(hop.destination.quotedTable) AS \(next) WHERE \(next)."
                + "\(Connection.quoteIdentifier(foreignKey)) = \(alias)."
                + "\(Connection.quoteIdentifier(hop.source.primaryKeyColumn)))"
        }
        return "(SELECT \(inner) FROM \(hop.destination.quotedTable) AS \(next) WHERE \(next)."
            + "\(Connection.quoteIdentifier(hop.destination.primaryKeyColumn)) = \(alias)."
            + "\(Connection.quoteIdentifier(hop.relationship.columnName ?? "")))"
    }

    /// The SQL value of a key path without to-many hops (sorting, dictionaries), and its
    /// attribute.
    mutating func valueSQL(_ resolved: ResolvedKeyPath, alias: String) throws -> (sql: String, attribute: AttributeDescription?) {
        switch resolved.end {
        case .attribute(let attribute):
            return (try keySQL(.attribute(resolved, attribute), alias: alias), attribute)
        case .toOne(let relationship):
            return (scalarSQL(hops: resolved.hops, alias: alias) { "\($0).\(Connection.quoteIdentifier(relationship.columnName ?? ""))" }, nil)
        case .count:
            return (try keySQL(.count(resolved), alias: alias), nil)
        case .object:
            guard let last = resolved.hops.last else { throw error("\(resolved.path) is the object itself", resolved.path) }
            return (try keySQL(.object(resolved, last.destination), alias: alias), nil)
        }
    }

    /// What a key reads, as SQL over `alias`.
    mutating func keySQL(_ key: PlannedKey, alias: String) throws -> String {
        switch key {
        case .attribute(let resolved, let attribute):
            return scalarSQL(hops: resolved.hops, alias: alias) { "\($0).\(Connection.quoteIdentifier(attribute.columnName))" }
        case .object(let resolved, let entity):
            if case .toOne(let relationship) = resolved.end {
                return scalarSQL(hops: resolved.hops, alias: alias) {
                    "\($0).\(Connection.quoteIdentifier(relationship.columnName ?? ""))"
                }
            }
            return scalarSQL(hops: resolved.hops, alias: alias) { "\($0).\(Connection.quoteIdentifier(entity.primaryKeyColumn))" }
        case .count(let resolved):
            let member = newAlias()
            return "(SELECT count(*) FROM \(try membersSQL(resolved, alias: alias, memberAlias: member)))"
        case .aggregate(let function, let members, let path, let attribute):
            let member = newAlias()
            let from = try membersSQL(members, alias: alias, memberAlias: member)
            let value = scalarSQL(hops: path.hops, alias: member) { "\($0).\(Connection.quoteIdentifier(attribute.columnName))" }
            let floating = PlannedType.value(attribute.type).isFloatingPoint
            let expression: String
            switch function {
            case .min, .max:
                expression = "\(function == .min ? "min" : "max")(\(value)\(attribute.type == .string ? " COLLATE \"C\"" : ""))"
            case .sum:
                // Integers and decimals add exactly (numeric); floating point as double.
                expression = floating ? "COALESCE(sum((\(value))::float8), 0)" : "COALESCE(sum(\(value)), 0)::numeric"
            case .average:
                // The exact sum rounded once to double, then divided: what memory does.
                expression = floating
                    ? "sum((\(value))::float8) / NULLIF(count(\(value)), 0)"
                    : "sum(\(value))::float8 / NULLIF(count(\(value)), 0)"
            }
            return "(SELECT \(expression) FROM \(from))"
        case .subquery(let members, let entity, let predicate):
            let member = newAlias()
            let from = try membersSQL(members, alias: alias, memberAlias: member)
            let body = try compileNode(predicate, entity: entity, alias: member, strict: false)
            return "(SELECT count(*) FROM \(from) AND \(body))"
        case .element:
            // `alias` is the `unnest(…) AS alias(v)` of `renderElements`.
            return "\(alias).v"
        case .arrayCount(let resolved, let attribute):
            // `nil` counts 0, as in memory (`cardinality(NULL)` is NULL).
            let array = scalarSQL(hops: resolved.hops, alias: alias) { "\($0).\(Connection.quoteIdentifier(attribute.columnName))" }
            return "COALESCE(cardinality(\(array)), 0)"
        }
    }

    // MARK: - Comparisons

    /// One side as SQL: `nil` for a `nil` constant.
    private struct Operand {
        var sql: String?
        var type: PlannedType?
        var isKey: Bool { type != nil }
    }

    /// One side as SQL; a constant compared with an array attribute (`type`) is cast to
    /// the attribute's array type.
    private mutating func operand(
        _ side: PlannedSide, alias: String, memberAlias: String, type: PlannedType? = nil
    ) throws -> Operand {
        switch side {
        case .key(let key, let onMember):
            return Operand(sql: try keySQL(key, alias: onMember ? memberAlias : alias), type: key.type)
        case .constant(let value):
            guard let value else { return Operand(sql: nil, type: nil) }
            if case .value(let attributeType)? = type, attributeType.isArray {
                return Operand(sql: bind(value) + "::" + attributeType.sqlType, type: nil)
            }
            return Operand(sql: bind(value) + (value is String ? "::text" : ""), type: nil)
        case .list, .bounds:
            throw error("a list is allowed only after IN or BETWEEN")
        }
    }

    /// `SUBQUERY(…).@count > 0` and the like as `EXISTS`, `== 0` as `NOT EXISTS`.
    private func existence(_ plan: ComparisonPlan) -> (Bool, ResolvedKeyPath, EntityDescription, FetchPredicate, Bool)? {
        guard case .key(.subquery(let members, let entity, let predicate), let onMember) = plan.left,
            case .constant(let constant?) = plan.right, let number = constant as? Int
        else { return nil }
        switch (plan.operator, number) {
        case (.greaterThan, 0), (.greaterThanOrEqual, 1), (.notEqual, 0): return (true, members, entity, predicate, onMember)
        case (.equal, 0), (.lessThan, 1), (.lessThanOrEqual, 0): return (false, members, entity, predicate, onMember)
        default: return nil
        }
    }

    private mutating func render(_ plan: ComparisonPlan, alias: String, memberAlias: String, strict: Bool) throws -> String {
        if let fixed = plan.fixed { return fixed ? "TRUE" : "FALSE" }
        if let (exists, members, entity, predicate, onMember) = existence(plan) {
            let member = newAlias()
            let from = try membersSQL(members, alias: onMember ? memberAlias : alias, memberAlias: member)
            let body = try compileNode(predicate, entity: entity, alias: member, strict: false)
            return "\(exists ? "" : "NOT ")EXISTS (SELECT 1 FROM \(from) AND \(body))"
        }
        let options = plan.options
        let left = try operand(plan.left, alias: alias, memberAlias: memberAlias)
        switch plan.operator {
        case .in:
            return try renderIn(plan, left: left, strict: strict)
        case .between:
            guard case .bounds(let lowSide, let highSide) = plan.right else { throw error("BETWEEN needs {low, high}") }
            let low = try operand(lowSide, alias: alias, memberAlias: memberAlias)
            let high = try operand(highSide, alias: alias, memberAlias: memberAlias)
            guard left.sql != nil, low.sql != nil, high.sql != nil else { return "FALSE" }
            let (a, b) = ordered(left, low, plan)
            let (c, d) = ordered(left, high, plan)
            return wrap("(\(a) >= \(b) AND \(c) <= \(d))", strict)
        case .like, .matches:
            if case .constant(let constant?) = plan.right, let text = constant as? String, let l = left.sql {
                let subject = fold(l, options)
                if plan.operator == .like {
                    let pattern = fold(bind(PredicateValues.likePattern(text)) + "::text", options)
                    return wrap("\(subject) LIKE \(pattern) ESCAPE '\\'", strict)
                }
                return wrap("\(subject) ~ \(bind(try MatchesPattern(text).sqlPattern))::text", strict)
            }
        default:
            break
        }
        let right = try operand(plan.right, alias: alias, memberAlias: memberAlias, type: plan.type)
        switch plan.operator {
        case .equal, .notEqual:
            let negate = plan.operator == .notEqual
            guard let l = left.sql else { return try nullComparison(right, negate: negate) }
            guard right.sql != nil else { return "\(l) IS \(negate ? "NOT " : "")NULL" }
            let (a, b) = comparable(left, right, options)
            if left.isKey && right.isKey { return "(\(a) IS \(negate ? "" : "NOT ")DISTINCT FROM \(b))" }
            return negate ? "(\(a) <> \(b) OR \(l) IS NULL)" : wrap("\(a) = \(b)", strict)
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard left.sql != nil, right.sql != nil else { return "FALSE" }
            let (a, b) = ordered(left, right, plan)
            let symbol = switch plan.operator {
            case .lessThan: "<"
            case .lessThanOrEqual: "<="
            case .greaterThan: ">"
            default: ">="
            }
            return wrap("\(a) \(symbol) \(b)", strict)
        case .contains, .beginsWith, .endsWith, .like, .matches:
            guard let l = left.sql, let r = right.sql else { return "FALSE" }
            let a = fold(l, options)
            let sql: String
            switch plan.operator {
            case .contains: sql = "strpos(\(a), \(fold(r, options))) > 0"
            case .beginsWith: sql = "starts_with(\(a), \(fold(r, options)))"
            case .endsWith:
                let b = fold(r, options)
                sql = "right(\(a), char_length(\(b))) = \(b)"
            case .like:
                // A pattern from data: converted to SQL LIKE syntax in the database.
                sql = "(\(r) IS NOT NULL AND \(a) LIKE \(fold(likePatternSQL(r), options)) ESCAPE '\\')"
            default:
                // A pattern from data runs as it is; see the Fetching article ("MATCHES").
                sql = "\(a) ~ ('^(?:' || \(r) || ')$')"
            }
            return wrap(sql, strict)
        case .in, .between:
            throw error("\(plan.operator.rawValue) needs a list")
        }
    }

    /// `key IN {…}`: `= ANY` of bound arrays (or `IN` of folded texts with `[c]`/`[d]`),
    /// and `IS NULL` when the list holds `nil`.
    private mutating func renderIn(_ plan: ComparisonPlan, left: Operand, strict: Bool) throws -> String {
        let options = plan.options
        guard case .list(let items) = plan.right, let l = left.sql else { throw error("IN needs a list") }
        let present = items.compactMap { $0 }
        var parts: [String] = []
        if !present.isEmpty {
            if options.isEmpty {
                for array in PredicateValues.arrays(present) { parts.append("\(l) = ANY(\(bind(array)))") }
            } else {
                let folded = present.map { fold(bind($0) + "::text", options) }
                parts.append("\(fold(l, options)) IN (\(folded.joined(separator: ", ")))")
            }
        }
        if items.contains(where: { $0 == nil }) { parts.append("\(l) IS NULL") }
        return parts.isEmpty ? "FALSE" : wrap("(" + parts.joined(separator: " OR ") + ")", strict)
    }

    /// `nil == key` (a constant `nil` on the left; planning puts keys on the left, so
    /// this is only for completeness).
    private func nullComparison(_ right: Operand, negate: Bool) throws -> String {
        guard let r = right.sql else { return negate ? "FALSE" : "TRUE" }
        return "\(r) IS \(negate ? "NOT " : "")NULL"
    }

    /// Both sides ready to compare: two numeric keys of different types cast to the
    /// type memory compares them in (`double precision` if either is floating point,
    /// `numeric` if either is a decimal), strings folded for `[c]`/`[d]`.
    private mutating func comparable(
        _ left: Operand, _ right: Operand, _ options: FetchPredicate.StringOptions
    ) -> (String, String) {
        var a = left.sql ?? "NULL"
        var b = right.sql ?? "NULL"
        if let l = left.type, let r = right.type, l != r, l.isNumber, r.isNumber {
            if l.isFloatingPoint || r.isFloatingPoint {
                a = "(\(a))::float8"
                b = "(\(b))::float8"
            } else if l == .value(.decimal) || r == .value(.decimal) {
                a = "(\(a))::numeric"
                b = "(\(b))::numeric"
            }
        }
        return (fold(a, options), fold(b, options))
    }

    /// `comparable`, then strings in code-point order.
    private mutating func ordered(_ left: Operand, _ right: Operand, _ plan: ComparisonPlan) -> (String, String) {
        let (a, b) = comparable(left, right, plan.options)
        guard plan.type == .value(.string) else { return (a, b) }
        return (a + " COLLATE \"C\"", b + " COLLATE \"C\"")
    }

    func wrap(_ sql: String, _ strict: Bool) -> String { strict ? "COALESCE(\(sql), false)" : sql }

    /// Applies `[c]`/`[d]` folding to a string expression.
    mutating func fold(_ sql: String, _ options: FetchPredicate.StringOptions) -> String {
        guard !options.isEmpty else { return sql }
        var result = "(\(sql))::text"
        if options.contains(.diacriticInsensitive) {
            result = "regexp_replace(normalize(\(result), NFD), \(bind(ValueComparison.diacriticPattern))::text, '', 'g')"
        }
        if options.contains(.caseInsensitive) { result = "lower((\(result)) COLLATE \"und-x-icu\")" }
        return result
    }

    /// An `NSPredicate` `LIKE` pattern read from data, converted to SQL `LIKE` syntax in
    /// the database as `PredicateValues.likePattern` converts a constant: split into
    /// backslash pairs and single characters, each mapped, joined in order.
    private mutating func likePatternSQL(_ pattern: String) -> String {
        let pieces = bind(#"\\.|."#)
        return #"(SELECT COALESCE(string_agg(CASE WHEN x.m[1] = '*' THEN '%' WHEN x.m[1] = '?' THEN '_' "#
            + #"WHEN x.m[1] IN ('%', '_') THEN '\' || x.m[1] WHEN x.m[1] = '\' THEN '\\' "#
            + #"WHEN left(x.m[1], 1) = '\' THEN CASE WHEN substr(x.m[1], 2) IN ('%', '_', '\') THEN x.m[1] "#
            + #"ELSE substr(x.m[1], 2) END ELSE x.m[1] END, '' ORDER BY x.n), '') "#
            + "FROM regexp_matches(\(pattern), \(pieces)::text, 'g') WITH ORDINALITY AS x(m, n))"
    }
}
