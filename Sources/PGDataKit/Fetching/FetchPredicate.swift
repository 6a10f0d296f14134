import Foundation

/// A filter for fetch requests, the counterpart of `NSPredicate`: parsed from a Core
/// Data format string or translated from Foundation's `#Predicate`, compiled to SQL with
/// bound parameters, and evaluated in memory with the same answers.
///
/// For example:
///
/// ```swift
/// let adults = try FetchPredicate(format: "age >= %d AND name BEGINSWITH[c] %@", 18, "a")
/// let named = try FetchPredicate(format: "%K == $NAME", "name")
///     .substituting(["NAME": "Ada"])
/// ```
///
/// Comparisons are two-valued as in `NSPredicate`: a comparison with `nil` (SQL `NULL`) is
/// false unless it asks for `nil` (`name == nil`), and `NOT` of it is true.
///
/// Build predicates in code with `.not(p)`, `.and([p, q])`, `.or([p, q])`,
/// `.comparison(…)` and `.constant(true)`; take them apart with `switch predicate.kind`.
/// A predicate may nest at most `maximumDepth` (256) levels, counted as the format parser
/// counts them: each `NOT` and each `SUBQUERY` is a level, and so is each group that needs
/// parentheses (an OR inside an AND, a compound inside a NOT). An AND inside an AND (or an
/// OR inside an OR) is not a level, so `a && b && c && …` folded from thousands of terms
/// is fine. Fetches, counts and `substituting(_:)` throw `FetchPredicateError` for deeper
/// predicates before any SQL is sent; releasing one never recurses, however deep it is.
public struct FetchPredicate: Sendable, Equatable, CustomStringConvertible {
    /// What a predicate is: one node of the `NSPredicate` tree.
    public enum Kind: Sendable, Equatable {
        /// `TRUEPREDICATE` or `FALSEPREDICATE`.
        case constant(Bool)
        /// `NOT p`.
        case not(FetchPredicate)
        /// `p AND q AND …`.
        case and([FetchPredicate])
        /// `p OR q OR …`.
        case or([FetchPredicate])
        /// A comparison such as `age > 30` or `ANY posts.title BEGINSWITH[c] "a"`.
        case comparison(Comparison)
    }

    /// Holds the kind; its release unlinks children instead of recursing.
    let node: PredicateNode

    /// Creates a predicate of a kind.
    public init(_ kind: Kind) {
        node = PredicateNode(kind)
    }

    /// What this predicate is, for `switch`.
    ///
    /// For example:
    ///
    /// ```swift
    /// if case .and(let parts) = predicate.kind { print(parts.count) }
    /// ```
    public var kind: Kind { node.kind }

    /// `TRUEPREDICATE` or `FALSEPREDICATE`.
    public static func constant(_ value: Bool) -> FetchPredicate { FetchPredicate(.constant(value)) }

    /// `NOT p`.
    public static func not(_ predicate: FetchPredicate) -> FetchPredicate { FetchPredicate(.not(predicate)) }

    /// `p AND q AND …` (`TRUEPREDICATE` when empty).
    public static func and(_ parts: [FetchPredicate]) -> FetchPredicate { FetchPredicate(.and(parts)) }

    /// `p OR q OR …` (`FALSEPREDICATE` when empty).
    public static func or(_ parts: [FetchPredicate]) -> FetchPredicate { FetchPredicate(.or(parts)) }

    /// A comparison such as `age > 30`.
    public static func comparison(_ comparison: Comparison) -> FetchPredicate {
        FetchPredicate(.comparison(comparison))
    }

    /// How deeply a predicate may nest (the format parser's limit too): deeper predicates
    /// are refused with `FetchPredicateError` rather than exhaust the stack here or the
    /// server's parser.
    public static let maximumDepth = 256

