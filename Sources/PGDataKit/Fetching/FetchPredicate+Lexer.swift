import Foundation

/// One token of a predicate format string, with the character offset where it starts.
struct PredicateFormatToken: Sendable, Equatable {
    /// What a token is.
    enum Kind: Sendable, Equatable {
        /// A name or a keyword: `name`, `AND`, `beginswith`.
        case word(String)
        /// `#name`: a name that is never a keyword.
        case escapedWord(String)
        /// `@count` (the name without `@`).
        case collectionOperator(String)
        /// A quoted string, escapes resolved.
        case string(String)
        /// An integer literal.
        case integer(Int64)
        /// A literal with a fraction or an exponent.
        case double(Double)
        /// Punctuation and symbolic operators: `==`, `<=`, `&&`, `(`, `{`, `,`, `.`.
        case symbol(String)
        /// `[c]`, `[d]`, `[cd]` (the letters between the brackets).
        case modifier(String)
        /// `%@`, `%K`, `%d` (the text after `%`).
        case specifier(String)
        /// `$NAME` (the name without `$`).
        case variable(String)
        /// The end of the format string.
        case end
    }

    /// What the token is.
    var kind: Kind
    /// The character offset of its first character.
    var position: Int
    /// Its text in the format string.
    var text: String

    /// The token for messages: `'AND'`, `the string "abc"`, or `end of string`.
    var quoted: String {
        switch kind {
        case .end: "end of string"
        case .string: "the string \(text)"
        default: "'\(text)'"
        }
    }

    /// The keyword this token spells (upper-cased), if it is an unescaped word.
    var keyword: String? {
        if case .word(let word) = kind { return word.uppercased() }
        return nil
    }
}

/// Splits a predicate format string into tokens, one at a time, so that errors come out
/// in the order they appear in the string.
struct PredicateFormatLexer {
    /// The format string's characters.
    let characters: [Character]
    /// The format string, for errors.
    let format: String
    /// The offset of the next character to read.
    private var index = 0

    /// The specifiers after `%` that take an integer argument.
    static let integerSpecifiers: Set<String> = [
        "d", "i", "u", "ld", "li", "lu", "lld", "lli", "llu", "hd", "hi", "hu", "hhd", "hhi", "hhu",
        "qd", "qi", "qu",
    ]
    /// The specifiers after `%` that take a floating-point argument (an integer is taken
    /// as the same number).
    static let floatingPointSpecifiers: Set<String> = [
        "f", "lf", "e", "le", "E", "lE", "g", "lg", "G", "lG",
    ]
    /// The specifiers after `%` that take an argument.
    static let specifiers: Set<String> = integerSpecifiers.union(floatingPointSpecifiers)
        .union(["@", "K", "s"])

    /// Symbolic operators and punctuation, longest first so `<=` wins over `<`.
    private static let symbols = [
        "==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||",
        "=", "<", ">", "!", "(", ")", "{", "}", ",", ".",
    ]

    /// Creates a lexer at the start of a format string.
    init(format: String) {
        self.format = format
        self.characters = Array(format)
    }

    /// A parse error (`syntaxError`, unless `code` says otherwise) at a character offset
    /// of this format string.
    func error(
        _ message: String, at position: Int, code: FetchPredicateError.Code = .syntaxError
    ) -> FetchPredicateError {
        FetchPredicateError(code: code, message: message, position: position, format: format)
    }

    /// Reads the next token; `.end` once the string is exhausted.
    mutating func next() throws(FetchPredicateError) -> PredicateFormatToken {
        while index < characters.count, characters[index].isWhitespace { index += 1 }
        let start = index
        guard index < characters.count else { return token(.end, from: start) }
        let character = characters[index]

        if Self.isIdentifierStart(character) {
            let word = readIdentifier()
            return token(.word(word), from: start)
        }
        if Self.isDigit(character) || (character == "-" && Self.isDigit(peek(1))) {
            return try readNumber()
        }
        switch character {
        case "\"", "'":
            return try readString(quote: character)
        case "#", "$", "@":
            index += 1
            guard let next = peek(0), Self.isIdentifierStart(next) else {
                let expected = switch character {
                case "#": "a key after '#'"
                case "$": "a variable name after '$'"
                default: "a collection operator such as @count after '@'"
                }
                throw error("expected \(expected), found \(describe(peek(0)))", at: index)
            }
            let name = readIdentifier()
            let kind: PredicateFormatToken.Kind = switch character {
            case "#": .escapedWord(name)
            case "$": .variable(name)
            default: .collectionOperator(name)
            }
            return token(kind, from: start)
        case "%":
            return try readSpecifier()
        case "[":
            return try readModifier()
        default:
            break
        }
        for symbol in Self.symbols where matches(symbol) {
            index += symbol.count
            return token(.symbol(symbol), from: start)
        }
        let hint = switch character {
        case "&": " (did you mean '&&'?)"
        case "|": " (did you mean '||'?)"
        case "-": " ('-' must be followed by a number)"
        default: ""
        }
        throw error("unexpected character '\(character)'\(hint)", at: start)
    }

    // MARK: - Pieces

    /// Whether a character can start a name: a letter or `_`.
    static func isIdentifierStart(_ character: Character) -> Bool {
        character == "_" || character.isLetter
    }

    /// Whether a character can continue a name: a letter, an ASCII digit or `_`.
    static func isIdentifierPart(_ character: Character) -> Bool {
        isIdentifierStart(character) || isDigit(character)
    }

