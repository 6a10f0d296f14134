import Foundation

extension FetchPredicate {
    /// Parses a Core Data (`NSPredicate`) format string, substituting arguments for `%@`,
    /// `%K`, `%s`, integer specifiers (`%d`, `%i`, `%u`, `%ld`, `%lu`, `%lld`, `%hi`, …) and
    /// floating-point ones (`%f`, `%lf`, `%e`, `%g`, …).
    ///
    /// For example:
    ///
    /// ```swift
    /// let recent = try FetchPredicate(
    ///     format: "ANY posts.title CONTAINS[cd] %@ AND age BETWEEN {18, 65}", "swift")
    /// let counted = try FetchPredicate(format: "%K.@count > %d", "posts", 3)
    /// let busy = try FetchPredicate(
    ///     format: "SUBQUERY(posts, $p, $p.title BEGINSWITH 'a').@count > 0 AND NOT SELF IN %@", [ada])
    /// ```
    ///
    /// Arguments are always data: a `%@` string containing quotes or SQL stays one string
    /// value, and a `%K` argument must be a dotted key path of letters, digits and
    /// underscores (optionally ending in `.@count`). Text inside quotes is never
    /// interpreted, so `name == "%@"` compares with the two characters `%@`.
    ///
    /// An `[Any]` or `[Any?]` passed as the only variadic argument is taken as the whole
    /// argument list (a Swift rule); pass such a list for `IN %@` with
    /// `init(format:argumentArray:)` as `[list]`. Typed arrays (`[Int]`) are fine.
    ///
    /// - Parameters:
    ///   - format: The format string.
    ///   - arguments: One argument per specifier, in order.
    /// - Throws: `FetchPredicateError` with the character offset of the problem.
    public init(format: String, _ arguments: Any?...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses a Core Data (`NSPredicate`) format string with an array of arguments.
    ///
    /// For example:
    ///
    /// ```swift
    /// let predicate = try FetchPredicate(format: "name IN %@", argumentArray: [["a", "b"]])
    /// ```
    ///
    /// `%@` takes `nil`, `NSNull`, strings, booleans, integers, floating-point numbers,
    /// `Decimal` (and `NSDecimalNumber`), `Date`, `UUID`, `Data`, saved managed objects,
    /// `ObjectID`s, and arrays or sets of these (which become lists, for `IN` and
    /// `BETWEEN`).
    ///
    /// - Parameters:
    ///   - format: The format string.
    ///   - argumentArray: One argument per specifier, in order; unused arguments are an
    ///     error.
    /// - Throws: `FetchPredicateError` with the character offset of the problem.
    public init(format: String, argumentArray: [Any?]) throws {
        var parser = try PredicateFormatParser(format: format, arguments: argumentArray)
        self = try parser.parse()
    }
}