    /// A comparison between two expressions.
    public struct Comparison: Sendable, Equatable {
        /// The left side (usually a key path).
        public var left: Expression
        /// The operator.
        public var `operator`: Operator
        /// The right side (usually a value or a list).
        public var right: Expression
        /// `[c]`, `[d]`, `[cd]` for string operators.
        public var options: StringOptions
        /// `ANY`, `ALL` or `NONE` over a to-many key path on the left.
        public var quantifier: Quantifier?

        /// Creates a comparison.
        public init(
            _ left: Expression, _ operator: Operator, _ right: Expression,
            options: StringOptions = [], quantifier: Quantifier? = nil
        ) {
            self.left = left
            self.operator = `operator`
            self.right = right
            self.options = options
            self.quantifier = quantifier
        }
    }

    /// One side of a comparison.
    public indirect enum Expression: Sendable, Equatable {
        /// A key path such as `name` or `user.name`.
        case keyPath(KeyPath)
        /// A constant.
        case value(Value)
        /// A list, `{1, 2, 3}` or an array argument (for `IN` and `BETWEEN`).
        case list([Expression])
        /// `$NAME`, replaced by `substituting(_:)`.
        case variable(String)
        /// `keyPath.@count`: the number of objects in a to-many relationship.
        case count(KeyPath)
        /// `posts.@max.score`: `@min`, `@max`, `@sum` or `@avg` over the objects of a
        /// to-many relationship (the first key path) of a key read on each of them (the
        /// second key path, from the related object).
        case aggregate(CollectionOperator, KeyPath, KeyPath)
        /// `SUBQUERY(posts, $p, $p.score > 3).@count`: how many objects of a to-many
        /// relationship match a predicate.
        case subquery(Subquery)
    }

    /// `@min`, `@max`, `@sum` and `@avg`: what an aggregate computes over related objects.
    ///
    /// `nil` values are skipped; `@min`, `@max` and `@avg` of no values are `nil` (so a
    /// comparison with them is false), `@sum` of no values is 0. `@avg` is a `Double`.
    public enum CollectionOperator: String, Sendable, Equatable, CaseIterable {
        /// `@min`: the smallest value (strings by Unicode code point).
        case min = "@min"
        /// `@max`: the largest value (strings by Unicode code point).
        case max = "@max"
        /// `@sum`: the sum of numbers.
        case sum = "@sum"
        /// `@avg`: the arithmetic mean of numbers, as a `Double`.
        case average = "@avg"
    }

    /// `SUBQUERY(collection, $variable, predicate)`: the objects of a to-many key path
    /// that match a predicate, counted with `.@count`.
    ///
    /// Key paths in `predicate` start at the related object: the format parser turns
    /// `$p.title` into `title` and `$p` into `SELF`, as `NSPredicate` evaluates both
    /// against each object of the collection.
    ///
    /// For example:
    ///
    /// ```swift
    /// let subquery = FetchPredicate.Subquery(
    ///     collection: .init(["posts"]), variable: "p",
    ///     predicate: try FetchPredicate(format: "title BEGINSWITH 'a'"))
    /// let busy = FetchPredicate.comparison(.init(.subquery(subquery), .greaterThan, .value(.integer(0))))
    /// ```
    public struct Subquery: Sendable, Equatable {
        /// The to-many key path whose objects are tested (`posts`, `user.posts`).
        public var collection: KeyPath
        /// The variable's name without `$`, for printing only.
        public var variable: String
        /// The test, with key paths from the related object.
        public var predicate: FetchPredicate

        /// Creates a subquery.
        public init(collection: KeyPath, variable: String, predicate: FetchPredicate) {
            self.collection = collection
            self.variable = variable
            self.predicate = predicate
        }

        /// Subqueries are equal when their collections and predicates are; the variable's
        /// name does not matter.
        public static func == (lhs: Subquery, rhs: Subquery) -> Bool {
            lhs.collection == rhs.collection && lhs.predicate == rhs.predicate
        }
    }

