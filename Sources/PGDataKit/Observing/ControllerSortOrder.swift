import Foundation

/// One value of a sort key, as a controller compares it: `NULL`, a string (lower-cased
/// for case-insensitive sorts, compared by UTF-8 bytes, which is code-point order and so
/// `COLLATE "C"`), an integer (also `Bool`), a floating-point number (also `Date`, as its
/// time interval), or another stored value (compared as the in-memory fetch compares).
/// The common cases compare without dynamic casts: a controller compares keys in every
/// binary search.
enum ControllerSortValue {
    case null
    case text(String)
    case integer(Int64)
    case double(Double)
    case value(any Sendable)

    /// The sort value of a stored value.
    init(_ stored: (any Sendable)?, caseInsensitive: Bool) {
        switch stored {
        case .none: self = .null
        case .some(let text as String): self = .text(caseInsensitive ? text.lowercased() : text)
        case .some(let number as Int): self = .integer(Int64(number))
        case .some(let number as Int64): self = .integer(number)
        case .some(let number as Int32): self = .integer(Int64(number))
        case .some(let number as Int16): self = .integer(Int64(number))
        case .some(let flag as Bool): self = .integer(flag ? 1 : 0)
        case .some(let number as Double) where !number.isNaN: self = .double(number)
        case .some(let number as Float) where !number.isNaN: self = .double(Double(number))
        case .some(let date as Date): self = .double(date.timeIntervalSinceReferenceDate)
        case .some(let value): self = .value(value)
        }
    }
}

/// Where an object sorts: its values for the sort descriptors, then its primary key
/// (unsaved objects after saved ones), as the SQL `ORDER BY` of a fetch orders rows.
struct ControllerSortKey {
    /// What breaks ties between equal values.
    enum Tiebreak {
        /// The primary key (or, for a controller of given objects, the position given).
        case key(Int64)
        /// An unsaved object: its temporary ID's text.
        case temporary(String)
    }

    var values: [ControllerSortValue]
    var tiebreak: Tiebreak
}

/// A fetch request's sort descriptors resolved against an entity: makes the sort key of
/// an object from its values in the context, and compares keys as the SQL order does
/// (`nil` first ascending and last descending, strings by code point, case-insensitive
/// strings lower-cased, ties by primary key).
struct ControllerSortOrder {
    struct Term {
        var resolved: ResolvedKeyPath
        var ascending: Bool
        var caseInsensitive: Bool
    }

    let terms: [Term]
    /// The to-one relationship paths the terms go through (such as `user` for
    /// `user.name`): loaded for new members with one query per relationship.
    let relationshipPaths: [String]

    /// No terms: keys made with `key(position:)` keep a given order.
    static let given = ControllerSortOrder(terms: [], relationshipPaths: [])

    private init(terms: [Term], relationshipPaths: [String]) {
        self.terms = terms
        self.relationshipPaths = relationshipPaths
    }

    /// Resolves sort descriptors.
    ///
    /// - Throws: `FetchPredicateError` for an unknown key or a key through a to-many
    ///   relationship.
    init(_ descriptors: [FetchSortDescriptor], entity: EntityDescription, model: Model) throws {
        var terms: [Term] = []
        var paths: [String] = []
        for descriptor in descriptors {
            let components = descriptor.key.split(separator: ".").map(String.init)
            let resolved = try model.resolve(FetchPredicate.KeyPath(components), from: entity)
            guard resolved.toManyIndex == nil else {
                throw FetchPredicateError(message: "cannot sort by \(descriptor.key): it crosses a to-many relationship")
            }
            terms.append(Term(resolved: resolved, ascending: descriptor.ascending, caseInsensitive: descriptor.caseInsensitive))
            if !resolved.hops.isEmpty {
                let path = resolved.hops.map(\.relationship.name).joined(separator: ".")
                if !paths.contains(path) { paths.append(path) }
            }
        }
        self.init(terms: terms, relationshipPaths: paths)
    }

