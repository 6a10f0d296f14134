import Foundation

/// A recursive-descent parser over the tokens of one format string.
///
/// ```
/// predicate  := or END
/// or         := and (("OR" | "||") and)*
/// and        := not (("AND" | "&&") not)*
/// not        := ("NOT" | "!") not | "(" or ")" | TRUEPREDICATE | FALSEPREDICATE | comparison
/// comparison := quantifier? operand operator modifier? operand
/// operand    := keyPath | value | "{" operands? "}" | "$" name | specifier | subquery
/// keyPath    := ("SELF" | "$" variable | name | "#" name | "%K") ("." name)*
///               ("." "@count" | "." ("@min" | "@max" | "@sum" | "@avg") ("." name)+)?
/// subquery   := "SUBQUERY" "(" keyPath "," "$" variable "," or ")" "." "@count"
/// ```
struct PredicateFormatParser {
    private var lexer: PredicateFormatLexer
    private var current: PredicateFormatToken
    /// Where the last consumed token ended.
    private var previousEnd = 0
    private let arguments: [Any?]
    private var argumentIndex = 0
    /// How many `(`, `NOT` and `SUBQUERY` enclose the current token.
    private var depth = 0
    /// The variables of the enclosing `SUBQUERY`s, innermost last.
    private var subqueryVariables: [String] = []
    /// Deeper nesting is an error rather than a stack overflow.
    private static let maximumDepth = FetchPredicate.maximumDepth

    private static let operators: [String: FetchPredicate.Operator] = [
        "==": .equal, "=": .equal, "!=": .notEqual, "<>": .notEqual,
        "<": .lessThan, "<=": .lessThanOrEqual, "=<": .lessThanOrEqual,
        ">": .greaterThan, ">=": .greaterThanOrEqual, "=>": .greaterThanOrEqual,
        "BETWEEN": .between, "IN": .in, "CONTAINS": .contains, "BEGINSWITH": .beginsWith,
        "ENDSWITH": .endsWith, "LIKE": .like, "MATCHES": .matches,
    ]
    private static let quantifiers: [String: FetchPredicate.Quantifier] = [
        "ANY": .any, "SOME": .any, "ALL": .all, "NONE": .noneOf,
    ]
    /// Operators that take `[c]`, `[d]`, `[cd]`.
    private static let operatorsWithOptions: Set<FetchPredicate.Operator> = [
        .equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual, .between,
        .in, .contains, .beginsWith, .endsWith, .like, .matches,
    ]
    /// Words that are not key paths unless escaped with `#`.
    private static let reservedWords: Set<String> = Set(operators.keys)
        .union(quantifiers.keys)
        .union(["AND", "OR", "NOT", "NIL", "NULL", "TRUE", "FALSE", "YES", "NO",
                "TRUEPREDICATE", "FALSEPREDICATE", "SELF", "SUBQUERY"])

    init(format: String, arguments: [Any?]) throws(FetchPredicateError) {
        lexer = PredicateFormatLexer(format: format)
        current = try lexer.next()
        self.arguments = arguments
    }

    mutating func parse() throws(FetchPredicateError) -> FetchPredicate {
        let predicate = try parseOr()
        if current.kind == .symbol(")") {
            throw error("unexpected ')' without a matching '('", at: current.position)
        }
        guard current.kind == .end else {
            throw error("expected AND, OR or end of string, found \(current.quoted)",
                        at: current.position)
        }
        guard argumentIndex == arguments.count else {
            throw error("too many arguments: the format uses \(argumentIndex) but "
                        + "\(arguments.count) were given", at: lexer.characters.count)
        }
        return predicate
    }

    // MARK: Predicates

    private mutating func parseOr() throws(FetchPredicateError) -> FetchPredicate {
        var parts = [try parseAnd()]
        while current.keyword == "OR" || current.kind == .symbol("||") {
            try advance()
            parts.append(try parseAnd())
        }
        guard parts.count > 1 else { return parts[0] }
        return .or(parts.flatMap { part -> [FetchPredicate] in
            if case .or(let inner) = part.kind { return inner }
            return [part]
        })
    }

