import Foundation

/// A `MATCHES` pattern checked once for both engines that run it: PostgreSQL (`~` on
/// saved rows) and ICU through `NSRegularExpression` (unsaved objects in memory).
///
/// The two engines must give the same answers, so a pattern is accepted only when it
/// stays within the syntax both read alike: literals, `.`, `[…]` sets (with `[:alpha:]`
/// style classes), `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` (n, m ≤ 255) and their lazy
/// forms, `|`, `(…)`, `(?:…)`, look-ahead and look-behind, `^`, `$`, `\A`, back
/// references outside look-arounds, the escapes `\d \D \s \S \w \W \n \r \t \f \e \a
/// \uXXXX`, and a backslash before any punctuation. Anything else — an escape or group
/// that means something else (or nothing) in the other engine, a possessive quantifier,
/// a nested set — is a `FetchPredicateError`, as is a pattern either engine cannot
/// compile or whose parentheses do not balance on their own (so a pattern cannot close
/// the `^(?:…)$` it is wrapped in and match more than the whole string). In both engines
/// `.` matches a newline, and the pattern must match the whole string.
struct MatchesPattern {
    /// The pattern as given.
    let pattern: String
    /// The pattern compiled for ICU, anchored, `.` matching newlines.
    let whole: WholeMatch

    /// Checks and compiles a pattern.
    ///
    /// - Throws: `FetchPredicateError` saying what is not accepted.
    init(_ pattern: String) throws(FetchPredicateError) {
        if let problem = Self.syntaxProblem(in: pattern) {
            throw FetchPredicateError(message: "MATCHES pattern not accepted: \(problem)")
        }
        guard let whole = WholeMatch(pattern) else {
            throw FetchPredicateError(message: "MATCHES pattern is not a valid regular expression")
        }
        self.whole = whole
        self.pattern = pattern
    }

    /// The pattern anchored for PostgreSQL's `~`.
    var sqlPattern: String { "^(?:" + pattern + ")$" }

    /// Whether the whole text matches, spending the budget's steps; throws when they run
    /// out (catastrophic backtracking such as `(a+)+b` against many `a`s).
    func matches(_ text: String, budget: MatchesBudget) throws(FetchPredicateError) -> Bool {
        guard let found = whole.matches(text, budget: budget.steps) else {
            throw FetchPredicateError(
                message: "a MATCHES pattern took more than \(WholeMatch.steps) steps of "
                    + "the regular-expression engine on unsaved objects; simplify the pattern (nested "
                    + "repetition such as (a+)+ backtracks exponentially) or save before fetching")
        }
        return found
    }

    // MARK: - Syntax both engines share

    /// Letters allowed after a backslash outside sets (same meaning in both engines).
    private static let escapes: Set<Unicode.Scalar> = ["d", "D", "s", "S", "w", "W", "n", "r", "t", "f", "e", "a", "A", "u"]
    /// Letters allowed after a backslash inside sets (PostgreSQL refuses `\D \S \W`
    /// there, and `\A` means nothing).
    private static let setEscapes: Set<Unicode.Scalar> = ["d", "s", "w", "n", "r", "t", "f", "e", "a", "u"]

