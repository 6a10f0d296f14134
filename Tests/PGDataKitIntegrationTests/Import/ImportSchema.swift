import Foundation
import PGDataKit
import Testing

/// An entity keyed by an integer, for key conversion and mapper tests; it carries its own
/// mapper (snake_case names).
final class Account: ManagedObject, MappableModel {
    static var objectMapper: ObjectMapper<Account> { ObjectMapper(uniqueKey: \.number, keyStyle: .snakeCase) }

    override class var tableName: String { "accounts" }
    @Attribute(unique: true) var number: Int = 0
    @Attribute var owner: String?
    @Attribute var balance: Decimal?
    @Attribute var openedAt: Date?
    @Attribute var active: Bool = true
}

/// The import tests' schema: the example schema (users, posts) plus `accounts`.
enum ImportSchema {
    /// The accounts' table, generated from the entity.
    static var table: String {
        get throws { try Model(entities: [Account.self]).schemaSQL() }
    }

    /// Runs `body` with a manager over a fresh database with the example schema and
    /// `accounts`.
    static func withManager<T>(_ body: (ContextManager) throws -> T) throws -> T {
        try TestDatabase.withFreshDatabase(migrations: true) { configuration in
            let connection = try Connection(configuration)
            try connection.executeScript(try table)
            connection.close()
            let manager = try ContextManager(configuration: configuration, entities: [User.self, Post.self, Account.self])
            defer { manager.close() }
            return try body(manager)
        }
    }

    /// A query's single integer.
    static func integer(_ sql: String, in manager: ContextManager) throws -> Int {
        try ExampleSchema.count(sql, in: manager)
    }

    /// `n` user records `{"UserID": "u<i>", "Name": …, "Age": …}`.
    static func userRecords(_ range: Range<Int>, name: String = "User") -> [JSONValue] {
        range.map { index in
            ["UserID": .string("u\(index)"), "Name": .string("\(name) \(index)"), "Age": .number(Double(index % 90))]
        }
    }

    /// The setter of the user records.
    static func setUser(_ record: JSONValue, _ user: User) {
        user.name = record["Name"]?.stringValue
        user.age = record["Age"]?.intValue
    }
}
