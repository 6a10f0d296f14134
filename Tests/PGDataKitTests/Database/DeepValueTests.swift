import Foundation
import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Values nested far deeper than a stack can recurse: nothing the library does with them
/// recurses, and what it cannot store is a typed error (they used to overflow the stack
/// when compared, hashed, written out, encoded or released inside a predicate).
@Suite("Values nested deeper than the stack")
struct DeepValueTests {
    static let depth = 200_000  // Swift releases about 20,000–40,000 levels recursively before the stack runs out

    @Test func deepJSONIsComparedHashedWrittenAndRefusedWithoutRecursion() throws {
        var deep: JSONValue = 1
        var twin: JSONValue = 1
        for level in 0..<Self.depth {
            deep = level % 2 == 0 ? [deep] : ["k": deep]
            twin = level % 2 == 0 ? [twin] : ["k": twin]
        }
        #expect(deep == twin)
        #expect(deep.hashValue == twin.hashValue)
        #expect(deep != [twin])
        let text = deep.jsonText
        #expect(text.utf8.count > Self.depth * 2)
        #expect(text.hasSuffix("]}]}"))
        do {
            _ = try deep.postgresText()
            Issue.record("a value deeper than maximumDepth was encoded for the server")
        } catch let error as PostgresValueError {
            #expect("\(error)".contains("512"))
        }
        #expect(throws: EncodingError.self) { try JSONEncoder().encode(deep) }
        #expect(throws: (any Error).self) { try JSONValue(parsing: text) }
        JSONValue.dismantle(&deep)
        JSONValue.dismantle(&twin)
        #expect(deep == .null)
    }

    @Test func jsonAtTheLimitRoundTrips() throws {
        var value: JSONValue = "leaf"
        for _ in 0..<JSONValue.maximumDepth { value = [value] }  // 512 levels: the most that is kept
        let text = try #require(try value.postgresText())
        #expect(try JSONValue(parsing: text) == value)
        // (Foundation's JSONEncoder stops a little earlier on its own.)
        #expect(try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) == value)
        let deeper: JSONValue = [value]
        #expect(throws: PostgresValueError.self) { try deeper.postgresText() }
    }

    @Test func aPredicateReleasesDeeplyNestedListsWithoutRecursion() throws {
        var list = FetchPredicate.Expression.value(.integer(1))
        for _ in 0..<1_000_000 { list = .list([list]) }
        var predicate: FetchPredicate? = .comparison(.init(.keyPath(.init(["age"])), .in, list))
        list = .value(.null)  // the predicate holds the only reference now
        #expect(predicate?.description.contains("{…}") == true)
        #expect(predicate == predicate)
        predicate = nil  // released level by level
        #expect(predicate == nil)
    }
}
