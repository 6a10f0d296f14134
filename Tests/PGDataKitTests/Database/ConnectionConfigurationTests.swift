import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

@Suite("ConnectionConfiguration and errors without a server")
struct ConnectionConfigurationTests {
    @Test func descriptionHidesThePassword() {
        let configuration = ConnectionConfiguration("postgres://app:p%40ss@db.example:6543/shop")
        #expect(configuration.description == "app@db.example:6543/shop")
        #expect(configuration.parameters()?["password"] == "p@ss")
    }

    @Test func multiHostURLsKeepEveryHostTheirPortsAndTheirOptions() throws {
        let url = "postgresql://app:s3cret@127.0.0.1:5433,127.0.0.1:5434/shop?target_session_attrs=read-write"
        let configuration = ConnectionConfiguration(url)
        #expect(configuration.description == "app@127.0.0.1:5433,127.0.0.1:5434/shop")
        let parameters = try #require(configuration.parameters())
        #expect(parameters["host"] == "127.0.0.1,127.0.0.1")
        #expect(parameters["port"] == "5433,5434")
        #expect(parameters["target_session_attrs"] == "read-write")
        // Handed to a child process and parsed back: the same hosts, ports and options.
        let rendered = try #require(configuration.renderedConnectionString())
        let reparsed = ConnectionConfiguration(rendered)
        #expect(reparsed.parameters() == parameters)
        #expect(reparsed.description == configuration.description)
        // The password stays out of every rendering meant for logs.
        #expect(!configuration.debugDescription.contains("s3cret"))
        #expect(!String(describing: Mirror(reflecting: configuration).children.map(\.value)).contains("s3cret"))
        #expect(configuration.redacting("failed: \(url)") == "failed: " + url.replacingOccurrences(of: "s3cret", with: "***"))
        // One port for every host, and hosts left to their defaults.
        #expect(ConnectionConfiguration("host=a,b port=6000 user=u dbname=d").description == "u@a:6000,b:6000/d")
        #expect(ConnectionConfiguration("host=a,,c port=1,,3 user=u dbname=d").description == "u@a:1,localhost:5432,c:3/d")
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