    /// Whether a character is `0` to `9`.
    static func isDigit(_ character: Character?) -> Bool {
        guard let character, character.isASCII else { return false }
        return character.isNumber
    }

    private func peek(_ offset: Int) -> Character? {
        index + offset < characters.count ? characters[index + offset] : nil
    }

    private func matches(_ text: String) -> Bool {
        var offset = 0
        for character in text {
            guard peek(offset) == character else { return false }
            offset += 1
        }
        return true
    }

    private func describe(_ character: Character?) -> String {
        character.map { "'\($0)'" } ?? "end of string"
    }

    private func token(_ kind: PredicateFormatToken.Kind, from start: Int) -> PredicateFormatToken {
        PredicateFormatToken(kind: kind, position: start, text: String(characters[start..<index]))
    }

    private mutating func readIdentifier() -> String {
        let start = index
        while let character = peek(0), Self.isIdentifierPart(character) { index += 1 }
        return String(characters[start..<index])
    }

    private mutating func readDigits() -> Int {
        let start = index
        while Self.isDigit(peek(0)) { index += 1 }
        return index - start
    }

    private mutating func readNumber() throws(FetchPredicateError) -> PredicateFormatToken {
        let start = index
        if peek(0) == "-" { index += 1 }
        _ = readDigits()
        var isInteger = true
        if peek(0) == ".", Self.isDigit(peek(1)) {
            index += 1
            _ = readDigits()
            isInteger = false
        }
        if peek(0) == "e" || peek(0) == "E" {
            let exponent = index
            index += 1
            if peek(0) == "+" || peek(0) == "-" { index += 1 }
            guard readDigits() > 0 else {
                throw error("expected digits in the exponent of a number", at: exponent)
            }
            isInteger = false
        }
        if let next = peek(0), Self.isIdentifierPart(next) {
            index += 1
            while let character = peek(0), Self.isIdentifierPart(character) { index += 1 }
            throw error("invalid number '\(String(characters[start..<index]))'", at: start)
        }
        let text = String(characters[start..<index])
        if isInteger {
            guard let value = Int64(text) else {
                throw error("integer \(text) does not fit in 64 bits", at: start)
            }
            return token(.integer(value), from: start)
        }
        guard let value = Double(text), value.isFinite else {
            throw error("number \(text) is out of range", at: start)
        }
        return token(.double(value), from: start)
    }

    private mutating func readString(
        quote: Character
    ) throws(FetchPredicateError) -> PredicateFormatToken {
        let start = index
        index += 1
        var text = ""
        while true {
            guard let character = peek(0) else {
                throw error("unterminated string: no closing \(quote) before end of string",
                            at: start)
            }
            index += 1
            if character == quote { break }
            guard character == "\\" else {
                text.append(character)
                continue
            }
            let escape = index - 1
            guard let escaped = peek(0) else {
                throw error("unterminated string: no closing \(quote) before end of string",
                            at: start)
            }
            index += 1
            switch escaped {
            case "n": text.append("\n")
            case "t": text.append("\t")
            case "r": text.append("\r")
            case "0": text.append("\0")
            case "\"", "'", "\\": text.append(escaped)
            case "u":
                var value = try readHexEscape(at: escape)
                if (0xD800...0xDBFF).contains(value), matches("\\u") {
                    index += 2
                    let low = try readHexEscape(at: index - 2)
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw error("invalid surrogate pair in \\u escape", at: escape)
                    }
                    value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(value) else {
                    throw error("\\u escape is not a valid Unicode scalar", at: escape)
                }
                text.unicodeScalars.append(scalar)
            default:
                throw error("unknown escape '\\\(escaped)' in string; expected \\n, \\t, \\r, "
                            + "\\0, \\\", \\', \\\\ or \\uXXXX", at: escape)
            }
        }
        return token(.string(text), from: start)
    }

    private mutating func readHexEscape(at escape: Int) throws(FetchPredicateError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = peek(0)?.hexDigitValue else {
                throw error("expected four hexadecimal digits after \\u", at: escape)
            }
            value = value * 16 + UInt32(digit)
            index += 1
        }
        return value
    }

    private mutating func readSpecifier() throws(FetchPredicateError) -> PredicateFormatToken {
        let start = index
        index += 1
        if peek(0) == "%" {
            throw error("'%%' has no meaning outside a string; write a literal percent sign "
                        + "inside quotes, such as \"100%\"", at: start)
        }
        var text = ""
        while let character = peek(0), character.isASCII, character.isLetter || character == "@",
            text.count < 3
        {
            text.append(character)
            index += 1
            if Self.specifiers.contains(text) { break }
        }
        guard Self.specifiers.contains(text) else {
            throw error("unknown format specifier '%\(text)'; expected %@, %K, %s, an integer "
                        + "such as %d, %i, %u, %ld, %lu, %lld, %hi, or a number such as %f, %lf, %e, %g",
                        at: start)
        }
        return token(.specifier(text), from: start)
    }

    private mutating func readModifier() throws(FetchPredicateError) -> PredicateFormatToken {
        let start = index
        index += 1
        var letters = ""
        while let character = peek(0), character != "]", Self.isIdentifierPart(character) {
            letters.append(character)
            index += 1
        }
        guard peek(0) == "]" else {
            throw error("expected a modifier such as [c], [d] or [cd], found "
                        + "'\(String(characters[start..<min(index + 1, characters.count)]))'",
                        at: start)
        }
        index += 1
        return token(.modifier(letters), from: start)
    }
}
