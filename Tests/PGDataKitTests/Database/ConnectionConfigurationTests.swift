import Testing

@testable import PGDataKit

@Suite("ConnectionConfiguration and errors without a server")
struct ConnectionConfigurationTests {
    @Test func descriptionHidesThePassword() {
        let configuration = ConnectionConfiguration("postgres://app:p%40ss@db.example:6543/shop")
        #expect(configuration.description == "app@db.example:6543/shop")
        #expect(configuration.parameters()?["password"] == "p@ss")
    }

    @Test func overridesReplaceTheDatabase() {
        let configuration = ConnectionConfiguration("host=h port=1 dbname=a user=u").database("b")
        #expect(configuration.parameters()?["dbname"] == "b")
        #expect(configuration.description == "u@h:1/b")
    }

    @Test func renderedStringQuotesEveryValue() throws {
        let configuration = ConnectionConfiguration("postgres://u@h/db").database("it's a \\ name")
        let rendered = try #require(configuration.renderedConnectionString())
        #expect(rendered.contains(#"dbname='it\'s a \\ name'"#))
        // libpq parses it back to the same values.
        #expect(ConnectionConfiguration(rendered).parameters()?["dbname"] == "it's a \\ name")
    }

    @Test func unparseableStringsAreReported() {
        #expect(ConnectionConfiguration("host='unterminated").parameters() == nil)
    }

    @Test func identifiersAreQuoted() {
        #expect(Connection.quoteIdentifier("users") == "\"users\"")
        #expect(Connection.quoteIdentifier("a\"b") == "\"a\"\"b\"")
        #expect(Connection.quoteQualifiedName(["s", "t"]) == "\"s\".\"t\"")
    }

    @Test func sqlStateClassesAndTransience() {
        #expect(SQLState.uniqueViolation.errorClass == "23")
        #expect(SQLState.serializationFailure.isTransient)
        #expect(SQLState.deadlockDetected.isTransient)
        #expect(!SQLState.uniqueViolation.isTransient)
    }

    @Test func errorDescriptionShowsStatementButNotValues() {
        var error = PostgresError(
            kind: .server, sqlState: .uniqueViolation, message: "duplicate key", detail: "Key exists",
            hint: "pick another", statement: "INSERT INTO t VALUES ($1)")
        error.parameterDescriptions = ["'private'"]
        #expect(error.description.contains("23505"))
        #expect(error.description.contains("INSERT INTO t VALUES ($1)"))
        #expect(error.description.contains("pick another"))
        #expect(!error.description.contains("private"))
        #expect(error.debugDescription.contains("private"))
    }
}
