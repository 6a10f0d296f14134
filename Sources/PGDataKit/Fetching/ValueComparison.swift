import Foundation

/// Comparison and string folding shared by in-memory evaluation and sorting, written to
/// agree with the SQL the compiler emits: strings compare by Unicode scalar (the order
/// of `COLLATE "C"` on UTF-8), `[c]` lower-cases, `[d]` strips combining diacritical
/// marks after canonical decomposition.
enum ValueComparison {
    /// The combining diacritical marks `[d]` removes (U+0300–U+036F).
    static let diacriticRange: ClosedRange<UInt32> = 0x300...0x36F
    /// The same range as a PostgreSQL regular expression (bound as a parameter).
    static let diacriticPattern = "[\u{300}-\u{36F}]"

    /// Applies `[c]` and `[d]` to a string.
    static func fold(_ string: String, _ options: FetchPredicate.StringOptions) -> [Unicode.Scalar] {
        var text = string
        if options.contains(.diacriticInsensitive) {
            var scalars = String.UnicodeScalarView()
            for scalar in text.decomposedStringWithCanonicalMapping.unicodeScalars
            where !diacriticRange.contains(scalar.value) {
                scalars.append(scalar)
            }
            text = String(scalars)
        }
        if options.contains(.caseInsensitive) { text = text.lowercased() }
        return Array(text.unicodeScalars)
    }

    /// Orders two scalar sequences by code point.
    static func compareScalars(_ left: [Unicode.Scalar], _ right: [Unicode.Scalar]) -> Int {
        for (a, b) in zip(left, right) where a != b { return a.value < b.value ? -1 : 1 }
        return left.count == right.count ? 0 : (left.count < right.count ? -1 : 1)
    }

    /// Orders two non-NULL values (of one attribute type, or two numbers); `nil` when
    /// they cannot be compared.
    ///
    /// Numbers compare as PostgreSQL compares them: as `double precision` when either is
    /// floating point, exactly (as `numeric`) otherwise. Dates compare at the microsecond
    /// PostgreSQL stores, rounded as they are when saved.
    static func compare(_ left: any Sendable, _ right: any Sendable, options: FetchPredicate.StringOptions = []) -> Int? {
        switch (left, right) {
        case (let a as String, let b as String):
            return compareScalars(fold(a, options), fold(b, options))
        case (let a as Bool, let b as Bool):
            return a == b ? 0 : (a ? 1 : -1)
        case (let a as UUID, let b as UUID):
            return compareBytes(bytes(a), bytes(b))
        case (let a as Data, let b as Data):
            return compareBytes(Array(a), Array(b))
        case (let a as Date, let b as Date):
            let (x, y) = (microseconds(a), microseconds(b))
            return x == y ? 0 : (x < y ? -1 : 1)
        case (let a as Decimal, let b as Decimal):
            return a == b ? 0 : (a < b ? -1 : 1)
        case (let a as JSONValue, let b as JSONValue):
            return a == b ? 0 : nil
        case (let a as Double, let b as Double):
            return a == b ? 0 : (a < b ? -1 : (a > b ? 1 : nil))
        default:
            if isFloatingPoint(left) || isFloatingPoint(right) {
                guard let a = double(of: left), let b = double(of: right) else { return nil }
                return a == b ? 0 : (a < b ? -1 : (a > b ? 1 : nil))
            }
            guard let a = number(left), let b = number(right) else { return compareArrays(left, right) }
            return a == b ? 0 : (a < b ? -1 : 1)
        }
    }

    /// 0 for two equal arrays (the same elements in the same order, compared as values
    /// of their type), `nil` otherwise: arrays are not ordered.
    private static func compareArrays(_ left: any Sendable, _ right: any Sendable) -> Int? {
        guard let a = left as? any StoredArray, let b = right as? any StoredArray, a.elementCount == b.elementCount
        else { return nil }
        for (x, y) in zip(a.anyElements, b.anyElements) where compare(x, y) != 0 { return nil }
        return 0
    }

    /// Whether an ordering operator (`<`, `<=`, `>`, `>=`) holds for two values that
    /// compare as `order` (negative, zero, positive).
    static func holds(_ op: FetchPredicate.Operator, order: Int) -> Bool {
        switch op {
        case .lessThan: return order < 0
        case .lessThanOrEqual: return order <= 0
        case .greaterThan: return order > 0
        default: return order >= 0
        }
    }

    /// `CONTAINS`, `BEGINSWITH`, `ENDSWITH`, `LIKE` or `MATCHES` of two strings, with
    /// `[c]`/`[d]` (as the SQL the compiler writes answers them).
    ///
    /// - Throws: `FetchPredicateError` for a `MATCHES` pattern that is not valid or
    ///   backtracks past the budget.
    static func matches(
        _ op: FetchPredicate.Operator, _ text: String, _ other: String, _ options: FetchPredicate.StringOptions,
        budget: MatchesBudget
    ) throws(FetchPredicateError) -> Bool {
        let folded = fold(text, options)
        switch op {
        case .contains: return contains(folded, fold(other, options))
        case .beginsWith: return folded.starts(with: fold(other, options))
        case .endsWith:
            let suffix = fold(other, options)
            return folded.count >= suffix.count && Array(folded.suffix(suffix.count)) == suffix
        case .like: return like(folded, likeTokens(other, options))
        default: return try budget.pattern(other).matches(String(String.UnicodeScalarView(folded)), budget: budget)
        }
    }