    private mutating func parseAnd() throws(FetchPredicateError) -> FetchPredicate {
        var parts = [try parseNot()]
        while current.keyword == "AND" || current.kind == .symbol("&&") {
            try advance()
            parts.append(try parseNot())
        }
        guard parts.count > 1 else { return parts[0] }
        return .and(parts.flatMap { part -> [FetchPredicate] in
            if case .and(let inner) = part.kind { return inner }
            return [part]
        })
    }

    private mutating func parseNot() throws(FetchPredicateError) -> FetchPredicate {
        let nests = current.keyword == "NOT" || current.kind == .symbol("!")
            || current.kind == .symbol("(")
        if nests {
            guard depth < Self.maximumDepth else {
                throw error("predicate nested more than \(Self.maximumDepth) levels deep",
                            at: current.position)
            }
            depth += 1
        }
        defer { if nests { depth -= 1 } }
        if current.keyword == "NOT" || current.kind == .symbol("!") {
            try advance()
            return .not(try parseNot())
        }
        if current.kind == .symbol("(") {
            let open = current.position
            try advance()
            let inner = try parseOr()
            guard current.kind == .symbol(")") else {
                throw error("expected ')' to close the '(' at position \(open), found "
                            + current.quoted, at: current.position)
            }
            try advance()
            return inner
        }
        if current.keyword == "TRUEPREDICATE" || current.keyword == "FALSEPREDICATE" {
            let value = current.keyword == "TRUEPREDICATE"
            try advance()
            return .constant(value)
        }
        return .comparison(try parseComparison())
    }

    private mutating func parseComparison(
    ) throws(FetchPredicateError) -> FetchPredicate.Comparison {
        var quantifier: FetchPredicate.Quantifier?
        var quantifierText = ""
        if let keyword = current.keyword, let found = Self.quantifiers[keyword] {
            quantifier = found
            quantifierText = current.text
            try advance()
        }
        let leftPosition = current.position
        let left = try parseOperand(
            expecting: quantifier == nil
                ? "a key path, a value or '('" : "a key path after '\(quantifierText)'")
        if quantifier != nil {
            guard case .keyPath = left else {
                throw error("expected a key path after '\(quantifierText)'", at: leftPosition)
            }
        }
        let operatorToken = current
        guard let found = Self.comparisonOperator(operatorToken) else {
            throw error("expected an operator such as ==, <, IN or CONTAINS after "
                        + "'\(source(from: leftPosition))', found \(current.quoted)",
                        at: current.position)
        }
        try advance()
        var options: FetchPredicate.StringOptions = []
        if case .modifier(let letters) = current.kind {
            options = try parseOptions(letters, operator: found, text: operatorToken.text)
            try advance()
        }
        let rightPosition = current.position
        let right = try parseOperand(expecting: "a value after '\(operatorToken.text)'")
        let comparison = FetchPredicate.Comparison(
            left, found, right, options: options, quantifier: quantifier)
        do {
            return try comparison.checked(leftPosition: leftPosition, rightPosition: rightPosition)
        } catch {
            throw self.error(error.message, at: error.position ?? rightPosition)
        }
    }

    private static func comparisonOperator(
        _ token: PredicateFormatToken
    ) -> FetchPredicate.Operator? {
        switch token.kind {
        case .word(let word): operators[word.uppercased()]
        case .symbol(let symbol): operators[symbol]
        default: nil
        }
    }

    private func parseOptions(
        _ letters: String, operator: FetchPredicate.Operator, text: String
    ) throws(FetchPredicateError) -> FetchPredicate.StringOptions {
        guard Self.operatorsWithOptions.contains(`operator`) else {
            throw error("'[\(letters)]' is not allowed after '\(text)'; only string comparisons "
                        + "take [c], [d] or [cd]", at: current.position)
        }
        var options: FetchPredicate.StringOptions = []
        for letter in letters.lowercased() {
            let option: FetchPredicate.StringOptions = switch letter {
            case "c": .caseInsensitive
            case "d": .diacriticInsensitive
            default: []
            }
            guard !option.isEmpty, !options.contains(option) else {
                throw error("unknown modifier '[\(letters)]'; expected [c], [d] or [cd]",
                            at: current.position)
            }
            options.insert(option)
        }
        guard !options.isEmpty else {
            throw error("empty modifier '[]'; expected [c], [d] or [cd]", at: current.position)
        }
        return options
    }