    private static func isDigit(_ scalar: Unicode.Scalar) -> Bool { ("0"..."9").contains(scalar) }
    private static func isLetter(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar)
    }
    private static func isHexDigit(_ scalar: Unicode.Scalar) -> Bool {
        isDigit(scalar) || ("a"..."f").contains(scalar) || ("A"..."F").contains(scalar)
    }

    /// What in the pattern is outside the shared syntax, or `nil`. Reads Unicode scalars
    /// (as both engines do), so a combining mark cannot hide a parenthesis.
    static func syntaxProblem(in pattern: String) -> String? {
        let scalars = Array(pattern.unicodeScalars)
        var index = 0
        /// Open groups: whether each is a look-around.
        var groups: [Bool] = []
        /// Whether the previous item was a quantifier, and whether a lazy `?` followed it.
        var afterQuantifier = false
        var afterLazy = false
        func peek(_ offset: Int = 0) -> Unicode.Scalar? {
            index + offset < scalars.count ? scalars[index + offset] : nil
        }
        while let scalar = peek() {
            var isQuantifier = false
            switch scalar {
            case "\\":
                guard let next = peek(1) else { return "it ends with a lone backslash" }
                if let problem = escapeProblem(next, scalars: scalars, at: &index, inSet: false) {
                    return problem
                }
                if isDigit(next) && groups.contains(true) {
                    return "back references inside look-ahead or look-behind are not supported"
                }
                afterQuantifier = false
                afterLazy = false
                continue
            case "(":
                if let problem = groupProblem(scalars, at: &index, groups: &groups) { return problem }
                afterQuantifier = false
                afterLazy = false
                continue
            case ")":
                guard groups.popLast() != nil else { return "it closes a group it did not open" }
            case "[":
                if let problem = setProblem(scalars, at: &index) { return problem }
                afterQuantifier = false
                afterLazy = false
                continue
            case "*", "+", "?":
                if afterQuantifier {
                    if scalar == "?" && !afterLazy {
                        afterLazy = true
                        index += 1
                        continue
                    }
                    return scalar == "+"
                        ? "possessive quantifiers such as *+ are not supported"
                        : "a quantifier cannot follow another quantifier"
                }
                isQuantifier = true
            case "{":
                if afterQuantifier { return "a quantifier cannot follow another quantifier" }
                if let problem = boundsProblem(scalars, at: &index) { return problem }
                afterQuantifier = true
                afterLazy = false
                continue
            default:
                break
            }
            afterQuantifier = isQuantifier
            afterLazy = false
            index += 1
        }
        return groups.isEmpty ? nil : "a group is not closed"
    }

    /// Checks the group opening at `index` (a `(`), records whether it is a look-around
    /// in `groups` and moves past it.
    private static func groupProblem(
        _ scalars: [Unicode.Scalar], at index: inout Int, groups: inout [Bool]
    ) -> String? {
        func peek(_ offset: Int) -> Unicode.Scalar? {
            index + offset < scalars.count ? scalars[index + offset] : nil
        }
        guard peek(1) == "?" else {
            groups.append(false)
            index += 1
            return nil
        }
        let first = peek(2)
        let second = peek(3)
        if first == ":" {
            groups.append(false)
            index += 3
        } else if first == "=" || first == "!" {
            groups.append(true)
            index += 3
        } else if first == "<" && (second == "=" || second == "!") {
            groups.append(true)
            index += 4
        } else {
            return "the group '(?\(first.map { String($0) } ?? "")' is not supported; use (…), (?:…), "
                + "(?=…), (?!…), (?<=…) or (?<!…) (and MATCHES[c] for case-insensitive matching)"
        }
        return nil
    }

    /// Checks the escape at `index` (a backslash, then `next`) and moves past it.
    private static func escapeProblem(
        _ next: Unicode.Scalar, scalars: [Unicode.Scalar], at index: inout Int, inSet: Bool
    ) -> String? {
        guard isLetter(next) || isDigit(next) else {
            index += 2  // a backslash before punctuation (or anything not ASCII) is that character
            return nil
        }
        if isDigit(next) {
            guard !inSet, next != "0" else { return "the escape \\\(next) is not supported" }
            index += 2
            return nil
        }
        guard (inSet ? setEscapes : escapes).contains(next) else {
            return "the escape \\\(next) is not supported (it differs between PostgreSQL and the "
                + "in-memory engine, or one lacks it)"
        }
        if next == "u" {
            let digits = scalars[min(scalars.count, index + 2)..<min(scalars.count, index + 6)]
            guard digits.count == 4, digits.allSatisfy(isHexDigit) else {
                return "\\u needs four hexadecimal digits"
            }
            index += 6
            return nil
        }
        index += 2
        return nil
    }

    /// Checks a bracket expression starting at `index` (`[`) and moves past it.
    private static func setProblem(_ scalars: [Unicode.Scalar], at index: inout Int) -> String? {
        index += 1
        if index < scalars.count, scalars[index] == "^" { index += 1 }
        if index < scalars.count, scalars[index] == "]" { index += 1 }  // a literal ]
        while index < scalars.count {
            let scalar = scalars[index]
            let next: Unicode.Scalar? = index + 1 < scalars.count ? scalars[index + 1] : nil
            switch scalar {
            case "]":
                index += 1
                return nil
            case "[":
                guard let kind = next, kind == ":" || kind == "." || kind == "=" else {
                    return "a '[' inside a set is not supported (write \\[ for the character)"
                }
                // Find the closing ":]" (".]", "=]").
                var end = index + 2
                while end + 1 < scalars.count, !(scalars[end] == kind && scalars[end + 1] == "]") { end += 1 }
                guard end + 1 < scalars.count else { return "a [\(kind) class is not closed" }
                index = end + 2
            case "\\":
                guard let next else { return "it ends with a lone backslash" }
                if let problem = escapeProblem(next, scalars: scalars, at: &index, inSet: true) { return problem }
            case "&" where next == "&", "-" where next == "-":
                return "set operations such as && and -- are not supported"
            default:
                index += 1
            }
        }
        return "a set '[' is not closed"
    }

    /// Checks `{n}`, `{n,}` or `{n,m}` at `index` and moves past it.
    private static func boundsProblem(_ scalars: [Unicode.Scalar], at index: inout Int) -> String? {
        let malformed = "'{' must start a repetition such as {2}, {2,} or {2,5}"
        var cursor = index + 1
        func number() -> Int? {
            var value = 0
            var count = 0
            while cursor < scalars.count, isDigit(scalars[cursor]), count < 4 {
                value = value * 10 + Int(scalars[cursor].value - 48)
                cursor += 1
                count += 1
            }
            return count > 0 ? value : nil
        }
        guard let low = number() else { return malformed }
        var high: Int? = low
        if cursor < scalars.count, scalars[cursor] == "," {
            cursor += 1
            if cursor < scalars.count, scalars[cursor] == "}" {
                high = nil
            } else {
                guard let bound = number() else { return malformed }
                high = bound
            }
        }
        guard cursor < scalars.count, scalars[cursor] == "}" else { return malformed }
        guard low <= 255, (high ?? low) <= 255 else { return "repetition counts above 255 are not supported" }
        if let high, high < low { return "the repetition {\(low),\(high)} has its bounds reversed" }
        index = cursor + 1
        return nil
    }
}

/// How much regular-expression work one in-memory evaluation (one fetch) may do
/// (`WholeMatch.steps` progress reports of ICU's matcher, shared by all its matches),
/// and the patterns it compiled.
final class MatchesBudget {
    /// The steps left for the evaluation.
    let steps = WholeMatch.Budget()
    private var patterns: [String: MatchesPattern] = [:]

    /// The checked pattern, compiled once per evaluation.
    func pattern(_ text: String) throws(FetchPredicateError) -> MatchesPattern {
        if let known = patterns[text] { return known }
        let checked = try MatchesPattern(text)
        patterns[text] = checked
        return checked
    }
}