    /// A dotted key path, with where it stood in the format string (for errors).
    public struct KeyPath: Sendable, Equatable, CustomStringConvertible {
        /// The names: `["user", "name"]` for `user.name`; none for `SELF`.
        public var components: [String]
        /// The character offset in the format string, if parsed from one.
        public var position: Int?

        /// Creates a key path.
        public init(_ components: [String], position: Int? = nil) {
            self.components = components
            self.position = position
        }

        /// Key paths are equal when their names are; the position is ignored.
        public static func == (lhs: KeyPath, rhs: KeyPath) -> Bool { lhs.components == rhs.components }

        /// `user.name`; `SELF` for the empty key path (the object itself).
        public var description: String { components.isEmpty ? "SELF" : components.joined(separator: ".") }

        /// The key path a dotted string names (a sort key, an aggregated or fetched
        /// property, a prefetched relationship): `"user.name"` → `["user", "name"]`.
        ///
        /// - Throws: `FetchPredicateError` for an empty string or an empty component
        ///   (`"age."`, `".age"`, `"a..b"`), which name nothing.
        static func dotted(_ text: String) throws(FetchPredicateError) -> KeyPath {
            let components = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard components.allSatisfy({ !$0.isEmpty }) else {
                throw FetchPredicateError(message: "the key path \"\(text)\" has an empty component")
            }
            return KeyPath(components)
        }
    }


    /// A constant value.
    public enum Value: Sendable, Equatable {
        /// `nil` / `NULL`.
        case null
        /// A string.
        case string(String)
        /// An integer.
        case integer(Int64)
        /// A floating-point number.
        case double(Double)
        /// A decimal number.
        case decimal(Decimal)
        /// `YES`/`NO`, `TRUE`/`FALSE`.
        case bool(Bool)
        /// A date.
        case date(Date)
        /// A UUID.
        case uuid(UUID)
        /// Binary data.
        case data(Data)
        /// A managed object, by ID (compared with to-one relationships).
        case object(ObjectID)
    }

    /// Comparison operators.
    public enum Operator: String, Sendable, Equatable, CaseIterable {
        /// `==`, `=`.
        case equal = "=="
        /// `!=`, `<>`.
        case notEqual = "!="
        /// `<`.
        case lessThan = "<"
        /// `<=`, `=<`.
        case lessThanOrEqual = "<="
        /// `>`.
        case greaterThan = ">"
        /// `>=`, `=>`.
        case greaterThanOrEqual = ">="
        /// `BETWEEN {low, high}` (inclusive).
        case between = "BETWEEN"
        /// `IN {…}` / `IN %@`: membership in a list.
        case `in` = "IN"
        /// `CONTAINS`: substring.
        case contains = "CONTAINS"
        /// `BEGINSWITH`.
        case beginsWith = "BEGINSWITH"
        /// `ENDSWITH`.
        case endsWith = "ENDSWITH"
        /// `LIKE` with `*` and `?` wildcards.
        case like = "LIKE"
        /// `MATCHES`: the whole string matches a regular expression.
        case matches = "MATCHES"
    }

    /// `ANY`, `ALL`, `NONE` (`SOME` is `ANY`).
    public enum Quantifier: String, Sendable, Equatable {
        /// At least one related object matches.
        case any = "ANY"
        /// Every related object matches (true when there are none).
        case all = "ALL"
        /// No related object matches (named so, not `none`, to stay clear of
        /// `Optional.none`).
        case noneOf = "NONE"
    }

    /// `[c]` (case-insensitive) and `[d]` (diacritic-insensitive).
    public struct StringOptions: OptionSet, Sendable, Hashable {
        /// The option bits.
        public let rawValue: Int
        /// Creates options from bits.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// `[c]`.
        public static let caseInsensitive = StringOptions(rawValue: 1)
        /// `[d]`.
        public static let diacriticInsensitive = StringOptions(rawValue: 2)
    }
}