    // MARK: Operands

    private mutating func parseOperand(
        expecting expectation: String
    ) throws(FetchPredicateError) -> FetchPredicate.Expression {
        let token = current
        switch token.kind {
        case .word(let word):
            let keyword = word.uppercased()
            guard Self.reservedWords.contains(keyword) else { return try parseKeyPath() }
            let value: FetchPredicate.Value
            switch keyword {
            case "NIL", "NULL": value = .null
            case "TRUE", "YES": value = .bool(true)
            case "FALSE", "NO": value = .bool(false)
            case "SELF":
                return try parseKeyPath()
            case "SUBQUERY":
                return try parseSubquery()
            default:
                throw error("expected \(expectation), found reserved word \(token.quoted) "
                            + "(write #\(word) for a key named \(word))", at: token.position)
            }
            try advance()
            return .value(value)
        case .escapedWord, .specifier("K"):
            return try parseKeyPath()
        case .string(let string):
            try advance()
            return .value(.string(string))
        case .integer(let integer):
            try advance()
            return .value(.integer(integer))
        case .double(let double):
            try advance()
            return .value(.double(double))
        case .variable(let name):
            if let index = subqueryVariables.lastIndex(of: name) {
                guard index == subqueryVariables.count - 1 else {
                    throw error("$\(name) belongs to an enclosing SUBQUERY; a nested SUBQUERY can "
                                + "use only its own variable", at: token.position)
                }
                return try parseKeyPath()
            }
            try advance()
            return .variable(name)
        case .specifier(let specifier):
            let argument = try takeArgument(for: token)
            try advance()
            return try expression(for: argument, specifier: specifier, at: token.position)
        case .symbol("{"):
            return try parseList()
        case .collectionOperator(let name):
            throw error("'@\(name)' must follow a key path, as in posts.@count",
                        at: token.position)
        default:
            throw error("expected \(expectation), found \(token.quoted)", at: token.position)
        }
    }

    private mutating func parseList() throws(FetchPredicateError) -> FetchPredicate.Expression {
        let open = current.position
        try advance()
        var elements: [FetchPredicate.Expression] = []
        if current.kind == .symbol("}") {
            try advance()
            return .list(elements)
        }
        while true {
            let position = current.position
            if current.kind == .symbol("{") {
                throw error("nested lists are not supported", at: position)
            }
            let element = try parseOperand(expecting: "a value in the list")
            if case .list = element { throw error("nested arrays are not supported", at: position) }
            if case .subquery = element { throw error("SUBQUERY cannot stand in a list", at: position) }
            elements.append(element)
            if current.kind == .symbol("}") { break }
            guard current.kind == .symbol(",") else {
                throw error("expected ',' or '}' in the list opened at position \(open), found "
                            + current.quoted, at: current.position)
            }
            try advance()
        }
        try advance()
        return .list(elements)
    }