    /// A date as the whole seconds and microseconds it is saved with (see
    /// `Date.postgresText()`).
    static func microseconds(_ date: Date) -> (Double, Double) {
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite else { return (seconds, 0) }
        var whole = seconds.rounded(.down)
        var micros = ((seconds - whole) * 1_000_000).rounded()
        if micros >= 1_000_000 {
            whole += 1
            micros -= 1_000_000
        }
        return (whole, micros)
    }

    private static func isFloatingPoint(_ value: any Sendable) -> Bool {
        value is Double || value is Float
    }

    /// A number as `Double`, rounded once as PostgreSQL casts it to `double precision`
    /// (a `Decimal` through its exact digits, as `numeric` is).
    static func double(of value: any Sendable) -> Double? {
        switch value {
        case let value as Double: return value
        case let value as Float: return Double(value)
        case let value as Int: return Double(value)
        case let value as Int64: return Double(value)
        case let value as Int32: return Double(value)
        case let value as Int16: return Double(value)
        case let value as Decimal: return Double("\(value)")
        default: return nil
        }
    }

    private static func bytes(_ uuid: UUID) -> [UInt8] {
        // Unsafe: the 16 bytes of `uuid.uuid` are copied into an array inside the closure.
        withUnsafeBytes(of: uuid.uuid) { Array($0) }
    }

    private static func compareBytes(_ left: [UInt8], _ right: [UInt8]) -> Int {
        for (a, b) in zip(left, right) where a != b { return a < b ? -1 : 1 }
        return left.count == right.count ? 0 : (left.count < right.count ? -1 : 1)
    }

    /// Integers and floating-point values as Decimal (exact for integers) for comparing
    /// across widths.
    static func number(_ value: any Sendable) -> Decimal? {
        switch value {
        case let value as Int: return Decimal(value)
        case let value as Int64: return Decimal(value)
        case let value as Int32: return Decimal(Int(value))
        case let value as Int16: return Decimal(Int(value))
        case let value as Double: return value.isFinite ? Decimal(value) : (value > 0 ? Decimal.greatestFiniteMagnitude : -Decimal.greatestFiniteMagnitude)
        case let value as Float: return Decimal(Double(value))
        case let value as Decimal: return value
        default: return nil
        }
    }

    /// One element of a `LIKE` pattern.
    enum LikeToken: Equatable {
        /// `*`: any run of characters.
        case anyRun
        /// `?`: one character.
        case one
        /// A character matched as itself.
        case literal(Unicode.Scalar)
    }

    /// An `NSPredicate` `LIKE` pattern as tokens: `*` any run, `?` one character, `\`
    /// before a character for that character itself (a final lone `\` is a backslash).
    /// `[c]`/`[d]` fold the literal runs between wildcards, as SQL folds the converted
    /// pattern (see `PredicateValues.likePattern`).
    static func likeTokens(_ pattern: String, _ options: FetchPredicate.StringOptions) -> [LikeToken] {
        var tokens: [LikeToken] = []
        var run = String.UnicodeScalarView()
        func flush() {
            if run.isEmpty { return }
            tokens.append(contentsOf: fold(String(run), options).map(LikeToken.literal))
            run = String.UnicodeScalarView()
        }
        var escaped = false
        for scalar in pattern.unicodeScalars {
            if escaped {
                escaped = false
                run.append(scalar)
                continue
            }
            switch scalar {
            case "\\": escaped = true
            case "*":
                flush()
                tokens.append(.anyRun)
            case "?":
                flush()
                tokens.append(.one)
            default: run.append(scalar)
            }
        }
        if escaped { run.append("\\") }
        flush()
        return tokens
    }

    /// Whether `text` matches `LIKE` tokens.
    ///
    /// Two cursors with backtracking to the last `*` only: no recursion and no memo, so
    /// any pattern length is safe. Backtracking to an earlier `*` is never needed (the
    /// last `*` can absorb whatever an earlier one would have), so the worst case is
    /// O(text × pattern) and common patterns are linear.
    static func like(_ text: [Unicode.Scalar], _ pattern: [LikeToken]) -> Bool {
        var t = 0
        var p = 0
        var star: Int?  // the pattern position after the last `*` seen
        var resume = 0  // the text position that `*` absorbs up to, exclusive
        while t < text.count {
            if p < pattern.count && pattern[p] == .anyRun {
                while p < pattern.count && pattern[p] == .anyRun { p += 1 }
                star = p
                resume = t
            } else if p < pattern.count && (pattern[p] == .one || pattern[p] == .literal(text[t])) {
                t += 1
                p += 1
            } else if let afterStar = star {
                // Let the last `*` take one more character and retry from there.
                resume += 1
                t = resume
                p = afterStar
            } else {
                return false
            }
        }
        while p < pattern.count && pattern[p] == .anyRun { p += 1 }
        return p == pattern.count
    }

    /// Whether `text` contains `part` as a run of scalars.
    static func contains(_ text: [Unicode.Scalar], _ part: [Unicode.Scalar]) -> Bool {
        if part.isEmpty { return true }
        guard part.count <= text.count else { return false }
        for start in 0...(text.count - part.count) where text[start] == part[0] {
            if Array(text[start..<(start + part.count)]) == part { return true }
        }
        return false
    }
}
