/// How fetch results are ordered: a key (through to-one relationships allowed), the
/// direction, and whether strings compare case-insensitively.
///
/// For example:
///
/// ```swift
/// request.sortDescriptors = [
///     FetchSortDescriptor("user.name", caseInsensitive: true),
///     FetchSortDescriptor("age", ascending: false),
/// ]
/// ```
///
/// `nil` sorts before every value ascending and after every value descending; strings
/// sort by Unicode code point (`COLLATE "C"`), the same in SQL and in memory, and ties
/// are broken by primary key.
public struct FetchSortDescriptor: Sendable, Equatable {
    /// The key path, such as `name` or `user.name`.
    public var key: String
    /// Smallest first when `true`.
    public var ascending: Bool
    /// Compare strings lower-cased.
    public var caseInsensitive: Bool

    /// Creates a sort descriptor.
    public init(_ key: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.key = key
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }
}