/// A format string could not be parsed, or a predicate names something the entity does
/// not have.
///
/// For example:
///
/// ```swift
/// do {
///     _ = try FetchPredicate(format: "age >= ")
/// } catch FetchPredicateError.Code.syntaxError {
///     // the string does not parse: `position` points into `format`
/// } catch let error as FetchPredicateError where error.code == .invalidArgument {
///     print(error.message)
/// }
/// ```
public struct FetchPredicateError: Error, Sendable, Equatable, DescribedError {
    /// What is wrong, broadly.
    ///
    /// A struct of named values rather than an enum, so later versions can add codes
    /// without breaking a caller's `switch` (which therefore needs a `default:`).
    /// Backed by an internal enum; a code stands as a `catch` pattern:
    /// `catch FetchPredicateError.Code.syntaxError { … }` (see `ErrorCode`).
    public struct Code: ErrorCode {
        /// The codes, one case each: codes compare by case and none is made from a string.
        enum Base: String, Sendable {
            case syntaxError, invalidArgument, invalidPredicate
        }

        /// Which code this is.
        let base: Base

        private init(_ base: Base) { self.base = base }

        /// The format string does not parse; `position` points at the problem in
        /// `format`.
        public static let syntaxError = Code(.syntaxError)
        /// An argument (`%@`, `%d`, …) or a variable's value (`substituting(_:)`) cannot
        /// stand in a predicate: a type predicates do not take, an unsaved object, an
        /// integer beyond 64 bits, a variable without a value.
        public static let invalidArgument = Code(.invalidArgument)
        /// The predicate asks for what the entity or the fetch cannot give: a key the
        /// entity does not have, a comparison of mismatched types, a to-many key path
        /// without `ANY`, an expression PGDataKit does not support.
        public static let invalidPredicate = Code(.invalidPredicate)

        /// The code's name, such as `syntaxError`.
        public var description: String { base.rawValue }
    }

    /// What is wrong, broadly.
    public var code: Code
    /// The format string, if the predicate came from one.
    public var format: String?
    /// The character offset where the problem is, if known.
    public var position: Int?
    /// What was expected there, or what is wrong.
    public var message: String

    /// Creates an error.
    public init(code: Code = .invalidPredicate, message: String, position: Int? = nil, format: String? = nil) {
        self.code = code
        self.message = message
        self.position = position
        self.format = format
    }

    /// The message, the position, and the format string with a caret under the position.
    public var description: String {
        guard let format, let position else { return "invalid predicate: \(message)" }
        let caret = String(repeating: " ", count: max(0, position)) + "^"
        return "invalid predicate at position \(position): \(message)\n  \(format)\n  \(caret)"
    }

    /// The position and the format string, for `debugDescription`.
    package var contextFields: [ErrorContextField?] {
        [.name("position", position), .value("format", format, limit: nil)]
    }
}

extension FetchPredicate.Expression {
    /// Whether the expression reads the object (a key path, a count, an aggregate or a
    /// subquery).
    var isKeyPath: Bool {
        switch self {
        case .keyPath, .count, .aggregate, .subquery: return true
        case .value, .list, .variable: return false
        }
    }
}

extension FetchPredicate.Comparison {
    /// The same comparison with the key path on the left (`30 < age` → `age > 30`).
    func keyPathFirst() throws -> FetchPredicate.Comparison {
        if left.isKeyPath { return self }
        guard right.isKeyPath else { throw FetchPredicateError(message: "a comparison needs a key path on one side") }
        let mirrored: FetchPredicate.Operator
        switch self.operator {
        case .equal, .notEqual: mirrored = self.operator
        case .lessThan: mirrored = .greaterThan
        case .lessThanOrEqual: mirrored = .greaterThanOrEqual
        case .greaterThan: mirrored = .lessThan
        case .greaterThanOrEqual: mirrored = .lessThanOrEqual
        default: throw FetchPredicateError(message: "\(self.operator.rawValue) needs the key path on the left")
        }
        return FetchPredicate.Comparison(right, mirrored, left, options: options, quantifier: quantifier)
    }
}