    /// A key path: names joined by dots, starting with a name, `#name`, `%K`, `SELF`
    /// (the object itself) or the enclosing `SUBQUERY`'s variable (the related object),
    /// perhaps with `@count` at the end or `@min`/`@max`/`@sum`/`@avg` before a key.
    private mutating func parseKeyPath() throws(FetchPredicateError) -> FetchPredicate.Expression {
        let start = current
        var components: [String] = []
        var isCount = false
        /// The operator, where it splits the components, and where it stood.
        var aggregate: (function: FetchPredicate.CollectionOperator, split: Int, position: Int)?
        switch start.kind {
        case .word(let name) where name.uppercased() == "SELF":
            break
        case .variable:
            break
        case .word(let name), .escapedWord(let name):
            components = [name]
        default:
            let argument = try takeArgument(for: start)
            let parsed = try keyPathArgument(argument, at: start)
            components = parsed.components
            isCount = parsed.isCount
            aggregate = parsed.aggregate.map { ($0.function, $0.split, start.position) }
        }
        try advance()
        while current.kind == .symbol(".") {
            if isCount {
                throw error("nothing can follow @count in a key path", at: current.position)
            }
            try advance()
            switch current.kind {
            case .word(let name), .escapedWord(let name):
                components.append(name)
            case .collectionOperator(let name):
                let function = FetchPredicate.CollectionOperator(rawValue: "@" + name.lowercased())
                guard function != nil || name.lowercased() == "count" else {
                    throw error("unsupported collection operator '@\(name)'; expected @count, @min, "
                                + "@max, @sum or @avg", at: current.position)
                }
                if let aggregate {
                    throw error("only keys can follow \(aggregate.function.rawValue), not '@\(name)'",
                                at: current.position)
                }
                guard !components.isEmpty else {
                    throw error("'@\(name)' must follow a to-many key path, as in posts.@\(name)",
                                at: current.position)
                }
                if let function {
                    aggregate = (function, components.count, current.position)
                } else {
                    isCount = true
                }
            default:
                throw error("expected a key after '.', found \(current.quoted)",
                            at: current.position)
            }
            try advance()
        }
        if let aggregate {
            guard components.count > aggregate.split else {
                throw error("\(aggregate.function.rawValue) needs a key after it, as in "
                            + "posts.\(aggregate.function.rawValue).score", at: aggregate.position)
            }
            return .aggregate(
                aggregate.function,
                FetchPredicate.KeyPath(Array(components[..<aggregate.split]), position: start.position),
                FetchPredicate.KeyPath(Array(components[aggregate.split...]), position: start.position))
        }
        let keyPath = FetchPredicate.KeyPath(components, position: start.position)
        return isCount ? .count(keyPath) : .keyPath(keyPath)
    }

    /// `SUBQUERY(collection, $variable, predicate).@count`; inside, the variable (and a
    /// bare key path) stands for each object of the collection.
    private mutating func parseSubquery() throws(FetchPredicateError) -> FetchPredicate.Expression {
        let start = current.position
        try advance()
        guard current.kind == .symbol("(") else {
            throw error("expected '(' after SUBQUERY, found \(current.quoted)", at: current.position)
        }
        guard depth < Self.maximumDepth else {
            throw error("predicate nested more than \(Self.maximumDepth) levels deep", at: start)
        }
        depth += 1
        defer { depth -= 1 }
        try advance()
        let collectionPosition = current.position
        let collection = try parseOperand(expecting: "a to-many key path as SUBQUERY's collection")
        guard case .keyPath(let path) = collection, !path.components.isEmpty else {
            throw error("SUBQUERY's collection must be a to-many key path such as posts",
                        at: collectionPosition)
        }
        try expect(",", after: "SUBQUERY's collection")
        guard case .variable(let name) = current.kind else {
            throw error("expected a variable such as $p after SUBQUERY's collection, found "
                        + current.quoted, at: current.position)
        }
        try advance()
        try expect(",", after: "SUBQUERY's variable")
        subqueryVariables.append(name)
        let predicate: FetchPredicate
        do {
            predicate = try parseOr()
        } catch {
            subqueryVariables.removeLast()
            throw error
        }
        subqueryVariables.removeLast()
        guard current.kind == .symbol(")") else {
            throw error("expected ')' to close the SUBQUERY at position \(start), found "
                        + current.quoted, at: current.position)
        }
        try advance()
        let countPosition = current.position
        var counted = false
        if current.kind == .symbol(".") {
            try advance()
            if case .collectionOperator(let operation) = current.kind, operation.lowercased() == "count" {
                counted = true
                try advance()
            }
        }
        guard counted else {
            throw error("SUBQUERY(…) must be followed by .@count, as in "
                        + "SUBQUERY(posts, $p, $p.title == 'a').@count > 0", at: countPosition)
        }
        return .subquery(FetchPredicate.Subquery(collection: path, variable: name, predicate: predicate))
    }

    private mutating func expect(_ symbol: String, after what: String) throws(FetchPredicateError) {
        guard current.kind == .symbol(symbol) else {
            throw error("expected '\(symbol)' after \(what), found \(current.quoted)", at: current.position)
        }
        try advance()
    }