    /// The key of an object from its current values or, with `committed`, from its last
    /// saved or fetched values (for a request that leaves pending changes out; sort keys
    /// through relationships use the related objects as they are).
    func key(for object: ManagedObject, committed: Bool = false) -> ControllerSortKey {
        var values: [ControllerSortValue] = []
        values.reserveCapacity(terms.count)
        for term in terms {
            if committed, term.resolved.hops.isEmpty, case .attribute(let attribute) = term.resolved.end,
                let snapshot = object.snapshot, attribute.index < snapshot.count
            {
                values.append(ControllerSortValue(snapshot[attribute.index], caseInsensitive: term.caseInsensitive))
                continue
            }
            let reached = PredicateEvaluator.reach(term.resolved, from: object)
            if case .toOne = term.resolved.end {
                // SQL orders by the foreign key.
                values.append(reached.object?.objectID.primaryKey.map { .integer($0) } ?? .null)
                continue
            }
            values.append(ControllerSortValue(reached.scalar, caseInsensitive: term.caseInsensitive))
        }
        let tiebreak: ControllerSortKey.Tiebreak = object.objectID.primaryKey.map { .key($0) }
            ?? .temporary(object.objectID.description)
        return ControllerSortKey(values: values, tiebreak: tiebreak)
    }

    /// A key that keeps objects in a given order.
    static func key(position: Int) -> ControllerSortKey {
        ControllerSortKey(values: [], tiebreak: .key(Int64(position)))
    }

    /// How keys of this order compare.
    var keyOrder: ControllerKeyOrder { ControllerKeyOrder(ascending: terms.map(\.ascending)) }

    /// Orders two keys: negative, zero or positive.
    func compare(_ a: ControllerSortKey, _ b: ControllerSortKey) -> Int { keyOrder.compare(a, b) }

    /// Orders two keys by the first term only (the section of a sectioned controller).
    func compareFirst(_ a: ControllerSortKey, _ b: ControllerSortKey) -> Int {
        terms.isEmpty ? 0 : keyOrder.compareTerm(0, a, b)
    }

    static func compareValues(_ a: ControllerSortValue, _ b: ControllerSortValue) -> Int {
        switch (a, b) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case (.text(let x), .text(let y)): return compareUTF8(x, y)
        case (.integer(let x), .integer(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.double(let x), .double(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        default: return ValueComparison.compare(a.anyValue, b.anyValue) ?? 0
        }
    }

    /// Orders strings by their UTF-8 bytes (Unicode code-point order, as `COLLATE "C"`;
    /// Swift's `<` would compare canonical equivalents as equal).
    static func compareUTF8(_ a: String, _ b: String) -> Int {
        let fast = a.utf8.withContiguousStorageIfAvailable { left in
            b.utf8.withContiguousStorageIfAvailable { right -> Int in
                let length = Swift.min(left.count, right.count)
                if length > 0, let l = left.baseAddress, let r = right.baseAddress {
                    let result = memcmp(l, r, length)
                    if result != 0 { return result < 0 ? -1 : 1 }
                }
                return left.count == right.count ? 0 : (left.count < right.count ? -1 : 1)
            }
        }
        if let result = fast ?? nil { return result }
        for (x, y) in zip(a.utf8, b.utf8) where x != y { return x < y ? -1 : 1 }
        let (left, right) = (a.utf8.count, b.utf8.count)
        return left == right ? 0 : (left < right ? -1 : 1)
    }

    /// A section's name from the first value of an object: the string, the value's
    /// description, or the empty string for `nil`.
    func sectionName(of object: ManagedObject) -> String {
        guard let term = terms.first else { return "" }
        switch PredicateEvaluator.reach(term.resolved, from: object).scalar {
        case .none: return ""
        case .some(let text as String): return text
        case .some(let value): return "\(value)"
        }
    }
}

extension ControllerSortValue {
    /// The value for the general comparison (never reached for `.null`).
    var anyValue: any Sendable {
        switch self {
        case .null: return Int64(0)
        case .text(let text): return text
        case .integer(let number): return number
        case .double(let number): return number
        case .value(let value): return value
        }
    }
}

/// Compares sort keys: term by term (each ascending or descending), then by the
/// tiebreak (primary keys ascending, unsaved objects last).
struct ControllerKeyOrder {
    /// One entry per term.
    let ascending: [Bool]

    /// Orders two keys: negative, zero or positive.
    func compare(_ a: ControllerSortKey, _ b: ControllerSortKey) -> Int {
        for index in ascending.indices {
            let result = compareTerm(index, a, b)
            if result != 0 { return result }
        }
        switch (a.tiebreak, b.tiebreak) {
        case (.key(let x), .key(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.key, .temporary): return -1
        case (.temporary, .key): return 1
        case (.temporary(let x), .temporary(let y)): return ControllerSortOrder.compareUTF8(x, y)
        }
    }

    func compareTerm(_ index: Int, _ a: ControllerSortKey, _ b: ControllerSortKey) -> Int {
        guard index < a.values.count, index < b.values.count else { return 0 }
        let result = ControllerSortOrder.compareValues(a.values[index], b.values[index])
        return ascending[index] ? result : -result
    }
}
