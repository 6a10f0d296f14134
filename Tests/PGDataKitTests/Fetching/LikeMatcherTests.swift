import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// `LIKE` over scalars, as the in-memory evaluator runs it.
private func like(_ text: String, _ pattern: String) -> Bool {
    ValueComparison.like(Array(text.unicodeScalars), ValueComparison.likeTokens(pattern, []))
}

@Suite("In-memory LIKE without a server")
struct LikeMatcherTests {
    @Test(arguments: [
        ("", "", true), ("", "*", true), ("", "?", false), ("a", "", false),
        ("abc", "abc", true), ("abc", "ab", false), ("abc", "a?c", true), ("abc", "a??c", false),
        ("abc", "*", true), ("abc", "a*", true), ("abc", "*c", true), ("abc", "*b*", true),
        ("abc", "*d*", false), ("aaab", "*a*b", true), ("aaa", "*a*b", false),
        ("mallory", "m*y", true), ("mississippi", "m*iss*ppi", true), ("mississippi", "m*iss*ppx", false),
        ("x🚀y", "x?y", true), ("x🚀y", "x*", true), ("ab", "**a**b**", true), ("ab", "a*?*b", false),
        ("axxb", "a*?*b", true), ("abcabd", "*abd", true), ("abcabc", "*abd", false),
    ] as [(String, String, Bool)])
    func wildcardsMatchAsSQLLike(_ text: String, _ pattern: String, _ expected: Bool) {
        #expect(like(text, pattern) == expected, "\(text) LIKE \(pattern)")
    }

    /// A pattern of a million characters is matched in linear time and constant stack
    /// (it used to recurse once per pattern character and overflow the stack).
    @Test func millionCharacterPatternsDoNotExhaustTheStack() {
        let stars = String(repeating: "*", count: 1_000_000)
        #expect(like("abc", stars))
        #expect(like("", stars))
        #expect(!like("abc", stars + "d"))
        let alternating = String(repeating: "*a", count: 500_000)
        #expect(!like(String(repeating: "a", count: 1_000), alternating))
        #expect(like(String(repeating: "a", count: 600_000), alternating))
        let questions = String(repeating: "?", count: 1_000_000)
        #expect(like(String(repeating: "x", count: 1_000_000), questions))
        #expect(!like(String(repeating: "x", count: 999_999), questions))
    }

    /// The classic exponential case for backtracking matchers stays fast.
    @Test func backtrackingIsLinearPerStar() {
        let text = String(repeating: "a", count: 20_000)
        let pattern = String(repeating: "*a", count: 50) + "*b"
        #expect(!like(text, pattern))
    }
}