    // MARK: Arguments

    private mutating func takeArgument(
        for token: PredicateFormatToken
    ) throws(FetchPredicateError) -> Any? {
        guard argumentIndex < arguments.count else {
            throw error("missing argument for \(token.text): only \(arguments.count) "
                        + "argument\(arguments.count == 1 ? " was" : "s were") given",
                        at: token.position)
        }
        defer { argumentIndex += 1 }
        return arguments[argumentIndex]
    }

    /// Splits and checks a `%K` argument: names of letters, digits and `_` joined by dots,
    /// optionally ending in `.@count` or with `@min`, `@max`, `@sum` or `@avg` before the
    /// last key(s) (`posts.@max.score`).
    private func keyPathArgument(
        _ argument: Any?, at token: PredicateFormatToken
    ) throws(FetchPredicateError) -> (
        components: [String], isCount: Bool,
        aggregate: (function: FetchPredicate.CollectionOperator, split: Int)?
    ) {
        let label = "argument \(argumentIndex) for %K"
        guard let string = argument as? String else {
            throw error("\(label) must be a key path string, got \(typeName(argument))",
                        at: token.position)
        }
        var components: [String] = []
        var isCount = false
        var aggregate: (function: FetchPredicate.CollectionOperator, split: Int)?
        var valid = true
        for part in string.split(separator: ".", omittingEmptySubsequences: false).map(String.init) {
            if isCount { valid = false }
            if part.first == "@" {
                let function = FetchPredicate.CollectionOperator(rawValue: part)
                if components.isEmpty || aggregate != nil || (function == nil && part != "@count") {
                    valid = false
                } else if let function {
                    aggregate = (function, components.count)
                } else {
                    isCount = true
                }
                continue
            }
            guard let first = part.first, PredicateFormatLexer.isIdentifierStart(first),
                part.allSatisfy(PredicateFormatLexer.isIdentifierPart)
            else {
                valid = false
                continue
            }
            components.append(part)
        }
        if let aggregate, components.count == aggregate.split { valid = false }
        guard valid, !components.isEmpty else {
            throw error("\(label) is not a key path: expected names of letters, digits and "
                        + "underscores joined by dots", at: token.position)
        }
        return (components, isCount, aggregate)
    }

    /// Converts the argument of `%@`, `%d`, `%f` or `%s`.
    private func expression(
        for argument: Any?, specifier: String, at position: Int
    ) throws(FetchPredicateError) -> FetchPredicate.Expression {
        let label = "argument \(argumentIndex) for %\(specifier)"
        let converted: FetchPredicate.Expression
        do {
            converted = try FetchPredicate.Expression(argument: argument)
        } catch {
            throw self.error("\(label): \(error.message)", at: position, code: .invalidArgument)
        }
        let expected: String
        switch specifier {
        case "@":
            return converted
        case "s":
            if case .value(.string) = converted { return converted }
            expected = "a string"
        case _ where PredicateFormatLexer.floatingPointSpecifiers.contains(specifier):
            if case .value(.double) = converted { return converted }
            if case .value(.integer(let integer)) = converted {
                return .value(.double(Double(integer)))
            }
            expected = "a number"
        default:
            if case .value(.integer) = converted { return converted }
            expected = "an integer"
        }
        throw error("\(label) must be \(expected), got \(typeName(argument))", at: position, code: .invalidArgument)
    }

    private func typeName(_ argument: Any?) -> String {
        argument.map { "\(type(of: $0))" } ?? "nil"
    }

    // MARK: Tokens

    private mutating func advance() throws(FetchPredicateError) {
        previousEnd = current.position + current.text.count
        current = try lexer.next()
    }

    /// The format string's text from an offset to the end of the last consumed token.
    private func source(from position: Int) -> String {
        String(lexer.characters[position..<max(position, previousEnd)])
    }

    /// A `syntaxError` (unless `code` says otherwise) at a character offset of the format.
    private func error(
        _ message: String, at position: Int, code: FetchPredicateError.Code = .syntaxError
    ) -> FetchPredicateError {
        lexer.error(message, at: position, code: code)
    }
}
