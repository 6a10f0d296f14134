import Testing

@testable import PGDataKit
@testable import PGDataKitPostgres

/// Every rendering of a value a person might log: description, debug description and
/// `dump`.
private func renderings(_ value: Any) -> [String] {
    var dumped = ""
    dump(value, to: &dumped)
    return ["\(value)", String(reflecting: value), dumped]
}

/// The connection error for a string that libpq cannot use, without any server.
private func connectionError(_ url: String) -> PostgresError? {
    do {
        let connection = try Connection(ConnectionConfiguration(url, overrides: ["connect_timeout": "1"]))
        connection.close()
        Issue.record("connected to \(url)")
        return nil
    } catch let error as PostgresError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

@Suite("Passwords stay out of errors and descriptions, without a server")
struct ConnectionSecretsTests {
    static let password = "s3cr3tPW"

    /// Malformed URLs whose libpq parse error quotes the URL or the password.
    @Test(arguments: [
        "postgres://u:s3cr3tPW@[::1/x",
        "postgres://u:s3cr3tPW%zz@host/db",
        "postgresql://u:%zzs3cr3tPW@host/db",
        "postgres://u@host/db?password=s3cr3tPW%zz",
        "postgres://u:s3cr3tPW@host/db?sslmode=bogus&password=s3cr3tPW",
        "postgres://u:s3cr3tPW@host:notaport/db",
        "postgres://u:s3cr3tPW@host/db?nosuchoption=1",
        "host=h password=s3cr3tPW port=notaport",
        "host=h password='s3cr3tPW' extra",
        "host=h password = s3cr3tPW x",
    ])
    func libpqMessagesAreRedacted(_ url: String) throws {
        let error = try #require(connectionError(url))
        #expect(error.kind == .connectionFailed)
        for text in renderings(error) + [error.message] {
            #expect(!text.contains(Self.password), "\(text)")
        }
        for text in renderings(ConnectionConfiguration(url)) {
            #expect(!text.contains(Self.password), "\(text)")
        }
    }

    /// Other schemes are refused before libpq sees them (libpq would take the whole URL
    /// as a database name, or quote it back in its message).
    @Test(arguments: [
        "postgresql+psycopg2://u:s3cr3tPW@h/db",
        "jdbc:postgresql://h/db?password=s3cr3tPW",
        "mysql://u:s3cr3tPW@h/db",
        "POSTGRES://u:s3cr3tPW@h/db",
        "postgres:/u:s3cr3tPW@h/db",
    ])
    func otherSchemesAreRefused(_ url: String) throws {
        let error = try #require(connectionError(url))
        #expect(error.kind == .connectionFailed)
        #expect(error.message.contains("scheme"), "\(error.message)")
        #expect(error.message.contains("postgres://"), "\(error.message)")
        for text in renderings(error) + [error.message] {
            #expect(!text.contains(Self.password), "\(text)")
        }
        let configuration = ConnectionConfiguration(url)
        #expect(configuration.parameters() == nil)
        for text in renderings(configuration) {
            #expect(!text.contains(Self.password), "\(text)")
        }
    }

    @Test func configurationsNeverShowThePassword() {
        for configuration in [
            ConnectionConfiguration("postgres://app:s3cr3tPW@db.example:6543/shop"),
            ConnectionConfiguration("postgresql://app@db.example/shop?password=s3cr3tPW"),
            ConnectionConfiguration("host=db.example user=app password=s3cr3tPW dbname=shop"),
            ConnectionConfiguration("postgres://app@db.example/shop", overrides: ["password": "s3cr3tPW"]),
            ConnectionConfiguration("postgres://app:s3cr3tPW@db.example/shop").database("other"),
        ] {
            for text in renderings(configuration) {
                #expect(!text.contains(Self.password), "\(text)")
            }
            #expect(configuration.description.contains("db.example"))
            #expect(configuration.parameters()?["password"] == Self.password)
        }
    }

    @Test func redactionKeepsTheRestOfTheMessage() {
        let configuration = ConnectionConfiguration("postgres://u:s3cr3tPW@[::1/x")
        #expect(
            configuration.redacting(#"end of string reached in URI: "postgres://u:s3cr3tPW@[::1/x""#)
                == #"end of string reached in URI: "postgres://u:***@[::1/x""#)
        #expect(
            ConnectionConfiguration("x").redacting(#"see "postgresql://someone:other@h/db" and more"#)
                == #"see "postgresql://someone:***@h/db" and more"#)
        #expect(ConnectionConfiguration("host=h password='a\\'b' x").redacting("a'b and a\\'b") == "*** and ***")
        #expect(ConnectionConfiguration("postgres://u@h/db").redacting("no secrets here") == "no secrets here")
    }
}
